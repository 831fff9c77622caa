"""``symattn explain``: work a problem step by step (text or JSON)."""

from __future__ import annotations

import argparse

from symattn.commands import Outcome, digits_argument
from symattn.errors import SymattnError
from symattn.examples import DEFAULT_EXAMPLE, load_example
from symattn.problem import Problem

ORDER = 10


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """PROBLEM.toml or --example NAME (default: the lesson), shared by commands."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("problem", nargs="?", help="a problem file (TOML)")
    source.add_argument("--example", metavar="NAME", help="a built-in example (see 'symattn examples')")


def load_problem(args: argparse.Namespace) -> Problem:
    """The problem named on the command line (the lesson when none is)."""
    if args.problem:
        return Problem.from_toml(args.problem)
    return load_example(args.example or DEFAULT_EXAMPLE)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("explain", help="work a problem step by step (default: the lesson 'I love cats')")
    add_problem_arguments(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--digits", type=digits_argument, default=3, metavar="N",
                        help="significant digits of every decimal (default 3)")
    parser.add_argument("--decimal-only", action="store_true",
                        help="JSON: leave out the exact strings (they grow fast with n)")
    parser.add_argument("--row", metavar="TOKEN",
                        help="the row worked by hand (token name or 0-based index)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.trace import Trace

    if args.decimal_only and args.format != "json":
        raise SymattnError("--decimal-only applies to --format json")
    trace = Trace(load_problem(args))
    if args.format == "json":
        from symattn.render.json import render_json

        return Outcome(render_json(trace, args.digits, decimal_only=args.decimal_only))
    from symattn.render.text import TextOptions, render_text

    return Outcome(render_text(trace, TextOptions(digits=args.digits, dot_row=args.row,
                                                  softmax_row=args.row)))
