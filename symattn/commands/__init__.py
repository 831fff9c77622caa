"""The subcommands of ``symattn``, one module each.

Every module here defines ``ORDER`` (its place in ``symattn --help``) and
``register(subparsers)``, which adds its parser and sets ``run``: a function
of the parsed arguments returning a :class:`Outcome`.  ``symattn.cli``
finds the modules itself, so a new command is a new file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """What a command produced: text for stdout (or ``-o FILE``) and an exit status."""

    text: str = ""
    status: int = 0


MAX_DIGITS = 100_000


def whole_number_argument(flag: str, low: int, high: int, what: str = "") -> Callable[[str], int]:
    """An argparse type for a whole-number flag from ``low`` to ``high`` (``what``: the unit
    the range message names), refusing anything else in one line that names the flag."""
    unit = f" ({what})" if what else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be between {low} and {high}{unit}, got {value}")
        return value
    return parse


#: argparse type for ``--digits``: significant digits, 1 to MAX_DIGITS
digits_argument = whole_number_argument("--digits", 1, MAX_DIGITS)


PAPERS = ("letter", "a4")


def add_pdf_arguments(parser: argparse.ArgumentParser) -> None:
    """``--pdf`` and ``--paper a4|letter``, on every command that writes LaTeX."""
    parser.add_argument("--pdf", action="store_true",
                        help="compile the LaTeX to a PDF (-o FILE.pdf; needs pdflatex or latexmk)")
    parser.add_argument("--paper", choices=PAPERS, default=None,
                        help="LaTeX and PDF: the paper size, a4 or letter (default letter)")


def check_pdf_options(args: argparse.Namespace, fmt: str) -> None:
    """Refuse what --pdf and --paper cannot honour (one line each, before any work), and
    find TeX now, so a missing engine is reported before the problem is worked."""
    from pathlib import PurePath

    from symattn.errors import SymattnError

    if getattr(args, "paper", None) and fmt != "latex":
        raise SymattnError(f"--paper sets the LaTeX paper size: it applies to --format latex or "
                           f"--pdf, not --format {fmt}")
    if not getattr(args, "pdf", False):
        return
    if fmt != "latex":
        raise SymattnError(f"--pdf compiles the LaTeX: leave out --format {fmt} (or --json)")
    if getattr(args, "fragment", False):
        raise SymattnError("--pdf compiles a whole document: leave out --fragment (or --latex)")
    if not args.output:
        raise SymattnError("--pdf needs -o FILE.pdf: a PDF is not written to the terminal")
    if not str(args.output).lower().endswith(".pdf"):
        stem = PurePath(args.output).stem or "report"
        raise SymattnError(f"--pdf writes a PDF: name it -o {stem}.pdf, not -o {args.output} "
                           "(for the LaTeX source use --format latex -o FILE.tex)")
    from symattn.document.pdf import find_engine

    find_engine()


def paper(args: argparse.Namespace) -> str:
    """The paper size asked for (letter unless --paper a4)."""
    return getattr(args, "paper", None) or "letter"


def compile_pdf(tex: str, output: str) -> bytes:
    """The PDF of a whole LaTeX document (rerun while TeX asks: a longtable needs two passes)."""
    from pathlib import Path

    from symattn.document.pdf import compile_tex

    return compile_tex(tex, Path(output).stem or "report")


def pdf_or_text(args: argparse.Namespace, text: str, status: int = 0) -> Outcome:
    """The command's LaTeX compiled to ``-o FILE.pdf`` when --pdf was given, else the text as it is."""
    if not getattr(args, "pdf", False):
        return Outcome(text, status)
    from symattn.document.pdf import PdfError
    from symattn.output.files import write_atomically

    write_atomically(compile_pdf(text, args.output), args.output, error=PdfError)
    return Outcome("", status)


def deprecated_alias(new: str) -> type[argparse.Action]:
    """An argparse action for an old spelling kept for one release: it stores the value where
    the new flag does and prints a one-line note on stderr saying which flag to use."""

    class _Deprecated(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None) -> None:
            import sys

            print(f"symattn: note: {option_string} is deprecated (it goes in the next release): "
                  f"use {new}", file=sys.stderr)
            setattr(namespace, self.dest, values)

    return _Deprecated
