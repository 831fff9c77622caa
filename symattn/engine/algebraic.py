"""Values known exactly without a ball: algebraic ones, and the rational rows.

Which softmax values are exact algebraic numbers is decided by Lindemann–Weierstrass: for
distinct algebraic exponents the e^d are linearly independent over the algebraic numbers,
so a ratio Σ_d a_d e^d / Σ_d b_d e^d is algebraic exactly when a_d = λ·b_d for every d, and
then it equals λ.  That is how ties are recognised instead of looping forever on a rounding
boundary.

A scale that is not algebraic may still give algebraic exponentials: with ``scale = log(2)``
every e^(scale·Δ) is 2^Δ, and the weights are rational (2^k / Σ 2^k).  Whenever scale·Δ is
a sum of rational multiples of logarithms of positive rationals, e^(Σ q·log b) = Π b^q
exactly (:meth:`AlgebraicValues.powers`), and the softmax steps are computed from those.

:meth:`AlgebraicValues.known_row` says, row by row, which entries of a step are known
rationals (fmpq), masked (NEG_INF), or left to a ball (None).
"""

from __future__ import annotations

from typing import Hashable

import flint
import sympy

from symattn.engine.exact import ExactEntries
from symattn.engine.powers import EXACT_POWER_DIGITS, _as_sympy, _power, _too_big, power_digits
from symattn.numbers.compare import equal
from symattn.numbers.masked import NEG_INF
from symattn.problem.matrix import fmpq_to_sympy
from symattn.vocab import StepName

_BEFORE_SOFTMAX = frozenset(StepName.span(StepName.SCALED, StepName.SHIFTED))   # scaled, masked, shifted


