"""``symattn check``: verdicts on every figure of a figures file (or a lesson's figures)."""

from __future__ import annotations

import argparse

from symattn.commands import Outcome

ORDER = 30


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "check", help="check written figures against the exact values (exit 0 all right, "
                      "1 some not, 2 invalid file)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("figures", nargs="?", help="a figures file (TOML)")
    source.add_argument("--example", metavar="NAME",
                        help="check every figure a built-in lesson prints (e.g. i-love-cats)")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.check.figfile import example_figures, load_figures
    from symattn.check.report import render_json, render_text

    figures = example_figures(args.example) if args.example else load_figures(args.figures)
    verdicts = figures.check()
    text = (render_json(verdicts, figures.source) if args.json
            else render_text(verdicts, figures.title))
    return Outcome(text, 0 if all(v.right for v in verdicts) else 1)
