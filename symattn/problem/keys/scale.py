"""The ``scale`` key: the factor of the scores, 1/√d_k unless given.

Plain values in (a number, a string for the safe parser, a SymPy expression), one exact real
number of bounded size out."""

from __future__ import annotations

from typing import Any

import flint
import sympy

from symattn.errors import ProblemError
from symattn.exact.coerce import to_exact
from symattn.problem.keys.context import KeyContext
from symattn.problem.matrix import check_magnitude, check_symbols, plain_scalar

__all__ = ["scale_key"]


def scale_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """``scale`` and whether it was given (the default is the standard 1/√d_k)."""
    if value is None:
        return {"scale": 1 / sympy.sqrt(ctx.d_k), "scale_given": False}
    value = plain_scalar(value)
    scale = to_exact(value, where="scale", symbols=bool(ctx.symbols) or isinstance(value, sympy.Basic))
    if not isinstance(value, sympy.Basic):
        check_symbols(scale, "scale", ctx.symbols)
    if scale.is_real is False or scale.has(sympy.zoo, sympy.oo, sympy.nan):
        raise ProblemError(f"scale is {scale}, which is not a real number: give a real scale such as 1/sqrt(3)")
    check_magnitude(flint.fmpq(int(scale.p), int(scale.q)) if scale.is_Rational else scale, "scale")
    return {"scale": scale, "scale_given": True}
