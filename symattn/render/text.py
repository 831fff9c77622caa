"""The terminal view: the derivation step by step, the way the lesson works it.

Each step shows its formula, its shape, the exact matrix and, beside it,
certified decimals.  One row is worked by hand: the dot products written
out (``1·0 + 0·1 + 2·1 = 2``), the scaled scores as ``2/√3 ≈ 1.15``, the
max-subtraction trick, the exponentials, their sum, the weights, and the
output as a blend of value rows.  Nothing is recomputed here: every value
comes from the Trace, every number from its certified decimals.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from symattn.certify import Rounding, certify
from symattn.render import forms
from symattn.render.layout import bracket_row, grid, indent, side_by_side
from symattn.trace import Step, Trace

_INTEGER_STEPS_MAX = 10  # above this size, worked sums list only their first terms


@dataclass(frozen=True)
class TextOptions:
    """What the terminal view shows."""

    digits: int = 3
    dot_row: int | str | None = None       # row whose dot products are written out (default: first)
    softmax_row: int | str | None = None   # row worked with the max-subtraction trick (default: last)
    limit: int = 8                         # matrices larger than this elide the middle


class TextRenderer:
    """Renders a Trace as Unicode text; one method per section."""

    def __init__(self, trace: Trace, options: TextOptions = TextOptions()) -> None:
        self.trace = trace
        self.options = options
        self.rounding = Rounding(digits=options.digits)
        p = trace.problem
        first = trace.step("scores")
        self.dot_row = first.row_index(options.dot_row) if options.dot_row is not None else 0
        self.softmax_row = (first.row_index(options.softmax_row) if options.softmax_row is not None
                            else p.n - 1)
        self._decimals: dict[str, list[list[str]]] = {}

    # -- helpers ------------------------------------------------------------------
    def dec(self, name: str) -> list[list[str]]:
        """Certified decimals of a step; its exact entries when symbols allow none."""
        if name not in self._decimals:
            if self.trace.engine.symbols_of(name):
                cells = self.exact_cells(self.trace.step(name))
            else:
                rows = self.trace.step(name).decimals(self.rounding)
                cells = [[_minus(str(d)) for d in row] for row in rows]
            self._decimals[name] = cells
        return self._decimals[name]

    def exact_cells(self, step: Step) -> list[list[str]]:
        return [[forms.unicode_text(v) for v in row] for row in step.rows()]

    def matrix_block(self, step: Step, cells: list[list[str]], with_decimals: bool,
                     col_header: bool) -> list[str]:
        limit = self.options.limit
        cols = step.col_labels if col_header else None
        left = grid(cells, step.row_labels, cols, limit=limit)
        if not with_decimals:
            return left
        right = grid(self.dec(step.name), None, cols, limit=limit)
        return side_by_side(left, right)

    def show_matrix(self, step: Step, col_header: bool = False) -> list[str]:
        """Exact matrix, with decimals beside it unless every entry is an integer."""
        exact = self.exact_cells(step)
        same = exact == self.dec(step.name)  # integers, say: the decimals add nothing
        return self.matrix_block(step, exact, not same, col_header)

    def heading(self, number: int, step: Step, extra: str = "") -> list[str]:
        r, c = step.shape
        return ["", f"{number}. {step.info.formula}    ({r}×{c}){extra}", f"   {step.info.meaning}"]

    # -- sections ---------------------------------------------------------------------
    def render(self) -> str:
        sections = [self.header(), self.inputs(), self.projections(), self.scores(),
                    self.scaled(), self.masked(), self.softmax(), self.weights(), self.output()]
        return "\n".join(line for section in sections for line in section).rstrip() + "\n"

    def header(self) -> list[str]:
        p = self.trace.problem
        title = p.title or "Scaled dot-product attention"
        kind = "cross-attention" if "X_kv" in p.inputs else (
            "attention from Q, K, V given directly" if not p.projected else "self-attention")
        scale_line = f"scale = 1/√d_k = 1/√{p.d_k}" if p.default_scale else \
            f"scale = {forms.unicode_text(p.scale)} (instead of 1/√d_k)"
        lines = [title, "═" * len(title),
                 f"{kind}: {_count(p.n, 'query', 'queries')} ({', '.join(p.tokens)}) × "
                 f"{_count(p.m, 'key', 'keys')}"
                 f" ({', '.join(p.key_tokens)})",
                 f"d_k = {p.d_k}, d_v = {p.d_v}" + (f", d_model = {p.d_model}" if p.d_model else "")
                 + f"; {scale_line}"]
        if p.mask is not None:
            lines.append(f"mask: {p.mask_kind} (1 = may attend, as PyTorch SDPA's boolean mask)")
        if p.free_symbols:
            names = ", ".join(sorted(str(x) for x in p.free_symbols))
            lines.append(f"Symbols: {names}. Steps that depend on them are shown exactly, without decimals.")
        lines.append(f"Decimals are correctly rounded to {self.options.digits} significant digits "
                     "(certified with ball arithmetic).")
        return lines

    def inputs(self) -> list[str]:
        t = self.trace
        names = [n for n in ("X", "X_kv", "W_q", "W_k", "W_v") if n in t.step_names]
        if not names:
            return []
        lines = ["", "Inputs"]
        for name in names:
            step = t.step(name)
            lines += ["", f"   {name}    ({step.shape[0]}×{step.shape[1]})    {step.info.meaning}"]
            lines += indent(self.show_matrix(step), 3)
        return lines

    def projections(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        lines: list[str] = []
        for k, name in enumerate(("Q", "K", "V"), start=1):
            step = t.step(name)
            extra = ""
            if p.projected:
                src = t.step("X_kv" if ("X_kv" in p.inputs and name != "Q") else "X")
                extra = f"  = ({src.shape[0]}×{src.shape[1]})·({p.d_model}×{step.shape[1]})"
            lines += self.heading(k, step, extra)
            lines += indent(self.show_matrix(step), 3)
        if p.projected:
            lines += ["", *indent(self.worked_projection(), 3)]
        return lines

    def worked_projection(self) -> list[str]:
        """Q of the worked row as a combination of the rows of W_q."""
        t = self.trace
        i = self.dot_row
        x = list(t.step("X").rows())[i]
        W = t.step("W_q")
        terms = []
        for k, coefficient in enumerate(x):
            w_row = bracket_row([forms.unicode_text(v) for v in W[k]])
            terms.append(f"{_paren(coefficient)}·{w_row}")
        result = bracket_row([forms.unicode_text(v) for v in t.step("Q")[i]])
        token = t.problem.tokens[i]
        return [f"By hand, the query of {token!r} is its embedding times W_q:",
                f"Q[{token}] = " + " + ".join(_shorten(terms)) + f" = {result}"]

    def scores(self) -> list[str]:
        t = self.trace
        step = t.step("scores")
        lines = self.heading(4, step)
        lines += indent(self.show_matrix(step, col_header=True), 3)
        i = self.dot_row
        q = list(t.step("Q").rows())[i]
        K = list(t.step("K").rows())
        token = t.problem.tokens[i]
        lines += ["", f"   The dot products of row {token!r}, query q = {bracket_row([forms.unicode_text(v) for v in q])}:"]
        for j, key in enumerate(K):
            products = _shorten([f"{_paren(a)}·{_paren(b)}" for a, b in zip(q, key)])
            value = forms.unicode_text(step[i, j])
            lines.append(f"   • vs key of {t.problem.key_tokens[j]!r} {bracket_row([forms.unicode_text(v) for v in key])}: "
                         f"{' + '.join(products)} = {value}")
        return lines

    def scaled(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        step = t.step("scaled")
        lines = self.heading(5, step)
        if p.default_scale:
            root = certify(sympy.sqrt(p.d_k), self.rounding)
            lines.append(f"   d_k = {p.d_k}, so every score is divided by √{p.d_k} ≈ {_minus(str(root))}")
        cells = [[forms.scaled_text(t, t.step("scores")[i, j]) for j in range(p.m)] for i in range(p.n)]
        lines += indent(self.matrix_block(step, cells, True, True), 3)
        i = self.dot_row
        token = p.tokens[i]
        raw = bracket_row([forms.unicode_text(v) for v in t.step("scores")[i]])
        lines += ["", f"   Row {token!r}: {raw} → "
                  + _approx(bracket_row(cells[i]), bracket_row(self.dec('scaled')[i]))]
        return lines

    def masked(self) -> list[str]:
        t = self.trace
        if "masked" not in t.step_names:
            return []
        step = t.step("masked")
        p = t.problem
        cells = [[forms.scaled_text(t, t.step("scores")[i, j]) if t.engine.is_allowed(i, j) else "−∞"
                  for j in range(p.m)] for i in range(p.n)]
        lines = ["", f"5a. {step.info.formula}    ({p.n}×{p.m})", f"   {step.info.meaning}"]
        return lines + indent(self.matrix_block(step, cells, True, True), 3)

    def softmax(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        i = self.softmax_row
        token = p.tokens[i]
        e = t.engine
        allowed = e.rows[i].allowed
        r = e.rows[i].argmax
        scaled_row = [forms.scaled_text(t, t.step("scores")[i, j]) for j in allowed]
        scaled_dec = [self.dec("scaled")[i][j] for j in allowed]
        shifted = [forms.shifted_form(t, i, j) for j in allowed]
        shifted_txt = [s.text() if s is not None else forms.unicode_text(e.shifted(i, j))
                       for s, j in zip(shifted, allowed)]
        exps = [forms.exp_text(s, e.exponent(i, j)) for s, j in zip(shifted, allowed)]
        exp_dec = [self.dec("exp")[i][j] for j in allowed]
        keys = [p.key_tokens[j] for j in allowed]
        blocked = [] if len(allowed) == p.m else [
            f"   (the mask blocks {', '.join(repr(p.key_tokens[j]) for j in range(p.m) if j not in allowed)}:"
            " weight exactly 0)"]
        if r is None:
            return ["", f"6. Softmax of row {token!r}", *blocked,
                    f"   scaled[{token}] = {bracket_row(scaled_row)}   (keys {', '.join(keys)})",
                    "   The symbols leave the row maximum open, so nothing is subtracted:",
                    "   exp = e^scaled here, which gives the same weights.",
                    f"   row_sum = {forms.row_sum_text(t, i)}",
                    f"   weights[{token}, {p.key_tokens[allowed[0]]}] = {forms.weight_text(t, i, allowed[0])}"]
        lines = ["", f"6. Softmax, worked on row {token!r} with the max-subtraction trick",
                 "   Subtracting the row maximum changes no weight (the factor cancels) but keeps e^z small.",
                 *blocked,
                 f"   scaled[{token}] = {_approx(bracket_row(scaled_row), bracket_row(scaled_dec))}"
                 f"   (keys {', '.join(keys)})",
                 f"   row maximum: {_approx(scaled_row[allowed.index(r)], scaled_dec[allowed.index(r)])}"
                 f" (key {p.key_tokens[r]!r})",
                 "   shifted = scaled − max = " + _approx(
                     bracket_row(shifted_txt), bracket_row([self.dec('shifted')[i][j] for j in allowed])),
                 "   exponentials: " + ", ".join(
                     "e^0 = 1" if x == "1" else f"{x} ≈ {d}" for x, d in zip(exps, exp_dec)),
                 f"   row_sum = {forms.row_sum_text(t, i)} ≈ {self.dec('row_sum')[i][0]}",
                 f"   weights = exp / row_sum ≈ {bracket_row([self.dec('weights')[i][j] for j in allowed])}",
                 f"   exactly: weights[{token}, {p.key_tokens[allowed[0]]}] = {forms.weight_text(t, i, allowed[0])}"]
        return lines

    def weights(self) -> list[str]:
        t = self.trace
        step = t.step("weights")
        lines = self.heading(7, step)
        lines += indent(grid(self.dec("weights"), step.row_labels, step.col_labels,
                             limit=self.options.limit), 3)
        lines.append("   Each row sums to exactly 1: Σ_j e^(shifted_ij) / row_sum_i = row_sum_i / row_sum_i.")
        return lines

    def output(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        step = t.step("output")
        lines = self.heading(8, step)
        lines += indent(grid(self.dec("output"), step.row_labels, None, limit=self.options.limit), 3)
        i = self.dot_row
        token = p.tokens[i]
        V = list(t.step("V").rows())
        w = self.dec("weights")[i]
        terms = [f"{w[j]}·{bracket_row([forms.unicode_text(v) for v in V[j]])}"
                 for j in t.engine.rows[i].allowed]
        lines += ["", f"   Row {token!r} blends the value rows with its weights:",
                  f"   {' + '.join(_shorten(terms))} ≈ {bracket_row(self.dec('output')[i])}",
                  f"   exactly: output[{token}, 0] = {forms.output_text(t, i, 0)}"]
        lines += ["", "   Check: each output lies between the min and max of its V column "
                  "(the weights are positive and sum to 1):"]
        for c in range(min(p.d_v, self.options.limit)):
            column = [V[j][c] for j in range(p.m)]
            low, high = min(column), max(column)
            lines.append(f"   column {c}: {self.bound(low)} ≤ "
                         f"{', '.join(self.dec('output')[r][c] for r in range(min(p.n, self.options.limit)))}"
                         f" ≤ {self.bound(high)}")
        return lines

    def bound(self, value: sympy.Expr) -> str:
        """A bound of the convex-hull check: ``7/6 ≈ 1.17`` beside outputs that round to
        1.17, so the line reads right (rounding keeps ≤, so the decimals compare too)."""
        exact = forms.unicode_text(value)
        if value.free_symbols or not value.is_number:
            return exact
        d = certify(value, self.rounding)
        return exact if d.exact else f"{exact} ≈ {_minus(str(d))}"


def _approx(exact: str, decimal: str) -> str:
    """``exact ≈ decimal``, or just the value when the two read the same."""
    return exact if exact == decimal else f"{exact} ≈ {decimal}"


def _count(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def _paren(value: sympy.Expr) -> str:
    """A factor in a written product: negatives and sums in parentheses, as by hand."""
    text = forms.unicode_text(value)
    if text.startswith("−") or any(op in text[1:] for op in ("+", "−", "/")):
        return f"({text})"
    return text


def _minus(text: str) -> str:
    return text.replace("-", "−") if not ("e-" in text) else text.replace("e-", "e@").replace("-", "−").replace("e@", "e-")


def _shorten(terms: list[str]) -> list[str]:
    if len(terms) <= _INTEGER_STEPS_MAX:
        return terms
    return [*terms[:3], "⋯", *terms[-2:]]


def render_text(trace: Trace, options: TextOptions = TextOptions()) -> str:
    """The whole derivation as terminal text."""
    return TextRenderer(trace, options).render()
