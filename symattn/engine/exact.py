"""The exact entries of the softmax side, as SymPy expressions built only when asked for.

    shifted[i, j] = scale · (scores[i, j] − scores[i, r_i])      (r_i = argmax)
    exp[i, j]     = e^shifted[i, j]           (0 where masked)
    row_sum[i]    = Σ_j exp[i, j]  (+ e^(sink − scale·scores[i, r_i]) with a sink logit)
    weights[i, j] = exp[i, j] / row_sum[i]
    output[i, c]  = Σ_j weights[i, j] · V[j, c]

With ALiBi or a logit transform (the soft-cap), shifted is ``logit[i, j] − logit[i, r_i]``.  SymPy builds b^q
itself from e^(q·log b), so an exponential whose b^q would pass
:data:`symattn.engine.powers.EXACT_POWER_DIGITS` digits is refused with a ProblemError.
"""

from __future__ import annotations

import sympy

from symattn.engine.plan import RowPlanning
from symattn.engine.powers import EXACT_POWER_DIGITS, LogTerms, _too_big, log_terms, power_digits
from symattn.problem.matrix import fmpq_to_sympy


class ExactEntries(RowPlanning):
    """shifted, exp, row_sum, weights and output, entry by entry."""

    def shifted(self, i: int, j: int) -> sympy.Expr:
        if not self.is_allowed(i, j):
            return sympy.S.NegativeInfinity
        if self.rows[i].argmax is None:  # the maximum stays a symbolic Max
            if not self.plain:
                return self.logit(i, j) - sympy.Max(*[self.logit(i, k) for k in self.rows[i].allowed])
            scaled = [self.scale * self.scores.exact(i, k) for k in self.rows[i].allowed]
            return self.scale * self.scores.exact(i, j) - sympy.Max(*scaled)
        return self.exponent(i, j)

    def exponent(self, i: int, j: int) -> sympy.Expr:
        """The power of e in exp[i, j]: the shifted score (the scaled one in an open row)."""
        if self.plain:
            return self.scale * self.delta(i, j)
        r = self.rows[i].argmax
        if r is None:
            return self.logit(i, j)
        if j in self.top_group(i):
            return sympy.S.Zero
        row = self.logit_row(i)
        if row is not None:
            return fmpq_to_sympy(row[j] - row[r])
        # tied keys share one exact form: their exponentials are then the same expression
        j = next(g[0] for g in self.groups(i).values() if j in g)
        if self.transform is None:
            return sympy.expand(self.biased(i, j) - self.biased(i, r))
        return self.transformed(i, j) - self.transformed(i, r)

    def _row_terms(self, i: int, j: int) -> LogTerms | None:
        """scale·Δ of entry (i, j) as Σ q·log b, or None."""
        if self._scale_logs is not None and self.scores.rational is not None:
            r = self.rows[i].argmax
            delta = fmpq_to_sympy(self.scores.rational[i, j] - self.scores.rational[i, r])
            return tuple((q * delta, b) for q, b in self._scale_logs if delta)
        return log_terms(self.exponent(i, j))

    def _check_power_sizes(self) -> None:
        """Refuse a Σ q·log b scale whose largest e^(scale·Δ) = Π b^(qΔ) is too long to build."""
        worst, where = 0, (0, 0)
        for i, plan in enumerate(self.rows):
            if plan.argmax is None:
                continue
            row = self._integer_row(i)
            top = row[plan.argmax]
            far = max(plan.allowed, key=lambda j: abs(row[j] - top))
            if abs(row[far] - top) > worst:
                worst, where = abs(row[far] - top), (i, far)
        if worst:
            terms = self._row_terms(*where)
            assert terms is not None       # a Σ q·log b scale times rational scores
            if power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{where[0]}, {where[1]}]")

    def exp(self, i: int, j: int) -> sympy.Expr:
        """e^shifted; in an open row e^scaled, which gives the same weights.

        SymPy turns e^(q·log b) into b^q (a problem where that is too long
        was refused when the engine was made)."""
        if not self.is_allowed(i, j):
            return sympy.S.Zero
        exponent = self.exponent(i, j)
        if self._logs_possible and self._scale_logs is None and exponent.has(sympy.log):
            terms = log_terms(exponent)      # logs in the scores: checked entry by entry
            if terms is not None and power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{i}, {j}]")
        return sympy.exp(exponent)

    def sink_exponent(self, i: int) -> sympy.Expr:
        """The sink's shifted logit, sink − scale·scores[i, r] (the sink itself in an open
        row, where exp is e^scaled)."""
        r = self.rows[i].argmax
        if r is None:
            return self.sink
        if not self.plain:
            return self.sink - self.logit(i, r)
        return self.sink - self.scale * self.scores.exact(i, r)

    def sink_exp(self, i: int) -> sympy.Expr:
        """The sink's term of row i's softmax denominator (0 without a sink)."""
        return sympy.S.Zero if self.sink is None else sympy.exp(self.sink_exponent(i))

    def row_sum(self, i: int) -> sympy.Expr:
        if i not in self._row_sums:
            self._row_sums[i] = sympy.Add(*[self.exp(i, j) for j in self.rows[i].allowed],
                                          self.sink_exp(i))
        return self._row_sums[i]

    def weight(self, i: int, j: int) -> sympy.Expr:
        return self.exp(i, j) / self.row_sum(i)

    def output(self, i: int, c: int) -> sympy.Expr:
        numerator = sympy.Add(*[self.V.exact(j, c) * self.exp(i, j) for j in self.rows[i].allowed])
        return numerator / self.row_sum(i)
