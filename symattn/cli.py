"""The ``symattn`` command: a thin front end over the public functions.

Each subcommand lives in its own module under :mod:`symattn.commands`.
Every user error is one line on stderr and exit status 2; output is
rendered whole before anything is written, so a failure never leaves half
a file behind.  A file that cannot be read or written (missing, a folder,
no permission, a full disk) is a user error too; Ctrl-C exits 130 without a
traceback.  Any other exception is a bug in symattn and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import NoReturn, Sequence

import symattn.commands
from symattn.output import files
from symattn.errors import SymattnError


class UsageError(SymattnError):
    """A command line that cannot be run as written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _command_modules() -> list:
    modules = [importlib.import_module(f"symattn.commands.{info.name}")
               for info in pkgutil.iter_modules(symattn.commands.__path__)]
    return sorted(modules, key=lambda m: m.ORDER)


def build_parser() -> argparse.ArgumentParser:
    from symattn import __version__

    parser = _Parser(prog="symattn", description=(
        "Scaled dot-product attention in exact arithmetic, explained step by step, "
        "with certified decimals."))
    parser.add_argument("--version", action="version", version=f"symattn {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for module in _command_modules():
        module.register(sub)
    return parser


def write_atomically(text: str, output: str) -> None:
    """Write a command's output file whole or not at all."""
    files.write_atomically(text, output, error=UsageError)


def _refuse_text_named_pdf(args: argparse.Namespace, output: str) -> None:
    """``-o FILE.pdf`` without ``--pdf`` would write text into a file named like a PDF (the
    mirror of explain's refusal of ``--pdf -o FILE.tex``)."""
    if not str(output).lower().endswith(".pdf") or getattr(args, "pdf", False) \
            or args.command == "worksheet":                       # its -o is a folder
        return
    fix = ("add --pdf to compile one (needs TeX)" if hasattr(args, "pdf") else
           "name the file for its format (.txt, .tex, .json, .html, .csv)")
    raise UsageError(f"-o {output}: symattn {args.command} writes text here, not a PDF: {fix}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version: argparse printed them
            return done.code if isinstance(done.code, int) else 0
        if args.command is None:
            parser.print_help()
            return 0
        output = getattr(args, "output", None)
        if output is not None:
            files.resolve_output(output, UsageError)  # a bad -o is refused before any work
            _refuse_text_named_pdf(args, output)
        outcome = args.run(args)
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
    except OSError as exc:  # a file that cannot be read or written: the user's to fix
        print(f"symattn: error: {files.describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("symattn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":   # python3 -m symattn.cli, as well as python3 -m symattn
    raise SystemExit(main())
