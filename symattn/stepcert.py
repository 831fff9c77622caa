"""Certified decimals of whole steps: the precision loop over matrix rows.

Known rationals (the scores, a rational scaling, e^0 = 1, tied rows) are
rounded exactly with integers.  Every other entry is rounded from its arb
ball; the rows whose balls do not decide are recomputed at double the
precision.  An entry that may sit exactly on a rounding boundary, or may be
a terminating decimal, is settled from its exact value: for the softmax
steps that is the engine's Lindemann–Weierstrass test, for the others the
exact SymPy entry through :func:`symattn.certify.certify`.
"""

from __future__ import annotations

from typing import Callable

import flint
import sympy

from symattn.certify import CertifiedDecimal, Rounding, certify, guard_prec, round_ball, round_ratio
from symattn.engine import NEG_INF, Engine
from symattn.errors import CertificationError

#: Bits beyond which a step's certification gives up (with a clear error).
MAX_PREC_BITS = 1 << 20

_SOFTMAX_STEPS = frozenset(("exp", "row_sum", "weights", "output"))

Entry = CertifiedDecimal | object  # or NEG_INF


def certify_entries(engine: Engine, step: str, exact: Callable[[int, int], sympy.Expr],
                    rounding: Rounding, wanted: dict[int, list[int]]) -> dict[int, dict[int, Entry]]:
    """Certified decimals of the wanted entries ``{row: [columns]}`` of one step."""
    symbols = engine.symbols_of(step)
    if symbols:
        names = ", ".join(sorted(str(x) for x in symbols))
        raise CertificationError(
            f"{step} depends on the symbols {names}: decimals need numbers; "
            "give values with problem.subs({...})")
    result: dict[int, dict[int, Entry]] = {}
    pending: dict[int, list[int]] = {}
    memo: dict[tuple[int, int], CertifiedDecimal] = {}  # inputs repeat few distinct values
    for i, cols in wanted.items():
        known = engine.known_row(step, i)
        row = result[i] = {}
        for j in cols:
            value = known[j]
            if value is None:
                pending.setdefault(i, []).append(j)
            elif value is NEG_INF:
                row[j] = NEG_INF
            else:
                key = (int(value.p), int(value.q))  # hashing an fmpq is slow
                decided = memo.get(key)
                if decided is None:
                    decided = memo[key] = round_ratio(key[0], key[1], rounding)
                row[j] = decided

    # Only these can be exact decimals hidden inside a ball: an output equal to a
    # value-column mean, or an input entry that SymPy did not reduce to a rational.
    may_terminate = step == "output" or engine.matrix(step) is not None
    prec = start = guard_prec(rounding)
    settled: set[tuple[int, int]] = set()

    def settle(i: int, j: int) -> CertifiedDecimal | None:
        settled.add((i, j))
        if step in _SOFTMAX_STEPS:
            value = engine.algebraic_value(step, i, j)
            return None if value is None else certify(value, rounding)
        return certify(exact(i, j), rounding)

    while pending:
        if prec > MAX_PREC_BITS:
            i, cols = next(iter(pending.items()))
            raise CertificationError(
                f"could not prove the rounding of {step}[{i}, {cols[0]}] at {rounding} "
                f"within {MAX_PREC_BITS} bits")
        undecided: dict[int, list[int]] = {}
        engine.prefetch(step, list(pending), prec)
        for i, cols in pending.items():
            balls = engine.balls(step, i, prec)
            row = result[i]
            for j in cols:
                ball = balls[j]
                decided = round_ball(ball, rounding)
                if (decided is None or (may_terminate and _may_equal(ball, decided, prec))) \
                        and (i, j) not in settled:
                    decided = settle(i, j) or decided
                if decided is None:
                    undecided.setdefault(i, []).append(j)
                else:
                    row[j] = decided
        pending, prec = undecided, prec * 2
    # keep the balls at the starting precision: the next steps are built from them
    engine.keep_only(start)
    return result


def _may_equal(ball: flint.arb, decided: CertifiedDecimal, prec: int) -> bool:
    """Whether the ball still admits the rounded decimal m·10^e itself as the exact value.

    Tested as "ball·10^-e contains the integer m"; the product's rounding only
    widens the ball, which can send an entry to the exact check, never past it.
    """
    m, e = decided.mantissa, decided.exponent
    if m == 0:
        return False  # a decided zero: the ball lies on one side of 0 or is exactly 0
    if e >= 0:
        return bool(ball.contains(flint.fmpz(m) * flint.fmpz(10) ** e))
    old = flint.ctx.prec
    flint.ctx.prec = 2 * prec  # wide enough that the product adds no visible radius
    try:
        return bool((ball * flint.fmpz(10) ** -e).contains(flint.fmpz(m)))
    finally:
        flint.ctx.prec = old