class AlgebraicValues(ExactEntries):
    """Exact algebraic values by Lindemann–Weierstrass and b^q; known rational rows."""

    def softmax_is_rational(self, i: int) -> bool:
        """True when every allowed key of row i ties (and the sink with them), so its
        weights are 1/count."""
        if self.plain and self.sink is None and self._score_ints is not None and i not in self._groups:
            row, allowed = self._score_ints[i], self.rows[i].allowed   # no groups needed:
            values = row if len(allowed) == self.m else [row[j] for j in allowed]
            return self.scale_sign == 0 or min(values) == max(values)  # one score, one group
        return len(self.groups(i)) == 1 and self.sink_group(i) != "alone"

    def _denominator_count(self, i: int) -> int:
        """The terms of a fully tied row's denominator: its keys, and the sink."""
        return len(self.rows[i].allowed) + (self.sink is not None)

    def sink_group(self, i: int) -> Hashable | None:
        """The group of row i whose exponent the sink's equals, "alone" when none does;
        None without a sink (decided exactly; symbols: only a structural tie)."""
        if self.sink is None:
            return None
        if i not in self._sink_groups:
            found: Hashable = "alone"
            c = self.sink_exponent(i)
            for key, members in self.groups(i).items():
                d = self.exponent(i, members[0])
                same = sympy.expand(c - d) == 0 if (self.symbolic or self.rows[i].argmax is None) \
                    else equal(c, d)
                if same:
                    found = key
                    break
            self._sink_groups[i] = found
        return self._sink_groups[i]

    def powers(self, i: int) -> dict[int, flint.fmpq | sympy.Expr] | None:
        """Row i's exponentials as exact algebraic numbers, when every one is
        e^(Σ q·log b) = Π b^q within the size budget ({key: fmpq or SymPy
        number} over the allowed keys); None otherwise."""
        if i not in self._powers:
            self._powers[i] = (self._row_powers(i) if self._logs_possible and self.sink is None
                               else None)
        return self._powers[i]

    def _row_powers(self, i: int) -> dict[int, flint.fmpq | sympy.Expr] | None:
        r = self.rows[i].argmax
        if r is None:
            return None
        values: dict[int, flint.fmpq | sympy.Expr] = {}
        for j in self.rows[i].allowed:
            terms = self._row_terms(i, j)
            if terms is None:
                return None
            if power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{i}, {j}]")
            values[j] = _power(terms)
        return values

    def algebraic_value(self, step: str, i: int, j: int) -> sympy.Expr | None:
        """The exact value of a softmax-side entry when the exponentials cancel, else None.

        With algebraic inputs (``self.algebraic``), None means the entry is
        transcendental, so no rounding boundary can stop the precision loop.
        """
        if step in ("exp", "weights") and not self.is_allowed(i, j):
            return sympy.S.Zero
        powers = self.powers(i)
        if powers is not None:
            return self._value_from_powers(step, i, j, powers)
        groups = self.groups(i)
        if step == "exp":
            return sympy.S.One if j in self.top_group(i) else None
        tied = self.softmax_is_rational(i)
        if step == "row_sum":
            return sympy.Integer(self._denominator_count(i)) if tied else None
        if step == "weights":
            return sympy.Rational(1, self._denominator_count(i)) if tied else None
        if step == "output":
            return self._output_if_algebraic(i, j, groups)
        raise ValueError(step)

    def _value_from_powers(self, step: str, i: int, j: int, powers: dict) -> sympy.Expr:
        """A softmax entry from the row's exact exponentials b^q."""
        if step == "exp":
            return _as_sympy(powers[j])
        known = self.known_row(step, i)[j]
        if known is not None:
            return fmpq_to_sympy(known)
        total = sympy.Add(*[_as_sympy(v) for v in powers.values()])
        if step == "row_sum":
            return total
        if step == "weights":
            return _as_sympy(powers[j]) / total
        if step == "output":
            return sympy.Add(*[self.V.exact(k, j) * _as_sympy(v) for k, v in powers.items()]) / total
        raise ValueError(step)

    def _output_if_algebraic(self, i: int, c: int, groups: dict) -> sympy.Expr | None:
        value = None
        sink = self.sink_group(i)
        if sink == "alone":
            value = sympy.S.Zero      # the sink's own group: one member whose value is 0
        for key, members in groups.items():
            extra = 1 if key == sink else 0    # the sink in this group, with value 0
            if self.V.rational is not None:
                total = sum((self.V.rational[j, c] for j in members), flint.fmpq(0))
                mean: sympy.Expr = fmpq_to_sympy(total / (len(members) + extra))
            else:
                mean = sympy.Add(*[self.V.exact(j, c) for j in members]) / (len(members) + extra)
            if value is None:
                value = mean
            elif not equal(value, mean):
                return None
        return value

    def known_integers(self, step: str, i: int) -> tuple[list, int] | None:
        """Row i of a rational step as integers over one denominator (numerators, den > 0;
        NEG_INF where masked), for the hot loops over whole steps; None when the step is
        not such a step here (then :meth:`known_row` says what is known).  The fractions
        are not reduced: the denominator is the step's, shared by every row."""
        if step in self.extra:
            return None
        if step == "scores" and self._score_ints is not None and self._score_den is not None:  # held
            return self._score_ints[i], int(self._score_den)
        matrix = self.matrix(step)
        if matrix is not None:
            if matrix.rational is None:
                return None
            key = ("integers", step)
            if key not in self._integer_rows:
                numerators, den = matrix.rational.numer_denom()
                flat, cols = [int(x) for x in numerators.entries()], matrix.cols
                self._integer_rows[key] = ([flat[r * cols:(r + 1) * cols] for r in range(matrix.rows)],
                                           int(den))
            rows, den = self._integer_rows[key]
            return rows[i], den
        if not self.plain or step not in _BEFORE_SOFTMAX or self._score_ints is None \
                or self.scale_rational is None or (step == "shifted" and self.rows[i].argmax is None):
            return None
        s, row = self.scale_rational, self._integer_row(i)
        p, den = int(s.p), int(s.q) * int(self._integer_den())
        top = row[self._argmax(i)] if step == "shifted" else 0
        if step == "scaled" or self.mask is None:
            return [(x - top) * p for x in row], den
        values: list = [NEG_INF] * self.m
        for j in self.rows[i].allowed:
            values[j] = (row[j] - top) * p
        return values, den

    def known_row(self, step: str, i: int) -> list:
        """Row i of a step: an fmpq where the exact value is a known rational,
        NEG_INF where masked, None where a ball must decide."""
        if step in self.extra:
            return self.extra[step].known_row(i)
        matrix = self.matrix(step)
        if matrix is not None:
            if matrix.rational is not None:
                return [matrix.rational[i, j] for j in range(matrix.cols)]
            return [None] * matrix.cols
        m, allowed = self.m, self.is_allowed
        if step in self.logit_steps or (not self.plain and step in ("masked", "shifted")):
            return self._known_logits(step, i)
        if step in _BEFORE_SOFTMAX:
            row: list = [None] * m
            if self.scale_rational is not None and self.scores.rational is not None:
                s, scores = self.scale_rational, self.scores.rational
                top = scores[i, self.rows[i].argmax] if step == "shifted" else flint.fmpq(0)
                row = [(scores[i, j] - top) * s for j in range(m)]
            elif step == "shifted":
                row = [flint.fmpq(0) if j in self.top_group(i) else None for j in range(m)]
            if step != "scaled" and self.mask is not None:
                row = [x if allowed(i, j) else NEG_INF for j, x in enumerate(row)]
            return row
        powers = self.powers(i)
        if powers is not None:
            return self._known_from_powers(step, i, powers)
        if step == "output":
            return [None] * self.d_v
        count = self._denominator_count(i)
        tied = self.softmax_is_rational(i)
        if step == "row_sum":
            return [flint.fmpq(count) if tied else None]
        zero = flint.fmpq(0)
        if step == "exp":
            row = [None] * m
            for j in self.top_group(i):
                row[j] = flint.fmpq(1)
        elif step == "weights":
            row = [flint.fmpq(1, count) if tied else None] * m
        else:
            raise ValueError(step)
        if self.mask is not None:
            row = [x if allowed(i, j) else zero for j, x in enumerate(row)]
        return row

    def _known_from_powers(self, step: str, i: int, powers: dict) -> list:
        """known_row from the row's exact exponentials: rationals where they are."""
        zero, m = flint.fmpq(0), self.m
        rational = all(isinstance(v, flint.fmpq) for v in powers.values())
        total = sum(powers.values(), zero) if rational else None
        if step == "exp":
            return [powers[j] if isinstance(powers.get(j), flint.fmpq) else
                    (zero if j not in powers else None) for j in range(m)]
        if step == "row_sum":
            return [total]
        if step == "weights":
            return [zero if j not in powers else (powers[j] / total if total is not None else None)
                    for j in range(m)]
        if step == "output":
            if total is None or self.V.rational is None:     # total is None unless rational
                return [None] * self.d_v
            V = self.V.rational
            return [sum((w * V[j, c] for j, w in powers.items()), zero) / total
                    for c in range(self.d_v)]
        raise ValueError(step)

    def _known_logits(self, step: str, i: int) -> list:
        """known_row for the logit steps and masked/shifted of a problem with them."""
        m, row = self.m, self.pre_row(i)
        slope = None if self.alibi is None else self.alibi.slope_rational
        if step == "bias":
            return [None] * m if slope is None or self.alibi is None else \
                [-slope * self.alibi.distance(i, j) for j in range(m)]
        if step == "biased":
            return list(row) if row is not None else [None] * m
        if self.transform is not None and step == self.transform.step:   # (capped: tanh 0 = 0)
            image = self.transform.known
            return [image(x) for x in row] if row is not None else [None] * m
        if step == "masked":
            known = self._known_logits(self.logit_step, i)
        else:   # shifted
            top = self.top_group(i)
            r = self.rows[i].argmax
            logits = self.logit_row(i)
            if logits is not None and r is not None:
                known = [x - logits[r] for x in logits]
            else:
                known = [flint.fmpq(0) if j in top else None for j in range(m)]
        if self.mask is not None:
            known = [x if self.is_allowed(i, j) else NEG_INF for j, x in enumerate(known)]
        return known
