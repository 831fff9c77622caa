"""``symattn examples``: list the built-in examples, or print one."""

from __future__ import annotations

import argparse

from symattn.commands import Outcome

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("examples", help="list the built-in examples (single-head and multi-head)")
    parser.add_argument("--show", metavar="NAME", help="print one example's problem file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.examples import (about_of, example_about, example_names, example_text,
                                  heads_example_names, heads_example_text)

    heads = heads_example_names()
    if args.show:
        return Outcome(heads_example_text(args.show) if args.show in heads else example_text(args.show))
    names = example_names()
    width = max(len(n) for n in (*names, *heads))
    single = [f"{n.ljust(width)}  {example_about(n)}\n" for n in names]
    multi = [f"{n.ljust(width)}  [symattn heads --example {n}] {about_of(heads_example_text(n), n)}\n"
             for n in heads]
    return Outcome("".join(single + multi))
