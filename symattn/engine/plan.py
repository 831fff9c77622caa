"""Each row's plan: its maximum, decided exactly, and its keys grouped by equal score.

The maximum r_i of row i (the first key of the largest score, or of the smallest with a
negative scale; on the logits with ALiBi or a soft-cap) is what every shifted score is taken
from.  Keys with equal shifted scores form a tie group: their exponentials are one number,
which is how ties (1/3, an output equal to a constant value column) are recognised.
"""

from __future__ import annotations

from typing import Hashable

import flint
import sympy

from symattn.engine.logits import Logits
from symattn.engine.state import RowPlan, sign_or_none
from symattn.errors import CertificationError
from symattn.numbers.certify import to_arb
from symattn.numbers.compare import compare, equal
from symattn.problem.matrix import fmpq_to_sympy


class RowPlanning(Logits):
    """Row maxima, score gaps and tie groups."""

    def _plan_row(self, i: int) -> RowPlan:
        allowed = self._allowed(i)
        if not self.plain:
            return RowPlan(allowed, self._logit_argmax(i, allowed))
        if self.scale_sign is None:
            return RowPlan(allowed, None)
        if self._score_ints is not None and self.scale_sign != 0:
            # rational scores over one common denominator: compare Python ints
            row = self._score_ints[i]
            pick = max if self.scale_sign > 0 else min
            if len(allowed) == self.m:                   # no mask: the first extreme score
                return RowPlan(allowed, row.index(pick(row)))
            best_value = pick(row[j] for j in allowed)
            return RowPlan(allowed, next(j for j in allowed if row[j] == best_value))
        best = allowed[0]
        if self.scale_sign != 0:
            for j in allowed[1:]:
                c = self._compare_scores(i, j, best)
                if c is None:  # symbols leave the order open: assume nothing
                    return RowPlan(allowed, None)
                if c * self.scale_sign > 0:
                    best = j
        return RowPlan(allowed, best)

    def _compare_scores(self, i: int, a: int, b: int) -> int | None:
        if self.scores.rational is not None:
            x, y = self.scores.rational[i, a], self.scores.rational[i, b]
            return (x > y) - (x < y)
        x, y = self.scores.exact(i, a), self.scores.exact(i, b)
        if x.free_symbols or y.free_symbols:
            return sign_or_none(sympy.expand(x - y))
        return compare(x, y)

    def delta(self, i: int, j: int) -> sympy.Expr:
        """scores[i, j] − scores[i, argmax], exactly (the score itself in an open row)."""
        r = self.rows[i].argmax
        if r is None:
            return self.scores.exact(i, j)
        if self.scores.rational is not None:
            return fmpq_to_sympy(self.scores.rational[i, j] - self.scores.rational[i, r])
        return sympy.expand(self.scores.exact(i, j) - self.scores.exact(i, r))

    def groups(self, i: int) -> dict[Hashable, list[int]]:
        """Allowed keys of row i grouped by equal shifted score (one group if scale = 0)."""
        if i not in self._groups:
            groups: dict[Hashable, list[int]] = {}
            if not self.plain:
                self._groups[i] = self._logit_groups(i)
                return self._groups[i]
            if self.scale_sign == 0:
                groups[0] = list(self.rows[i].allowed)
            elif self._score_ints is not None:  # equal scores, equal shifted scores
                row = self._score_ints[i]           # (Python ints: hashing an fmpq is slow)
                for j in self.rows[i].allowed:
                    members = groups.get(row[j])
                    if members is None:
                        groups[row[j]] = [j]
                    else:
                        members.append(j)
            elif self.symbolic:  # only structurally equal scores are known to tie
                for j in self.rows[i].allowed:
                    groups.setdefault(sympy.expand(self.scores.exact(i, j)), []).append(j)
            else:
                for j in self.rows[i].allowed:
                    key: Hashable = self._canonical_key(groups, self.delta(i, j))
                    groups.setdefault(key, []).append(j)
            self._groups[i] = groups
        return self._groups[i]

    def _logit_groups(self, i: int) -> dict[Hashable, list[int]]:
        """Allowed keys grouped by equal logit before the cap (equal after it too)."""
        groups: dict[Hashable, list[int]] = {}
        row = self.pre_row(i)
        r = self.rows[i].argmax
        for j in self.rows[i].allowed:
            if row is not None:
                key: Hashable = (int(row[j].p), int(row[j].q))
            elif self.symbolic or r is None:
                key = sympy.expand(self.biased(i, j))
            else:
                key = self._canonical_key(groups, sympy.expand(self.biased(i, j) - self.biased(i, r)))
            groups.setdefault(key, []).append(j)
        return groups

    def top_group(self, i: int) -> frozenset[int]:
        """The keys of row i whose shifted score is exactly 0 (e^0 = 1)."""
        if i not in self._top:
            r = self.rows[i].argmax
            self._top[i] = frozenset() if r is None else frozenset(
                next(g for g in self.groups(i).values() if r in g))
        return self._top[i]

    def _canonical_key(self, groups: dict, value: sympy.Expr) -> sympy.Expr:
        """The group key equal to ``value`` (decided exactly), or ``value`` itself; a 64-bit
        ball first rules out the groups it cannot equal (an exact equal() costs a SymPy expand)."""
        ball = self._key_ball(value)
        for existing in groups:
            other = self._key_ball(existing)
            if (ball is None or other is None or other.overlaps(ball)) and equal(existing, value):
                return existing
        return value

    def _key_ball(self, value: sympy.Expr) -> flint.arb | None:
        if value not in self._key_balls:
            try:
                self._key_balls[value] = to_arb(value, 64)
            except CertificationError:      # a function the balls do not know: equal() decides
                self._key_balls[value] = None
        return self._key_balls[value]
