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
import tempfile
from pathlib import Path
from typing import Sequence

import symattn.commands
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
    """Write a whole file or nothing: a temporary file renamed into place."""
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
