"""The logit-transform interface: what the engine's fast paths ask of a transform of the logits.

A logit transform is a strictly increasing function t applied to every logit after ALiBi's
bias (the soft-cap's ``c·tanh(x / c)``, :mod:`symattn.engine.softcap`).  The engine decides a
row's maximum and its ties on the logits before t (t keeps the order and the ties), and each
fast path asks the transform, never the variant's key, whether it may stand:

- ``rational``: a rational logit stays rational (``known`` gives every value), so the rows of
  known rationals and the exact shifted logits stay fmpq;
- ``algebraic``: an algebraic logit stays algebraic, so Lindemann–Weierstrass still decides
  which softmax values are exact;
- ``keeps_logs``: a logarithm in the logits stays a sum of logarithms in the exponents, so
  e^(q·log b) = b^q may be built (and the root-index budget applies to it).

A new transform is one module with a class of this shape and its entry in :data:`TRANSFORMS`.
"""

from __future__ import annotations

from typing import Callable, Protocol

import flint
import sympy

from symattn.engine.softcap import SoftCap
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


#: each transform's constructor from a problem (None: the problem does not use it)
TRANSFORMS: tuple[Callable[[Problem], LogitTransform | None], ...] = (SoftCap.of,)


def logit_transform(problem: Problem) -> LogitTransform | None:
    """The problem's logit transform, or None (one per problem: the soft-cap is the only one)."""
    for make in TRANSFORMS:
        transform = make(problem)
        if transform is not None:
            return transform
    return None
