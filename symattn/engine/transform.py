"""The logit transforms: the interface the engine's fast paths ask, each transform, their registry.

A logit transform is a strictly increasing function t applied to every logit after ALiBi's
bias (the soft-cap's ``c·tanh(x / c)``, :class:`SoftCap`).  The engine decides a
row's maximum and its ties on the logits before t (t keeps the order and the ties), and each
fast path asks the transform, never the variant's key, whether it may stand:

- ``rational``: a rational logit stays rational (``known`` gives every value), so the rows of
  known rationals and the exact shifted logits stay fmpq;
- ``algebraic``: an algebraic logit stays algebraic, so Lindemann–Weierstrass still decides
  which softmax values are exact;
- ``keeps_logs``: a logarithm in the logits stays a sum of logarithms in the exponents, so
  e^(q·log b) = b^q may be built (and the root-index budget applies to it).

A new transform is a class of this shape in this module and its entry in :data:`TRANSFORMS`
below it: the engine's piece of a variant is this one file (``state.py``, ``logits.py``,
``exact.py``, ``algebraic.py``, ``balls.py``, ``budgets.py`` and ``trace/trace.py`` ask
:func:`logit_transform` and do not change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Protocol

import flint
import sympy

from symattn.numbers.certify import to_arb
from symattn.problem.keys.logits import capped
from symattn.problem.problem import Problem


class LogitTransform(Protocol):
    """A strictly increasing map of the logits, exactly, as known rationals and as balls."""

    @property
    def step(self) -> str:
        """The Trace step that holds the transformed logits (``capped``)."""
        ...

    @property
    def rational(self) -> bool:
        """True when every rational logit maps to a rational one (``known`` never None)."""
        ...

    @property
    def algebraic(self) -> bool:
        """True when every algebraic logit maps to an algebraic number."""
        ...

    @property
    def keeps_logs(self) -> bool:
        """True when Σ q·log b logits give Σ q'·log b exponents (SymPy then builds b^q')."""
        ...

    def exact(self, x: sympy.Expr) -> sympy.Expr:
        """t(x) as an exact SymPy expression."""
        ...

    def known(self, x: flint.fmpq) -> flint.fmpq | None:
        """t(x) for a rational x when it is a known rational (tanh 0 = 0), else None."""
        ...

    def balls(self, row: list, prec: int) -> list:
        """t of a row of arb balls at ``prec`` bits (called inside ``precision(prec)``)."""
        ...


# -- the transforms ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SoftCap:
    """The soft-cap (Gemma 2): ``capped = c·tanh(x / c)`` with an exact cap c > 0, in (−c, c).

    :mod:`symattn.problem.keys.logits` parses the key into c.  tanh of a rational other than 0
    is transcendental, so the capped logits are neither rational nor proved algebraic, and
    SymPy leaves e^(c·tanh(x/c)) alone: every fast path that needs rational or algebraic
    logits steps aside.
    """

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


#: each transform's constructor from a problem (None: the problem does not use it)
TRANSFORMS: tuple[Callable[[Problem], LogitTransform | None], ...] = (SoftCap.of,)


def logit_transform(problem: Problem) -> LogitTransform | None:
    """The problem's logit transform, or None (one per problem: the soft-cap is the only one)."""
    for make in TRANSFORMS:
        transform = make(problem)
        if transform is not None:
            return transform
    return None
