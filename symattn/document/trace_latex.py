"""The LaTeX view: the derivation as a compilable document, a fragment, or Jupyter math.

The outline is the derivation document (``symattn.document.build.trace``), printed
by ``document.printers.latex``; this module chooses what LaTeX shows (every
dot product of a small problem, the worked rows of ``--rows``, the rounding)
and wraps the body in a preamble.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from symattn.numbers.certify import Rounding
from symattn.document.build.trace import DocumentOptions, build_document, step_decimals
from symattn.document.printers.latex import (  # noqa: F401 (re-exported for worksheets)
    LatexPrinter, aligned, display, inline, print_latex, product_latex,
)
from symattn.document.jupyter import step_math, step_repr_latex, trace_repr_latex  # noqa: F401 (re-exported)
from symattn.document.support.latexdoc import PAPERS, PREAMBLE, document, preamble  # noqa: F401 (re-exported)
from symattn.trace.trace import Trace

__all__ = ["LatexOptions", "LatexRenderer", "PAPERS", "document", "preamble", "render_latex",
           "step_math", "step_repr_latex", "trace_repr_latex"]


@dataclass(frozen=True)
class LatexOptions:
    """What the LaTeX view shows and how numbers are rounded."""

    rounding: Rounding = field(default_factory=lambda: Rounding(digits=3))
    rows: tuple[int | str, ...] | None = None   # worked rows (default: first for sums, last for softmax)
    limit: int = 8                               # larger matrices elide their middle
    sci_digits: int = 3                          # a value that rounds to 0 at the places: shown to these digits
    paper: str = "letter"                        # or "a4" (--paper)

    def document_options(self) -> DocumentOptions:
        return DocumentOptions(rounding=self.rounding, dot_rows=self.rows, softmax_rows=self.rows,
                               output_rows=self.rows, every_dot_product=True, limit=self.limit,
                               sci_digits=self.sci_digits)


class LatexRenderer:
    """The LaTeX of one Trace: ``body()`` for pasting, ``render()`` for a whole document,
    ``dec(step)`` for a step's certified decimals as LaTeX (worksheet keys)."""

    def __init__(self, trace: Trace, options: LatexOptions | None = None) -> None:
        self.trace = trace
        self.options = options or LatexOptions()
        self.rounding = self.options.rounding
        self._doc = None

    @property
    def doc(self):
        if self._doc is None:
            self._doc = build_document(self.trace, self.options.document_options())
        return self._doc

    def dec(self, name: str) -> list[list[str]]:
        """A step's certified decimals in LaTeX (scientific where the places round to 0)."""
        printer = LatexPrinter()
        cells = step_decimals(self.trace, name, self.options.document_options())
        return [[printer.print(c) for c in row] for row in cells]

    def body(self, header: bool = True) -> str:
        """The derivation without the document around it (for pasting into a lesson)."""
        return print_latex(self.doc, header=header)

    def render(self) -> str:
        return document(self.body(), paper=self.options.paper)


def render_latex(trace: Trace, options: LatexOptions | None = None, *, fragment: bool = False) -> str:
    """The whole derivation: a complete document, or with ``fragment`` just its body."""
    renderer = LatexRenderer(trace, options)
    return renderer.body() if fragment else renderer.render()
