"""``symattn examples``: list the built-in examples, or print one."""

from __future__ import annotations

import argparse

from symattn.commands import Outcome
from symattn.examples import example_about, example_names, example_text

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("examples", help="list the built-in examples")
    parser.add_argument("--show", metavar="NAME", help="print one example's problem file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    if args.show:
        return Outcome(example_text(args.show))
    names = example_names()
    width = max(len(n) for n in names)
    return Outcome("".join(f"{n.ljust(width)}  {example_about(n)}\n" for n in names))
