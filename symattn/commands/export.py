"""``symattn export``: a worksheet (or one problem) as a Moodle, Canvas or PrairieLearn question."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from pathlib import Path

from symattn.commands import Outcome, deprecated_alias, digits_argument
from symattn.commands.explain import places_argument
from symattn.errors import SymattnError

ORDER = 35

_DEFAULT_OUT = {"moodle": "quiz.xml", "qti": "quiz.zip", "prairielearn": "question"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="a worksheet as a Moodle, Canvas (QTI) or PrairieLearn question")
    parser.add_argument("source", nargs="?", metavar="PROBLEM.toml|WORKSHEET_DIR",
                        help="a problem file, or a folder written by 'symattn worksheet' (one "
                             "question per version)")
    parser.add_argument("--example", metavar="NAME", help="a built-in example instead")
    parser.add_argument("--to", required=True, choices=("moodle", "qti", "prairielearn"),
                        help="moodle: quiz.xml (Cloze); qti: quiz.zip for Canvas Classic Quizzes; "
                             "prairielearn: a question folder")
    parser.add_argument("-o", "--output", dest="out", metavar="OUT",
                        help="the file (moodle, qti) or folder (prairielearn) to write "
                             "(default quiz.xml, quiz.zip, question)")
    parser.add_argument("--out", dest="out", metavar="OUT", action=deprecated_alias("-o/--output"),
                        help="deprecated: the old name of -o/--output")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--digits", type=digits_argument, metavar="D",
                           help="significant digits of the answers (default: the worksheet's, or 3)")
    precision.add_argument("--places", type=places_argument, metavar="P",
                           help="decimal places of the answers instead")
    parser.add_argument("--questions", metavar="Q,K,...",
                        help="the steps asked for (default: the worksheet's, or all)")
    parser.add_argument("--points", metavar="P",
                        help="points per question, as 'symattn worksheet --points' takes them: 2 "
                             "(each), 1,1,2,3 (in question order) or weights=3,output=2 (default: "
                             "the worksheet folder's, or 1 an answer box); each box gets an equal "
                             "share of its question's points")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing export (file or folder) made from another "
                             "source or number of versions")
    parser.add_argument("--random", action="store_true",
                        help="prairielearn: each variant a fresh hand-friendly version drawn from "
                             "its variant_seed, shaped like the problem")
    parser.set_defaults(run=run)


def _questions(text: str) -> tuple[str, ...]:
    from symattn.classroom.answers import QUESTIONS
    from symattn.classroom.worksheets.backward_sheet import BACKWARD_ASKABLE

    asked = [q.strip() for q in text.split(",") if q.strip()]
    for q in asked:
        if q not in QUESTIONS and q not in BACKWARD_ASKABLE:
            raise SymattnError(f"--questions: no question {q!r}; choose from {', '.join(QUESTIONS)} "
                               f"(with a backward key also {', '.join(BACKWARD_ASKABLE)})")
    if not asked:
        raise SymattnError(f"--questions is empty; choose from {', '.join(QUESTIONS)}")
    return tuple(asked)


def _made_from(source: str | None, example: str | None, count: int, random: bool) -> str:
    """What an export is made from, as it records it: the source's name and a digest of its
    full path (the path itself stays private), or the example; and the number of versions."""
    if source:
        path = os.path.abspath(source)
        name = re.sub(r"[^A-Za-z0-9._ ]+", "_", Path(path).name)[:80] or "_"
        digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:12]
        what = f"{name} ({digest})"
    else:
        what = f"example {example}"
    return f"{what}, {count} version(s)" + (", random" if random else "")


def run(args: argparse.Namespace) -> Outcome:
    from symattn.numbers.certify import Rounding
    from symattn.classroom.answers import load_versions
    from symattn.classroom.output import write_file, write_folder

    if args.source and args.example:
        raise SymattnError("give a problem file, a worksheet folder or --example NAME, not two")
    if args.random and args.to != "prairielearn":
        raise SymattnError("--random applies to --to prairielearn (a platform that runs symattn)")
    if args.places is not None and args.places > 12 or args.digits is not None and args.digits > 15:
        raise SymattnError("a platform compares floats: use at most 15 significant digits or "
                           "12 decimal places")
    if args.source and not Path(args.source).exists():
        raise SymattnError(f"{args.source}: no such file or folder")
    rounding = (Rounding(places=args.places) if args.places is not None
                else Rounding(digits=args.digits) if args.digits is not None else None)
    questions = _questions(args.questions) if args.questions else None
    if not args.source and not args.example:
        raise SymattnError("export what? give a problem file, a worksheet folder or --example NAME "
                           "(the lesson is --example i-love-cats)")
    out = args.out if args.out is not None else _DEFAULT_OUT[args.to]
    versions = load_versions(args.source, args.example, rounding, questions, args.points)
    identity = _made_from(args.source, args.example, len(versions), args.random)
    if args.to == "moodle":
        from symattn.classroom.moodle import moodle_xml

        write_file(moodle_xml(versions, made_from=identity), out, identity, args.force)
        what = f"{len(versions)} Cloze question(s) in one category"
    elif args.to == "qti":
        from symattn.classroom.qti import qti_zip

        write_file(qti_zip(versions, made_from=identity), out, identity, args.force)
        what = f"{len(versions)} quiz(zes) of numerical items"
    else:
        from symattn.classroom.prairielearn import prairielearn_files

        write_folder(out, prairielearn_files(versions, random=args.random), "symattn-export.txt",
                     identity=identity, force=args.force)
        what = ("a question drawing a fresh version per variant" if args.random
                else f"a question over {len(versions)} version(s)")
    return Outcome(f"wrote {out}: {what}\n")
