"""ALiBi's bias and the logit transform: the logits the softmax takes instead of scale·scores.

``biased = scaled + bias`` and/or a strictly increasing transform t of them (the soft-cap's
``capped = c·tanh(· / c)``, :mod:`symattn.engine.transform`; :mod:`symattn.problem.keys.logits`
parses the keys).  The row maximum is decided on the logits before t: t keeps the order.
"""

from __future__ import annotations

import sympy

from symattn.engine.state import EngineState, sign_or_none
from symattn.numbers.compare import compare


class Logits(EngineState):
    """The exact logits of a problem with ALiBi or a soft-cap."""

    def bias(self, i: int, j: int) -> sympy.Expr:
        """ALiBi's bias −slope·(i − j) (−slope·|i − j| when symmetric)."""
        assert self.alibi is not None      # a bias step only with ALiBi
        return self.alibi.bias(i, j)

    def biased(self, i: int, j: int) -> sympy.Expr:
        """scale·scores + bias: the logit before any cap (the scaled score without ALiBi)."""
        scaled = self.scale * self.scores.exact(i, j)
        return scaled if self.alibi is None else scaled + self.bias(i, j)

    def transformed(self, i: int, j: int) -> sympy.Expr:
        """The transform of the biased logit (the capped logit c·tanh(biased / c))."""
        assert self.transform is not None     # a transformed step only with a transform
        return self.transform.exact(self.biased(i, j))

    def logit(self, i: int, j: int) -> sympy.Expr:
        """The value the softmax takes: transformed (capped), biased or scaled."""
        if self.transform is not None:
            return self.transformed(i, j)
        return self.biased(i, j)

    def logit_row(self, i: int) -> list | None:
        """Row i's logits as the softmax takes them, as fmpq, when they are known rationals."""
        row = self.pre_row(i)
        if row is None or self.transform is None:
            return row
        if not self.transform.rational:
            return None
        known = self.transform.known
        return [known(x) for x in row]

    def pre_row(self, i: int) -> list | None:
        """Row i's logits before the cap as fmpq, when scale, scores and slope are rational."""
        if i not in self._pre_rows:
            row = None
            slope = None if self.alibi is None else self.alibi.slope_rational
            if self.scores.rational is not None and self.scale_rational is not None and \
                    (self.alibi is None or slope is not None):
                s, scores = self.scale_rational, self.scores.rational
                row = [scores[i, j] * s for j in range(self.m)]
                if self.alibi is not None and slope is not None:
                    row = [x - slope * self.alibi.distance(i, j) for j, x in enumerate(row)]
            self._pre_rows[i] = row
        return self._pre_rows[i]

    def _logit_argmax(self, i: int, allowed: tuple[int, ...]) -> int | None:
        """The first key of row i's largest logit before the cap (tanh is increasing)."""
        row = self.pre_row(i)
        if row is not None:
            best = allowed[0]
            for j in allowed[1:]:
                if row[j] > row[best]:
                    best = j
            return best
        best = allowed[0]
        for j in allowed[1:]:
            x, y = self.biased(i, j), self.biased(i, best)
            c = sign_or_none(sympy.expand(x - y)) if self.symbolic else compare(x, y)
            if c is None:
                return None
            if c > 0:
                best = j
        return best
