"""How each result is shown: the printing behind trace/display.py's hook.

One table, (result class, format) → printer.  A result with no entry for a format has no such
view (``_repr_html_`` then returns None and Jupyter shows the next one)."""

from __future__ import annotations

from typing import Any, Callable

from symattn.document.build.facts import build_facts_document, line_text, proof_section
from symattn.document.build.floatref import build_floatref_document
from symattn.document.build.heads import build_heads_document
from symattn.document.formats import html_fragment, print_document
from symattn.document.jupyter import trace_repr_html
from symattn.document.printers.latex import LatexPrinter, print_latex
from symattn.document.printers.text import TextPrinter
from symattn.document.trace_latex import step_repr_latex, trace_repr_latex
from symattn.document.trace_text import render_text
from symattn.facts.proof import Line, Proof
from symattn.floatref.ulp import ULPReport
from symattn.heads.heads import MultiHeadResult
from symattn.trace.trace import Step, Trace


def proof_text(proof: Proof) -> str:
    """The fact's section of the facts document, without its leading blank line."""
    lines = TextPrinter().print(proof_section(proof))
    return "\n".join(lines[1:]) + "\n"


def proof_latex(proof: Proof) -> str:
    return "\n".join(LatexPrinter().print(proof_section(proof))) + "\n"


def line_latex(line: Line) -> str:
    """A proof line as LaTeX running text: words escaped, math in ``$…$``."""
    if line.tex:
        return f"${line.tex}$"
    return LatexPrinter().words(line.parts)


PRINTERS: dict[tuple[type, str], Callable[[Any], str]] = {
    (Trace, "text"): render_text,
    (Trace, "latex"): trace_repr_latex,
    (Trace, "html"): trace_repr_html,
    (Step, "latex"): step_repr_latex,
    (Line, "text"): lambda line: line_text(line.parts),
    (Line, "latex"): line_latex,
    (Proof, "text"): proof_text,
    (Proof, "latex"): proof_latex,
    (Proof, "html"): lambda p: html_fragment(build_facts_document([p], title=p.fact)),
    (ULPReport, "text"): lambda r: print_document(build_floatref_document(r), "text"),
    (ULPReport, "html"): lambda r: html_fragment(build_floatref_document(r)),
    (MultiHeadResult, "latex"): lambda r: print_latex(build_heads_document(r)),
    (MultiHeadResult, "html"): lambda r: html_fragment(build_heads_document(r)),
}


def show(result: object, fmt: str) -> str | None:
    """``result`` printed in ``fmt``, or None when it has no view in that format."""
    for cls in type(result).__mro__:
        printer = PRINTERS.get((cls, fmt))
        if printer is not None:
            return printer(result)
    return None
