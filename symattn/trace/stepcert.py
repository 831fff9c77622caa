"""Certified decimals of whole steps: the precision loop over matrix rows.

Known rationals (the scores, a rational scaling, e^0 = 1, tied rows) are
rounded exactly with integers.  Every other entry is rounded from its arb
ball; the rows whose balls do not decide are recomputed at double the
precision.  An entry that may sit exactly on a rounding boundary, or may be
a terminating decimal, is settled from its exact value: for the softmax
steps that is the engine's Lindemann–Weierstrass test, for the others the
exact SymPy entry through :func:`symattn.numbers.certify.certify`.
"""

from __future__ import annotations

import gc
from collections import Counter
from contextlib import contextmanager
from typing import Callable, cast

import flint
import sympy

from symattn.numbers.balls import round_balls
from symattn.numbers.certify import CertifiedDecimal, Rounding, certify, effective_digits, round_ratio
from symattn.numbers.masked import NEG_INF, Masked
from symattn.engine.engine import Engine
from symattn.errors import CertificationError
from symattn.engine.fixed import fixed_point_decimals
from symattn.numbers.precision import cap_bits, precision, precisions, undecided
from symattn.vocab import StepName

_SOFTMAX_STEPS = frozenset(StepName.span(StepName.EXP, StepName.OUTPUT))

#: how many entries each step settled from its exact value (a test's count, never a speed gate)
EXACT_SETTLES: Counter[str] = Counter()

Entry = CertifiedDecimal | Masked  # Masked: NEG_INF, where the mask removed the key


def certify_entries(engine: Engine, step: str, exact: Callable[[int, int], sympy.Expr],
                    rounding: Rounding, wanted: dict[int, list[int]]) -> dict[int, dict[int, Entry]]:
    """Certified decimals of the wanted entries ``{row: [columns]}`` of one step."""
    symbols = engine.symbols_of(step)
    if symbols:
        names = ", ".join(sorted(str(x) for x in symbols))
        raise CertificationError(
            f"{step} depends on the symbols {names}: decimals need numbers; "
            "give values with problem.subs({...})")
    with _collector_paused():
        return _certify(engine, step, exact, rounding, wanted)


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector for one step's certification.

    A step makes hundreds of thousands of small containers (a CertifiedDecimal per entry,
    lists of balls per row) next to a heap of SymPy and arb objects; the collector's full
    passes over that heap took about a quarter of the 30-digit n = 512 run.  Nothing here
    makes reference cycles that need collecting promptly; the collector resumes after.

    On resuming, the objects made meanwhile would all sit in the youngest generation, and
    the next allocation would start a pass over every one of them (about 0.03 s for the
    262,144 weights at n = 512) only to find them alive: they are the step's result.  So
    they go to the oldest generation directly (``gc.freeze()`` then ``gc.unfreeze()``: two
    list splices, no pass), where the next full collection sees them as it sees everything.
    A Trace holds no reference cycle (its steps are held weakly), so a dropped trace is freed
    by reference counting, not left for that collection."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def _certify(engine: Engine, step: str, exact: Callable[[int, int], sympy.Expr],
             rounding: Rounding, wanted: dict[int, list[int]]) -> dict[int, dict[int, Entry]]:
    result, pending = _known_entries(engine, step, rounding, wanted)
    _by_fixed_point(engine, step, rounding, result, pending)
    if pending:
        _by_balls(engine, step, exact, rounding, result, pending)
    return result


def _known_entries(engine: Engine, step: str, rounding: Rounding, wanted: dict[int, list[int]],
                   ) -> tuple[dict[int, dict[int, Entry]], dict[int, list[int]]]:
    """The entries the engine knows exactly (rationals, masked), rounded with integers; and
    per row the columns left for the balls."""
    result: dict[int, dict[int, Entry]] = {}
    pending: dict[int, list[int]] = {}
    memo: dict[tuple[int, int], CertifiedDecimal] = {}  # inputs repeat few distinct values
    by_denominator: dict[int, dict[int, CertifiedDecimal]] = {}   # the same as integers
    for i, cols in wanted.items():
        row = result[i] = {}
        integers = engine.known_integers(step, i)
        if integers is not None:          # a rational step: integers over one denominator
            numerators, den = integers
            by_numerator = by_denominator.setdefault(den, {})
            for j in cols:
                value = numerators[j]
                decided = by_numerator.get(value) if value is not NEG_INF else NEG_INF
                if decided is None:
                    decided = by_numerator[value] = round_ratio(value, den, rounding)
                row[j] = decided
            continue
        known = engine.known_row(step, i)
        if known.count(None) == len(known):     # the common case of the softmax steps
            pending[i] = list(cols)
            continue
        unknown = [j for j in cols if known[j] is None]
        if unknown:
            pending[i] = unknown
            if len(unknown) == len(cols):       # the common case of the softmax steps
                continue
        for j in cols:
            value = known[j]
            if value is None:
                continue
            elif value is NEG_INF:
                row[j] = NEG_INF
            else:
                key = (int(value.p), int(value.q))  # hashing an fmpq is slow
                decided = memo.get(key)
                if decided is None:
                    decided = memo[key] = round_ratio(key[0], key[1], rounding)
                row[j] = decided
    return result, pending


