"""The soft-cap as a logit transform (Gemma 2): ``capped = c·tanh(x / c)``, in (−c, c).

This is the soft-cap's piece of the engine, the shape :class:`symattn.engine.transform.
LogitTransform` asks for (:mod:`symattn.problem.keys.logits` parses the key into an exact
c > 0).  tanh of a rational other than 0 is transcendental, so the capped logits are neither
rational nor proved algebraic, and SymPy leaves e^(c·tanh(x/c)) alone: every fast path that
needs rational or algebraic logits steps aside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import flint
import sympy

from symattn.numbers.certify import to_arb
from symattn.problem.keys.logits import capped
from symattn.problem.problem import Problem


@dataclass(frozen=True)
class SoftCap:
    """c·tanh(x / c) with an exact cap c > 0."""

    cap: sympy.Expr
    step: ClassVar[str] = "capped"
    rational: ClassVar[bool] = False      # tanh(x) for a rational x ≠ 0 is transcendental
    algebraic: ClassVar[bool] = False     # c·tanh(x/c) − c·tanh(y/c): not proved algebraic
    keeps_logs: ClassVar[bool] = False    # no e^(q·log b) in c·tanh(x/c): no b^q is built

    @classmethod
    def of(cls, problem: Problem) -> SoftCap | None:
        """The problem's soft-cap, or None without one."""
        return None if problem.softcap is None else cls(problem.softcap)

    def exact(self, x: sympy.Expr) -> sympy.Expr:
        return capped(self.cap, x)

    def known(self, x: flint.fmpq) -> flint.fmpq | None:
        """tanh(0) = 0: the only rational value known."""
        return flint.fmpq(0) if x == 0 else None

    def balls(self, row: list, prec: int) -> list:
        c = to_arb(self.cap, prec)
        return [c * (x / c).tanh() for x in row]
