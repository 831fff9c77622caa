"""Hand forms as strings, for callers that want one value written out (Jupyter, tests).

The forms themselves are nodes built in ``symattn.document.handforms``
(2/√3, e^(−8/√3), like terms collected); these helpers print one with the
text or LaTeX printer.  Equality and evaluation never use these forms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from symattn.document import handforms as hf
from symattn.document.printers.latex import print_latex
from symattn.document.printers.text import print_text
from symattn.exact.sympytext import latex_text, unicode_text  # noqa: F401 (re-exported)
from symattn.trace.steps import scale_form, scale_formula  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from symattn.trace.trace import Trace


def factor_latex(value: sympy.Expr) -> str:
    """A factor in a written product: ``(-3)``, ``(1 + \\sqrt{2})``, as by hand."""
    return print_latex(hf.factor(value))


def scaled_text(trace: Trace, score: sympy.Expr) -> str:
    """``scale · score`` as a person writes it: ``2/√3``."""
    return print_text(hf.scaled(trace, score))


def scaled_latex(trace: Trace, score: sympy.Expr) -> str:
    """``scale · score`` in LaTeX as a person writes it: ``\\frac{2}{\\sqrt{3}}``."""
    return print_latex(hf.scaled(trace, score))


def shifted_latex(trace: Trace, i: int, j: int) -> str:
    """The shifted score of row i, key j, in LaTeX (``-\\infty`` where masked)."""
    return print_latex(hf.shifted(trace, i, j))


def exp_entry_latex(trace: Trace, i: int, j: int) -> str:
    """``e^{-8/\\sqrt{3}}``, ``1`` for e^0, ``0`` where masked."""
    return print_latex(hf.exponential(trace, i, j))


def row_sum_text(trace: Trace, i: int) -> str:
    """The softmax denominator of row i, like terms collected: ``e^(−2/√3) + 2``."""
    return print_text(hf.row_sum(trace, i))


def row_sum_latex(trace: Trace, i: int) -> str:
    """The softmax denominator of row i in LaTeX, like terms collected."""
    return print_latex(hf.row_sum(trace, i))


def weight_text(trace: Trace, i: int, j: int) -> str:
    """A weight as the fraction of exponentials it is: ``e^(−2/√3) / (e^(−2/√3) + 2)``."""
    form = hf.weight(trace, i, j)
    return print_text(form) if form is not None else unicode_text(trace.weights[i, j])


def weight_latex(trace: Trace, i: int, j: int) -> str:
    """A weight as the fraction of exponentials it is: ``\\frac{e^{…}}{e^{…} + 2}``."""
    form = hf.weight(trace, i, j)
    return print_latex(form) if form is not None else latex_text(trace.weights[i, j])


def output_text(trace: Trace, i: int, c: int) -> str:
    """An output entry as Σ v·e^(…) over the row sum, like terms collected."""
    form = hf.output(trace, i, c)
    return print_text(form) if form is not None else unicode_text(trace.output[i, c])


def output_latex(trace: Trace, i: int, c: int) -> str:
    """An output entry in LaTeX as Σ v·e^{…} over the row sum, like terms collected."""
    form = hf.output(trace, i, c)
    return print_latex(form) if form is not None else latex_text(trace.output[i, c])
