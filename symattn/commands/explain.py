"""``symattn explain``: work a problem step by step (text, JSON, LaTeX, PDF or HTML)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from symattn.commands import (MAX_DIGITS, PAPERS, Outcome, deprecated_alias, digits_argument,
                              whole_number_argument)
from symattn.errors import SymattnError

if TYPE_CHECKING:
    from symattn.problem.problem import Problem

ORDER = 10


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """PROBLEM.toml or --example NAME (default: the lesson), shared by commands."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("problem", nargs="?", help="a problem file (TOML)")
    source.add_argument("--example", metavar="NAME", help="a built-in example (see 'symattn examples')")


def load_problem(args: argparse.Namespace) -> "Problem":
    """The problem named on the command line (the lesson when none is)."""
    from symattn.examples import DEFAULT_EXAMPLE, load_example
    from symattn.problem.problem import Problem

    if args.problem:
        return Problem.from_toml(args.problem)
    return load_example(args.example or DEFAULT_EXAMPLE)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("explain", help="work a problem step by step (default: the lesson 'I love cats')")
    add_problem_arguments(parser)
    parser.add_argument("--format", choices=("text", "json", "latex", "html"), default=None,
                        help="text (default), json, latex (a complete document) or html (one self-contained page)")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--digits", type=digits_argument, default=None, metavar="N",
                           help="significant digits of every decimal (default 3)")
    precision.add_argument("--places", type=places_argument, default=None, metavar="N",
                           help="decimal places instead of significant digits")
    parser.add_argument("--fragment", action="store_true",
                        help="LaTeX: only the body, for pasting into a lesson")
    parser.add_argument("--pdf", action="store_true",
                        help="compile the LaTeX to a PDF (-o FILE.pdf; needs latexmk or pdflatex)")
    parser.add_argument("--paper", choices=PAPERS, default=None,
                        help="LaTeX and PDF: the paper size, a4 or letter (default letter)")
    parser.add_argument("--rows", metavar="I,cats",
                        help="the rows worked by hand (token names or 0-based indices; JSON, which "
                             "lists every row, names them in worked_rows)")
    parser.add_argument("--decimal-only", action="store_true",
                        help="JSON: leave out the exact strings (they grow fast with n)")
    parser.add_argument("--row", dest="rows", metavar="TOKEN", action=deprecated_alias("--rows"),
                        help="deprecated: the old spelling of --rows with one row")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)


#: argparse type for ``--places``: decimal places, 0 to MAX_DIGITS
places_argument = whole_number_argument("--places", 0, MAX_DIGITS)


def _check_options(args: argparse.Namespace) -> str:
    """The output format, after refusing combinations that cannot be honoured."""
    fmt = args.format or ("latex" if args.pdf or args.fragment else "text")
    if args.decimal_only and fmt != "json":
        raise SymattnError("--decimal-only applies to --format json")
    for flag, given, formats in (("--pdf", args.pdf, ("latex",)), ("--fragment", args.fragment, ("latex",)),
                                 ("--paper", args.paper, ("latex",))):
        if given and fmt not in formats:
            raise SymattnError(f"{flag} applies to --format {' or --format '.join(formats)}, not --format {fmt}")
    if args.pdf and args.fragment:
        raise SymattnError("--pdf compiles a whole document: leave out --fragment")
    if args.pdf and not args.output:
        raise SymattnError("--pdf needs -o FILE.pdf: a PDF is not written to the terminal")
    if args.pdf and not args.output.lower().endswith(".pdf"):
        from pathlib import PurePath

        stem = PurePath(args.output).stem or "derivation"
        raise SymattnError(f"--pdf writes a PDF: name it -o {stem}.pdf, not -o {args.output} "
                           "(for the LaTeX source use --format latex -o FILE.tex)")
    return fmt


def run(args: argparse.Namespace) -> Outcome:
    from symattn.trace.trace import Trace

    fmt = _check_options(args)
    if args.pdf:
        from symattn.document.pdf import find_engine

        find_engine()  # a missing TeX is reported before any work
    trace = Trace(load_problem(args))
    digits = args.digits if args.digits is not None else 3
    if fmt == "json":
        from symattn.document.trace_json import render_json

        rounding, rows = _rounding_and_rows(args, digits)
        worked = _worked_rows(trace, args, rows) if args.rows else None
        return Outcome(render_json(trace, digits, decimal_only=args.decimal_only, places=args.places,
                                   worked_rows=worked))
    if fmt == "latex":
        return _latex(trace, args, digits)
    if fmt == "html":
        return _html(trace, args, digits)
    from symattn.document.trace_text import TextOptions, render_text
    from symattn.trace.trace import IndexError_

    _, rows = _rounding_and_rows(args, digits)
    options = TextOptions(digits=digits, places=args.places, rows=rows if args.rows else None)
    try:
        return Outcome(render_text(trace, options))
    except IndexError_ as exc:
        raise SymattnError(f"--rows {args.rows}: {exc}") from None


def _worked_rows(trace, args: argparse.Namespace, rows) -> list[str] | None:
    """JSON: the token names of the rows --rows asks to work by hand (None: not asked)."""
    if not rows:
        return None
    from symattn.trace.trace import IndexError_

    try:
        step = trace.step("scores")
        return [step.row_labels[step.row_index(r)] for r in rows]
    except IndexError_ as exc:
        raise SymattnError(f"--rows {args.rows}: {exc}") from None


def _rounding_and_rows(args: argparse.Namespace, digits: int):
    from symattn.numbers.certify import Rounding

    rounding = Rounding(places=args.places) if args.places is not None else Rounding(digits=digits)
    rows = tuple(r.strip() for r in args.rows.split(",") if r.strip()) if args.rows else None
    return rounding, rows


def _html(trace, args: argparse.Namespace, digits: int) -> Outcome:
    """One self-contained HTML page of the derivation (the LaTeX document's sections)."""
    from symattn.document.build.trace import build_document
    from symattn.document.printers.html import print_html
    from symattn.document.trace_latex import LatexOptions
    from symattn.trace.trace import IndexError_

    rounding, rows = _rounding_and_rows(args, digits)
    try:
        doc = build_document(trace, LatexOptions(rounding=rounding, rows=rows).document_options())
    except IndexError_ as exc:
        raise SymattnError(f"--rows {args.rows}: {exc}") from None
    return Outcome(print_html(doc))


def _latex(trace, args: argparse.Namespace, digits: int) -> Outcome:
    from pathlib import Path

    from symattn.document.trace_latex import LatexOptions, render_latex
    from symattn.trace.trace import IndexError_

    rounding, rows = _rounding_and_rows(args, digits)
    try:
        tex = render_latex(trace, LatexOptions(rounding=rounding, rows=rows, paper=args.paper or "letter"),
                           fragment=args.fragment)
    except IndexError_ as exc:
        raise SymattnError(f"--rows {args.rows}: {exc}") from None
    if not args.pdf:
        return Outcome(tex)
    from symattn.output.files import write_atomically
    from symattn.document.pdf import PdfError, compile_tex

    target = Path(args.output)
    write_atomically(compile_tex(tex, target.stem or "derivation"), target, error=PdfError)
    return Outcome("")