def _by_fixed_point(engine: Engine, step: str, rounding: Rounding,
                    result: dict[int, dict[int, Entry]], pending: dict[int, list[int]]) -> None:
    """The fixed-point fast path (decimal inputs); what it leaves stays in ``pending``."""
    for i, decided in fixed_point_decimals(engine, step, rounding, pending).items():
        if len(decided) == len(pending[i]):    # the common case: all of them
            if result[i]:
                result[i].update(decided)
            else:                              # a fresh dict of the fast path's own: taken as it is
                result[i] = cast(dict[int, Entry], decided)
            del pending[i]
            continue
        result[i].update(decided)
        left = [j for j in pending[i] if j not in decided]
        if left:
            pending[i] = left
        else:
            del pending[i]


def _by_balls(engine: Engine, step: str, exact: Callable[[int, int], sympy.Expr], rounding: Rounding,
              result: dict[int, dict[int, Entry]], pending: dict[int, list[int]]) -> None:
    """The precision loop: balls at rising precision until every pending entry is decided."""
    # Which entries can be exact decimals hidden inside a ball: an output equal to a
    # value-column mean, an input entry that SymPy did not reduce to a rational, and any
    # algebraic logit (scaled, bias, biased, capped, masked, shifted, the variants' own
    # steps): √2·√2/2 = 1, (11·√2/10)/√2 = 11/10.  Only the exponentials, their sums and
    # the weights are left out: where they are rational the engine knows it (ties,
    # powers) before any ball is made.  The test costs little: a ball near its own
    # decimal is rare unless the value is that decimal.
    may_terminate = step not in _SOFTMAX_STEPS or step == "output"
    # one policy (symattn.numbers.precision); for places the digits in front of the
    # point are not known up front: the loop doubles past them (the cap
    # leaves room for about 19,000 of them)
    digits = effective_digits(rounding)
    loop = precisions(digits)
    start = None
    settled: set[tuple[int, int]] = set()

    def settle(i: int, j: int) -> CertifiedDecimal | None:
        settled.add((i, j))
        EXACT_SETTLES[step] += 1
        if step in _SOFTMAX_STEPS:
            value = engine.algebraic_value(step, i, j)
            return None if value is None else certify(value, rounding)
        return certify(exact(i, j), rounding)

    while pending:
        prec = next(loop, None)
        if prec is None:
            i, cols = next(iter(pending.items()))
            raise undecided(f"{step}[{i}, {cols[0]}]", f"the rounding to {rounding}",
                            cap_bits(digits), "it may sit exactly on a rounding boundary")
        start = start or prec
        undecided_: dict[int, list[int]] = {}
        engine.prefetch(step, list(pending), prec)
        for i, cols in pending.items():
            balls = engine.balls(step, i, prec)
            row = result[i]
            rounded = round_balls([balls[j] for j in cols], rounding)
            decimals = [d for d, _ in rounded if d is not None]
            if len(decimals) == len(cols) and not (may_terminate and any(near for _, near in rounded)):
                # the common case: every ball decided, none near its own decimal
                row.update(zip(cols, decimals))
                continue
            for j, (decided, near) in zip(cols, rounded):
                # near: the ball may hold its own rounded decimal (an exact terminating value?)
                if (decided is None or (may_terminate and near and _may_equal(balls[j], decided, prec))) \
                        and (i, j) not in settled:
                    # settled exactly only if the doubled precision left it so too: a random
                    # value near its own decimal at the first precision is not near at twice it
                    # (the exact entry of a backward step is a sum over every row: seconds)
                    decided = settle(i, j) or decided if prec > start else None
                if decided is None:
                    undecided_.setdefault(i, []).append(j)
                else:
                    row[j] = decided
        pending = undecided_
    # keep the balls at the starting precision: the next steps are built from them
    if start is not None:
        engine.keep_only(start)


def _may_equal(ball: flint.arb, decided: CertifiedDecimal, prec: int) -> bool:
    """Whether the ball still admits the rounded decimal m·10^e itself as the exact value.

    Tested as "the ball overlaps a ball around m·10^e", with 10^e computed in
    arb: its cost does not grow with |e| (a weight of 10^(-4·10^11) is
    cheap), and the rounding of 10^e only widens the test, which can send
    an entry to the exact check, never past it.
    """
    m, e = decided.mantissa, decided.exponent
    if m == 0:
        return False  # a decided zero: the ball lies on one side of 0 or is exactly 0
    if 0 <= e < 64:
        return bool(ball.contains(flint.fmpz(m) * flint.fmpz(10) ** e))
    with precision(2 * prec):  # wide enough that the product adds no visible radius
        return bool(ball.overlaps(flint.arb(m) * flint.arb(10) ** e))
