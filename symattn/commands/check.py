"""``symattn check``: verdicts on every figure of a figures file (or a lesson's figures)."""

from __future__ import annotations

import argparse

from symattn.commands import Outcome, paper, pdf_or_text
from symattn.commands.heads import add_format_arguments, chosen_format

ORDER = 30


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "check", help="check written figures against the exact values (exit 0 all right, "
                      "1 some not, 2 invalid file)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("figures", nargs="?", help="a figures file (TOML)")
    source.add_argument("--example", metavar="NAME",
                        help="check every figure a built-in lesson prints (e.g. i-love-cats)")
    add_format_arguments(parser, json_help="the verdicts as JSON", latex_help="")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.check.figfile import example_figures, load_figures
    from symattn.check.report import render_json

    fmt = chosen_format(args)
    figures = example_figures(args.example) if args.example else load_figures(args.figures)
    verdicts = figures.check()
    status = 0 if all(v.right for v in verdicts) else 1
    if fmt == "json":
        return Outcome(render_json(verdicts, figures.source), status)
    from symattn.document.build.check import build_check_document
    from symattn.document.formats import print_document

    return pdf_or_text(args, print_document(build_check_document(verdicts, figures.title), fmt,
                                            fragment=args.fragment, paper=paper(args)), status)
