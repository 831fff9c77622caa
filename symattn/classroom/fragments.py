"""HTML fragments the platforms show: the given inputs, a question's grid, the key's steps.

Plain HTML tables (no MathML, which Moodle and Canvas filter out) with
formulas in ``\\( … \\)``, which both platforms' MathJax filters typeset.
Exact inputs are written as one-line Unicode (``2/√3``), answers as
certified decimals.
"""

from __future__ import annotations

from html import escape
from typing import Callable

from symattn.classroom.answers import Question, VersionAnswers, given_inputs
from symattn.exact.sympytext import unicode_text

__all__ = ["given_html", "grid_html", "intro_html", "key_html", "rounding_words"]

Escape = Callable[[str], str]
_TABLE = 'border="1" cellpadding="4" style="border-collapse:collapse;text-align:center"'
_SYMBOL = {"Q": "Q", "K": "K", "V": "V", "scores": "S", "weights": "A", "output": "O",
           "d_output": "dO", "d_V": "dV", "d_weights": "dP", "row_dot": "D", "d_logits": "dS",
           "d_scores": "dS'", "d_Q": "dQ", "d_K": "dK", "d_W_q": "dW_q", "d_W_k": "dW_k", "d_W_v": "dW_v"}
#: questions whose columns are the keys (their grids carry the key tokens on top)
_KEY_COLUMNS = ("scores", "scaled", "weights", "d_weights", "d_logits", "d_scores")


def rounding_words(v: VersionAnswers) -> str:
    return str(v.rounding)


def _table(cells: list[list[str]], rows: tuple[str, ...] | None, cols: tuple[str, ...] | None,
           caption: str, esc: Escape = escape) -> str:
    out = [f"<table {_TABLE}><caption>{caption}</caption>"]
    if cols is not None:
        lead = "<th></th>" if rows is not None else ""
        out.append("<tr>" + lead + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>")
    for k, row in enumerate(cells):
        head = f"<th>{esc(rows[k])}</th>" if rows is not None else ""
        out.append("<tr>" + head + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def intro_html(v: VersionAnswers, esc: Escape = escape) -> str:
    """What the sheet says before the questions: d_k, the scale, the mask, the sink, rounding.

    ``esc`` escapes the text for the page (HTML; Moodle's Cloze text: ``cloze_html``)."""
    p = v.problem
    scale = (f"the scores are divided by \\(\\sqrt{{d_k}} = \\sqrt{{{p.d_k}}}\\)" if p.default_scale
             else f"the scores are multiplied by the scale {esc(unicode_text(p.scale))}")
    parts = [f"<p>Here \\(d_k = {p.d_k}\\) and {scale}."]
    if p.mask is not None:
        description = p.mask_description
        assert description is not None, "a masked problem names its mask"
        parts.append(f" Mask: {esc(description)} (1 = may attend); a blocked position "
                     "gets weight 0.")
    if p.sink is not None:
        parts.append(f" Sink logit s = {esc(unicode_text(p.sink))}: each row's softmax "
                     "denominator also adds e^(s − max), so the weights sum to less than 1.")
    if p.rope is not None:
        from symattn.problem.keys.rope import rope_text

        parts.append(" " + esc(rope_text(p)))
    if p.backward is not None:
        from symattn.classroom.worksheets.backward_sheet import loss_rule

        parts.append(" " + esc(loss_rule(v.trace)))
    parts.append(f" Give every decimal answer correctly rounded to {esc(str(v.rounding))}.</p>")
    return "".join(parts)


def given_html(v: VersionAnswers, esc: Escape = escape) -> str:
    """The given matrices, exact, as tables."""
    out = []
    for name, matrix, rows in given_inputs(v.trace):
        cells = [[esc(unicode_text(matrix[i, j])) for j in range(matrix.cols)]
                 for i in range(matrix.rows)]
        out.append(_table(cells, rows, None, esc(name), esc))
    return "".join(out)


def grid_html(q: Question, cell: Callable[[int, int], str], esc: Escape = escape) -> str:
    """A question's answer grid; ``cell(i, j)`` gives each box's markup (already HTML)."""
    cells = [[cell(i, j) for j in range(q.shape[1])] for i in range(q.shape[0])]
    cols = q.col_labels if q.step in _KEY_COLUMNS else None
    return _table(cells, q.row_labels, cols, f"{q.number}. {esc(q.ask)}", esc)


def question_heading(q: Question, esc: Escape = escape) -> str:
    """The line above a question's grid: what to compute, its formula and its shape."""
    return (f"<p><b>{q.number}.</b> Compute {esc(q.ask)}, \\({q.formula_latex}\\) "
            f"({q.shape[0]}×{q.shape[1]}).</p>")


def key_html(v: VersionAnswers) -> str:
    """The key's steps: each question's formula and its certified answers (≈ where rounded)."""
    out = [f"<p>Every decimal is correctly rounded to {escape(str(v.rounding))} and certified "
           "with ball arithmetic (symattn).</p>"]
    for q in v.questions:
        values = [[e.right(v.rounding) for e in q.entries[i * q.shape[1]:(i + 1) * q.shape[1]]]
                  for i in range(q.shape[0])]
        rounded = any(not d.exact for row in values for d in row)
        symbol = _SYMBOL.get(q.step, q.formula_latex)
        relation = "≈" if rounded else "="
        out.append(f"<p><b>{q.number}.</b> {escape(q.ask.capitalize())}, \\({q.formula_latex}\\): "
                   f"{escape(symbol if q.step != 'scaled' else 'scaled')} {relation}</p>")
        out.append(grid_html(q, _texts_of(values, escape)))
    return "".join(out)


def _texts_of(values: list, escape: Callable[[str], str]) -> Callable[[int, int], str]:
    """The grid's cell (i, j): one question's certified values, escaped, bound now."""
    return lambda i, j: escape(values[i][j].text)
