"""``symattn heads``: multi-head / grouped-query attention, each head through the engine."""

from __future__ import annotations

import argparse
import json

from symattn.commands import Outcome, add_pdf_arguments, check_pdf_options, digits_argument, paper, pdf_or_text

ORDER = 45


FORMATS = ("text", "json", "latex", "html")
FORMAT_HELP = "text (default), json, latex (a complete document) or html (one self-contained page)"


def add_format_arguments(parser: argparse.ArgumentParser, *, latex_help: str, json_help: str,
                         formats: tuple[str, ...] = FORMATS, format_help: str = FORMAT_HELP,
                         output_help: str = "write to FILE instead of stdout") -> None:
    """``--format text|json|latex|html``, ``--fragment``, ``-o FILE`` and the old ``--json``/``--latex``
    aliases (shared by the commands that print a result; only heads and facts had ``--latex``):
    ``--latex`` keeps printing what it always did, the LaTeX body to paste into a lesson
    (``--format latex --fragment``).  ``formats``: grade adds its CSV, the default there."""
    parser.add_argument("--format", choices=formats, default=None, help=format_help)
    parser.add_argument("--json", action="store_true", help=f"the same as --format json: {json_help}")
    if latex_help:
        parser.add_argument("--latex", action="store_true",
                            help=f"the same as --format latex --fragment: {latex_help} (the body, to paste)")
    parser.add_argument("--fragment", action="store_true",
                        help="LaTeX: only the body, for pasting into a lesson")
    parser.add_argument("-o", "--output", metavar="FILE", help=output_help)
    add_pdf_arguments(parser)


def chosen_format(args: argparse.Namespace, default: str = "text") -> str:
    """The one format the flags ask for; two different ones are refused (``--pdf`` asks for
    LaTeX, and is checked here with ``--paper``, before any work)."""
    from symattn.errors import SymattnError

    asked = [f for f, on in (("json", args.json), ("latex", getattr(args, "latex", False))) if on]
    if len(asked) > 1:
        raise SymattnError("give --json or --latex, not both")
    if asked and args.format and args.format != asked[0]:
        raise SymattnError(f"--{asked[0]} is --format {asked[0]}: leave out --format {args.format}")
    pdf = getattr(args, "pdf", False)
    fmt = args.format or (asked[0] if asked else "latex" if pdf else default)
    if getattr(args, "latex", False):
        args.fragment = True          # --latex is --format latex --fragment, with or without --format latex
    if getattr(args, "fragment", False) and fmt != "latex":
        raise SymattnError(f"--fragment applies to --format latex, not --format {fmt}")
    check_pdf_options(args, fmt)
    return fmt


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "heads", help="multi-head, grouped-query and multi-query attention (default: a two-head demo)",
        description="Works a multi-head problem file (heads = h with split W_q, W_k, W_v, or [[head]] "
                    "tables; kv_heads; W_o; variant keys mask, rope, alibi, softcap, sink, tiles, decode at the "
                    "top or per [[head]], alibi = \"default\" for the paper's slopes): every head step by step "
                    "with its variant steps, the concatenation, W_o and the averaged weights, with certified "
                    "decimals.")
    parser.add_argument("problem", nargs="?", help="a multi-head problem file (TOML)")
    parser.add_argument("--example", metavar="NAME",
                        help="a built-in multi-head example: gqa-exercise (Q, K, V given per head), alibi-heads (the paper's ALiBi slopes per head), mixed-variants (a different variant per head); symattn examples lists them")
    parser.add_argument("--show", action="store_true", help="print the problem file (the demo's, or --example's) and stop")
    parser.add_argument("--figure", nargs=2, action="append", metavar=("TARGET", "TEXT"),
                        help="check a written figure about one head, e.g. --figure 'head 1: output' '0.636, 1.36' "
                             "(repeatable; names the mistake gqa-tiled; exit 1 when one is not right)")
    add_format_arguments(parser, json_help="the machine-readable result",
                         latex_help="the LaTeX (amsmath)")
    parser.add_argument("--digits", type=digits_argument, default=3, metavar="N",
                        help="significant digits of every decimal (default 3)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.heads.heads import DEMO_TOML, MultiHeadProblem, attend_heads

    from symattn.errors import SymattnError
    from symattn.heads.heads import heads_example_text

    fmt = chosen_format(args)
    if args.problem and args.example:
        raise SymattnError("give a problem file or --example, not both")
    text = heads_example_text(args.example) if args.example else DEMO_TOML
    if args.show:
        return Outcome(text)
    if args.problem:
        problem = MultiHeadProblem.from_toml(args.problem)
    else:
        problem = MultiHeadProblem.from_toml_text(text, source=f"example {args.example!r}" if args.example
                                                  else "the demo")
    if args.figure:
        return _check_figures(problem, args.figure, fmt, args)
    result = attend_heads(problem)
    if fmt == "json":
        from symattn.document.build.heads import heads_json

        return Outcome(json.dumps(heads_json(result, args.digits), ensure_ascii=False) + "\n")
    from symattn.document.build.heads import build_heads_document
    from symattn.document.formats import print_document

    return pdf_or_text(args, print_document(build_heads_document(result, args.digits), fmt,
                                            fragment=args.fragment, paper=paper(args)))


def _check_figures(problem, figures: list[list[str]], fmt: str, args: argparse.Namespace) -> Outcome:
    """Verdicts on figures about single heads, printed as ``symattn check`` prints its own."""
    from symattn.heads.check import HeadsChecker

    verdicts = HeadsChecker(problem).check_all([(t, x) for t, x in figures])
    status = 0 if all(v.right for v in verdicts) else 1
    if fmt == "json":
        return Outcome(json.dumps([v.to_json() for v in verdicts], indent=2, ensure_ascii=False) + "\n", status)
    from symattn.document.build.check import build_check_document
    from symattn.document.formats import print_document

    return pdf_or_text(args, print_document(build_check_document(verdicts, problem.title), fmt,
                                            fragment=args.fragment, paper=paper(args)), status)
