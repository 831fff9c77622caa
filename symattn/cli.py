"""The ``symattn`` command: a thin front end over the public functions.

Every user error is one line on stderr and exit status 2; output is
rendered whole before anything is written, so a failure never leaves half
a file behind.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from symattn.errors import SymattnError
from symattn.examples import DEFAULT_EXAMPLE, example_about, example_names, example_text, load_example
from symattn.problem import Problem

MAX_DIGITS = 100_000


class UsageError(SymattnError):
    """A command line that cannot be run as written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _digits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--digits must be a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_DIGITS:
        raise argparse.ArgumentTypeError(f"--digits must be between 1 and {MAX_DIGITS}, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="symattn", description=(
        "Scaled dot-product attention in exact arithmetic, explained step by step, "
        "with certified decimals."))
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    explain = sub.add_parser("explain", help="work a problem step by step (default: the lesson 'I love cats')")
    source = explain.add_mutually_exclusive_group()
    source.add_argument("problem", nargs="?", help="a problem file (TOML)")
    source.add_argument("--example", metavar="NAME", help="a built-in example (see 'symattn examples')")
    explain.add_argument("--format", choices=("text", "json"), default="text")
    explain.add_argument("--digits", type=_digits, default=3, metavar="N",
                         help="significant digits of every decimal (default 3)")
    explain.add_argument("--decimal-only", action="store_true",
                         help="JSON: leave out the exact strings (they grow fast with n)")
    explain.add_argument("--row", metavar="TOKEN",
                         help="the row worked by hand (token name or 0-based index)")
    explain.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    examples = sub.add_parser("examples", help="list the built-in examples")
    examples.add_argument("--show", metavar="NAME", help="print one example's problem file")
    return parser


def _load(args: argparse.Namespace) -> Problem:
    if args.problem:
        return Problem.from_toml(args.problem)
    return load_example(args.example or DEFAULT_EXAMPLE)


def _explain(args: argparse.Namespace) -> str:
    from symattn.trace import Trace

    if args.decimal_only and args.format != "json":
        raise UsageError("--decimal-only applies to --format json")
    trace = Trace(_load(args))
    if args.format == "json":
        from symattn.render.json import render_json

        return render_json(trace, args.digits, decimal_only=args.decimal_only)
    from symattn.render.text import TextOptions, render_text

    options = TextOptions(digits=args.digits, dot_row=args.row,
                          softmax_row=args.row)
    return render_text(trace, options)


def _examples(args: argparse.Namespace) -> str:
    if args.show:
        return example_text(args.show)
    names = example_names()
    width = max(len(n) for n in names)
    return "".join(f"{n.ljust(width)}  {example_about(n)}\n" for n in names)


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(output)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"cannot write {output}: the folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        text = _explain(args) if args.command == "explain" else _examples(args)
        _write(text, getattr(args, "output", None))
    except SymattnError as exc:
        print(f"symattn: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    return 0
