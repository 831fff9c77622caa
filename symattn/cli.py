"""The ``symattn`` command: a thin front end over the public functions.

Each subcommand lives in its own module under :mod:`symattn.commands`.
Every user error is one line on stderr and exit status 2; output is
rendered whole before anything is written, so a failure never leaves half
a file behind.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import Sequence

import symattn.commands
from symattn import files
from symattn.errors import SymattnError


class UsageError(SymattnError):
    """A command line that cannot be run as written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _command_modules() -> list:
    modules = [importlib.import_module(f"symattn.commands.{info.name}")
               for info in pkgutil.iter_modules(symattn.commands.__path__)]
    return sorted(modules, key=lambda m: m.ORDER)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="symattn", description=(
        "Scaled dot-product attention in exact arithmetic, explained step by step, "
        "with certified decimals."))
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for module in _command_modules():
        module.register(sub)
    return parser


def write_atomically(text: str, output: str) -> None:
    """Write a command's output file whole or not at all."""
    files.write_atomically(text, output, error=UsageError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        outcome = args.run(args)
        output = getattr(args, "output", None)
        if output is not None and outcome.text:
            write_atomically(outcome.text, output)
        elif outcome.text:
            sys.stdout.write(outcome.text)
            sys.stdout.flush()
        return outcome.status
    except SymattnError as exc:
        print(f"symattn: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
