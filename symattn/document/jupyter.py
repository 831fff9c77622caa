"""Jupyter display: a Trace or a Step as typeset math (MathJax-friendly LaTeX), and a
Trace as an HTML fragment (the derivation document, CSS scoped to one wrapper class).

``Trace._repr_latex_``, ``Trace._repr_html_`` and ``Step._repr_latex_`` call these.  Exact values
sit beside certified decimals; large steps elide their middle, and the
exact forms of elided entries are never built.  IPython is not needed.
"""

from __future__ import annotations

from symattn.numbers.certify import Rounding
from symattn.document import step_text as forms
from symattn.document.support.texutil import cell_text, elide, matrix_latex, tex_escape
from symattn.trace.trace import Step, Trace
from symattn.vocab import StepName, StepKind

EXACT_ENTRIES_MAX = 16   # weights/output with more entries show decimals only (exact forms grow fast)
#: steps whose columns are not named by keys (d_model, d_k or d_v columns; the row sums' one)
_UNLABELLED_COLUMNS = frozenset((*StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT, StepKind.PROJECTION,
                                                   StepKind.OUTPUT), StepName.ROW_SUM))

def step_math(step: Step, rounding: Rounding | None = None, limit: int = 8) -> str:
    """A step as one line of math: ``S = [exact] ≈ [decimals]`` (MathJax-friendly)."""
    rounding = rounding or Rounding(digits=3)
    t = step._trace
    r, c = step.shape
    name = step.name
    if t.symbols_of(name):  # symbols: the exact entries are all there is
        cells = [[forms.latex_text(v) for v in row] for row in step.rows()]
        return f"{_symbol(name)} = {matrix_latex(cells, step.row_labels, None, limit=limit)}"
    decimals = [[cell_text(d) for d in row] for row in step.decimals(rounding)]
    shown_rows = {k for k in elide(list(range(r)), limit) if k is not None}
    shown_cols = {k for k in elide(list(range(c)), limit) if k is not None}

    def grid(entry) -> list[list[str]]:
        """Exact forms of the entries shown only: the elided middle is never built."""
        return [[entry(i, j) if i in shown_rows and j in shown_cols else "" for j in range(c)]
                for i in range(r)]

    scores = t.step("scores")
    exact: list[list[str]] | None
    if name in ("scaled", "masked"):
        exact = grid(lambda i, j: forms.scaled_latex(t, scores[i, j])
                     if t.is_allowed(i, j) or name == "scaled" else r"-\infty")
    elif name == "shifted":
        exact = grid(lambda i, j: forms.shifted_latex(t, i, j))
    elif name == "exp":
        exact = grid(lambda i, j: forms.exp_entry_latex(t, i, j))
    elif name == "row_sum":
        exact = grid(lambda i, j: forms.row_sum_latex(t, i)) if c * t.problem.m <= EXACT_ENTRIES_MAX else None
    elif name == "weights" and r * c <= EXACT_ENTRIES_MAX:
        exact = grid(lambda i, j: forms.weight_latex(t, i, j))
    elif name == "output" and r * c <= EXACT_ENTRIES_MAX:
        exact = grid(lambda i, j: forms.output_latex(t, i, j))
    elif name in ("weights", "output"):
        exact = None
    else:
        exact = grid(lambda i, j: forms.latex_text(step[i, j]))
    cols = step.col_labels if name not in _UNLABELLED_COLUMNS else None
    rows = step.row_labels if name not in StepName.of_kind(StepKind.WEIGHT) else None
    symbol = _symbol(name)
    right = matrix_latex(decimals, None, None, limit=limit)
    if exact is None:
        return f"{symbol} \\approx {matrix_latex(decimals, rows, cols, limit=limit)}"
    left = matrix_latex(exact, rows, cols, limit=limit)
    if exact == decimals:
        return f"{symbol} = {left}"
    return f"{symbol} = {left} \\approx {right}"


def _symbol(name: str) -> str:
    named = {"scores": "S", "weights": "A", "output": "O", "W_q": "W_q", "W_k": "W_k", "W_v": "W_v",
             "X_kv": "X_{kv}"}
    return named.get(name, name if len(name) == 1 else f"\\text{{{tex_escape(name)}}}")


def step_repr_latex(step: Step) -> str:
    """Jupyter's ``_repr_latex_`` for a Step."""
    return f"$\\displaystyle {step_math(step)}$"


def trace_repr_latex(trace: Trace) -> str:
    """Jupyter's ``_repr_latex_`` for a Trace: every step, one aligned block."""
    rows = []
    for step in trace:
        math = step_math(step)
        symbol, _, rest = math.partition(" ")
        rows.append(f"{symbol} &{rest} && \\text{{{tex_escape(step.info.meaning)}}}")
    return "$$\\begin{aligned}\n" + " \\\\[4pt]\n".join(rows) + "\n\\end{aligned}$$"


def trace_repr_html(trace: Trace) -> str:
    """Jupyter's ``_repr_html_`` for a Trace: the derivation document as an HTML fragment
    (no ``<html>`` or ``<body>``; its stylesheet applies only inside its wrapper ``div``)."""
    from symattn.document.build.trace import build_document
    from symattn.document.formats import html_fragment

    return html_fragment(build_document(trace))
