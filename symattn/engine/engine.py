"""The one implementation of attention: exact values and arb enclosures.

:class:`Engine` is composed of the engine's parts, one job per module, each built on the
ones below it:

- ``state.py``: the exact state (Q, K, V, scores, scale, mask, variant keys, caches);
- ``logits.py``: ALiBi's bias and the soft-cap, the logits before the softmax;
- ``plan.py``: each row's maximum, decided exactly, and its tie groups;
- ``exact.py``: the exact entries (shifted, exp, row_sum, weights, output) as SymPy;
- ``algebraic.py``: the algebraic values (Lindemann–Weierstrass, b^q) and known rationals;
- ``balls.py``: arb enclosures row by row; ``fixedrows.py``: the fixed-point exponentials.

Nothing here materialises a SymPy tree for the softmax up front.  The exact
state of a problem is small: Q, K, V and the scores (rational matrices in
flint when the inputs are rational, SymPy matrices otherwise), the scale,
and per row the index of its maximum.  Every later entry is *structural*:

    shifted[i, j] = scale · (scores[i, j] − scores[i, r_i])      (r_i = argmax)
    exp[i, j]     = e^shifted[i, j]           (0 where masked)
    row_sum[i]    = Σ_j exp[i, j]  (+ e^(sink − scale·scores[i, r_i]) with a sink logit)
    weights[i, j] = exp[i, j] / row_sum[i]
    output[i, c]  = Σ_j weights[i, j] · V[j, c]

With ALiBi or soft-capping (``symattn.problem.keys.logits``) the softmax works on the
*logits* instead of ``scale · scores``: ``biased = scaled + bias`` and/or
``capped = c·tanh(· / c)``; the row maximum and the tie groups are decided on
the logits before the cap (tanh is increasing), and shifted is
``logit[i, j] − logit[i, r_i]``.  The plain problem keeps its fast paths.

so an entry's SymPy expression is built only when asked for, and numbers
come from arb balls computed row by row at the precision asked for.

Which of these values are exact algebraic numbers is decided by
Lindemann–Weierstrass: for distinct algebraic exponents the e^d are
linearly independent over the algebraic numbers, so a ratio
Σ_d a_d e^d / Σ_d b_d e^d is algebraic exactly when a_d = λ·b_d for every d,
and then it equals λ.  That is how ties (1/3, or an output equal to a
constant value column) are recognised instead of looping forever on a
rounding boundary.

A scale that is not algebraic may still give algebraic exponentials: with
``scale = log(2)`` every e^(scale·Δ) is 2^Δ, and the weights are rational
(2^k / Σ 2^k).  Whenever scale·Δ is a sum of rational multiples of
logarithms of positive rationals, e^(Σ q·log b) = Π b^q exactly, and the
softmax steps are computed from those algebraic numbers.  SymPy builds
b^q itself as soon as it sees e^(q·log b) (and again inside any product),
so a problem whose b^q would pass :data:`EXACT_POWER_DIGITS` digits is
refused with a ProblemError instead of hanging on 2^(-10^12).
"""

from __future__ import annotations

from typing import Callable

import sympy

from symattn.engine.balls import Balls
from symattn.engine.budgets import check_root_indices
from symattn.engine.fixedrows import FixedExps, FixedRow
from symattn.engine.state import RowPlan
from symattn.numbers.masked import NEG_INF
from symattn.problem.matrix import ExactMatrix
from symattn.problem.problem import Problem

__all__ = ["Engine", "ExactEntry", "ExactMatrix", "FixedRow", "NEG_INF", "RowPlan"]


class Engine(Balls, FixedExps):
    """Exact state of one problem, and arb enclosures of every step by row."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.rows = [self._plan_row(i) for i in range(self.n)]
        if self._scale_logs is not None and self.scores.is_rational:
            # every exponential algebraic, e^(scale·Δ) = Π b^(qΔ): refuse one too long to build
            self._check_power_sizes()
        check_root_indices(self)     # e^(c·log b) = b^c: its root index, before any is built


ExactEntry = Callable[[int, int], sympy.Expr]
