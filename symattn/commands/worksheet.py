"""``symattn worksheet``: problem sheets and answer keys, one or many seeded versions."""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from typing import TYPE_CHECKING

from symattn.commands import Outcome, PAPERS, deprecated_alias, digits_argument, whole_number_argument
from symattn.commands.explain import add_problem_arguments, places_argument
from symattn.errors import SymattnError

if TYPE_CHECKING:
    from symattn.classroom.worksheets.choices import SheetChoices

ORDER = 30
LONG_RUN = 10       # from this many versions, progress is reported on stderr


def _progress(k: int, total: int, vid: str) -> None:
    print(f"version {k}/{total} ({vid}) …", file=sys.stderr, flush=True)


#: --versions: A to ZZ
_count = whole_number_argument("--versions", 1, 702, "A to ZZ")


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be a whole number, got {text!r}") from None


def _fraction(text: str) -> Fraction:
    from symattn.classroom.worksheets.choices import min_weight_value

    try:
        return min_weight_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("worksheet", help="problem sheets and answer keys (seeded versions for a class)")
    add_problem_arguments(parser)
    from symattn.classroom.worksheets.templates import template_names

    parser.add_argument("--template", metavar="NAME", choices=template_names(),
                        help="a worksheet template with hand-friendly numbers: "
                             f"{', '.join(template_names())} (instead of a problem or --example)")
    parser.add_argument("-o", "--output", dest="out_dir", metavar="DIR",
                        help="the folder to write (required); a previous worksheet there is "
                             "replaced, other files in it are kept")
    parser.add_argument("--out", dest="out_dir", metavar="DIR", action=deprecated_alias("-o/--output"),
                        help="deprecated: the old name of -o/--output")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty folder symattn did not make (no file in it "
                             "is replaced or removed)")
    parser.add_argument("--pdf", action="store_true", help="also compile every sheet and key to PDF")
    parser.add_argument("--paper", choices=PAPERS, default=None,
                        help="LaTeX and PDF: the paper size, a4 or letter (default letter)")
    from symattn.classroom.worksheets.layouts import LAYOUTS

    parser.add_argument("--layout", choices=list(LAYOUTS), default="standard",
                        help="; ".join(f"{item.name}: {item.about}" for item in LAYOUTS.values()))
    parser.add_argument("--versions", type=_count, metavar="N",
                        help="N random hand-friendly versions shaped like the problem (needs --seed)")
    parser.add_argument("--seed", type=_seed, metavar="S", help="the seed of the versions")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--digits", type=digits_argument, metavar="D",
                           help="significant digits of the answers (default 3)")
    precision.add_argument("--places", type=places_argument, metavar="P",
                           help="decimal places of the answers instead")
    parser.add_argument("--questions", metavar="Q,K,...",
                        help="the steps asked for (default: Q,K,V,scores,scaled,weights,output, "
                             "with a variant's own steps: Q_rot,K_rot / bias,biased / running_max,"
                             "rescale,running_sum / decode_3_q,…,decode_work)")
    parser.add_argument("--square-dk", action="store_true",
                        help="versions: d_k a perfect square, so the scale is a plain fraction")
    parser.add_argument("--allow-ties", action="store_true", help="versions: allow equal scores in a row")
    parser.add_argument("--min-weight", type=_fraction, default=Fraction(1, 100), metavar="W",
                        help="versions: no weight below W (default 0.01)")
    parser.add_argument("--no-derivation", action="store_true",
                        help="keys without the worked derivation")
    parser.add_argument("--points", metavar="P",
                        help="points per question, printed on the sheet and stored for grade: 2 (each), "
                             "1,1,2,3 (in question order) or weights=3,output=2")
    parser.add_argument("--no-separate", action="store_true",
                        help="versions: keep versions where two modelled mistakes give the same answer")
    parser.add_argument("--format", choices=("latex", "html"), default="latex",
                        help="sheets and keys as LaTeX (default; --pdf compiles them) or HTML pages")
    parser.add_argument("--selfcheck", action="store_true",
                        help="write only offline self-check pages for students into DIR, one per "
                             "version (no answers in them; see docs/classroom.md)")
    parser.set_defaults(run=run)


def choices_of(args: argparse.Namespace) -> "SheetChoices":
    """The worksheet's choices from its flags (the page's worksheet download makes the same)."""
    from symattn.classroom.worksheets.choices import SheetChoices

    return SheetChoices(template=args.template, versions=args.versions, seed=args.seed, digits=args.digits,
                        places=args.places, questions=args.questions, points=args.points,
                        square_dk=args.square_dk, allow_ties=args.allow_ties, min_weight=args.min_weight,
                        no_derivation=args.no_derivation, no_separate=args.no_separate, format=args.format,
                        paper=args.paper, layout=args.layout, pdf=args.pdf, selfcheck=args.selfcheck)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.commands.explain import load_problem
    from symattn.examples import DEFAULT_EXAMPLE, example_text
    from symattn.classroom.worksheets.choices import refuse_combinations, sheet_plan
    from symattn.classroom.worksheets.sheets import worksheet_files, write_worksheet
    from symattn.classroom.worksheets.templates import load_template, template_text

    if args.out_dir is None:
        raise SymattnError("worksheet needs -o DIR: the folder to write the sheets and keys into")
    choices = choices_of(args)
    refuse_combinations(choices)
    if args.pdf:
        from symattn.document.pdf import find_engine

        find_engine()
    if args.template and (args.problem or args.example):
        raise SymattnError(f"--template {args.template} is a problem of its own: leave out "
                           f"{args.problem or '--example ' + args.example}, or --template")
    problem = load_template(args.template) if args.template else load_problem(args)
    random = args.versions is not None
    toml = ""
    if not random:
        if args.template:
            toml = template_text(args.template)
        elif args.problem:
            from symattn.problem.tomlfile import read_text

            toml = read_text(args.problem, what="a problem TOML file")
        else:
            toml = example_text(args.example or DEFAULT_EXAMPLE)
    versions, options = sheet_plan(problem, toml, choices)
    progress = _progress if random and args.versions >= LONG_RUN else None
    if args.selfcheck:
        from symattn.classroom.selfcheck import write_selfcheck

        return Outcome(write_selfcheck(versions, choices.rounding, options.questions, args.out_dir))
    files = worksheet_files(versions, options, progress=progress)
    if progress and args.pdf:
        print(f"compiling {2 * len(versions) + 2} PDFs …", file=sys.stderr, flush=True)
    names = write_worksheet(files, args.out_dir, pdf=args.pdf, force=args.force)
    ids = ", ".join(v.vid for v in versions)
    return Outcome(f"wrote {len(names)} files to {args.out_dir}: version{'s' if len(versions) > 1 else ''} "
                   f"{ids}\n")
