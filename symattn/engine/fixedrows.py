"""The softmax exponentials in fixed point: proved floors of e^shifted·2^bits.

For problems whose scores are integers over one denominator and whose scale is rational
(every problem typed in decimals), each row's exponentials are given as integers E_j with
E_j ≤ e^shifted[i, j]·2^bits < E_j + 1 (:meth:`FixedExps.fixed_exps`), each floor proved by
an arb ball.  :mod:`symattn.engine.fixed` turns them into certified decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import flint
import sympy

from symattn.engine.exact import ExactEntries
from symattn.numbers.certify import to_arb
from symattn.numbers.precision import precision
from symattn.problem.problem import Problem


@dataclass(frozen=True)
class FixedRow:
    """One softmax row in fixed point with 2^bits as the unit (:meth:`Engine.fixed_exps`).

    Every exps[j] is the floor of e^shifted[i, j]·2^bits (0 where masked, exact), and
    the row sum times 2^bits lies in [total, total + terms): each of the ``terms``
    inexact terms (the allowed keys and the sink) was cut by less than one unit.  For the
    keys whose exps[j] is short (tiny weights), fine[j] = (M, s) is the floor of
    e^shifted[i, j]·2^(bits+s): the same value with s more bits."""
    exps: list[int]
    total: int
    terms: int
    fine: dict[int, tuple[int, int]]



class FixedExps(ExactEntries):
    """Rows of exp in fixed point, cached by score gap at one precision."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        #: floor(e^t·2^bits) by bits and by integer score difference (Engine.fixed_exps)
        self._fixed: dict[tuple[int, int], dict[int, int]] = {}
        self._fixed_fine: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
        self._fixed_fmpz: dict[int, flint.fmpz] = {}        # by score gap, this precision and shift
        self._fixed_fmpz_made = (0, 0)                      # (shift, floors) they were made for
        self._fixed_undecided = 0                           # floors in _fixed that no ball decided
        self._fixed_gaps: dict[int, list[int]] = {}
        self._fixed_rows: dict[tuple[int, int, int], FixedRow | None] = {}
        self._fixed_precision: tuple[int, int] | None = None

    def fixed_exps(self, i: int, bits: int, fine_bits: int) -> FixedRow | None:
        """Row i of exp in fixed point: integers E_j with E_j ≤ e^shifted[i, j]·2^bits < E_j + 1
        (0 where masked), when the scores are integers over one denominator and the scale
        is rational (every problem typed in decimals); None otherwise.  Keys whose E_j
        has fewer than ``fine_bits`` bits also get a finer floor (see :class:`FixedRow`).

        The exponents repeat across rows (see :meth:`_integer_score_exps`), so each e^t is
        computed once, in arb, and its floor is taken only when the ball proves it
        (:meth:`prepare_fixed` computes those of many rows in one batch)."""
        if not self._fixed_applies(i):
            return None
        key = (i, bits, fine_bits)
        cache, fine_cache = self._fixed_caches(bits, fine_bits)
        if key in self._fixed_rows:
            return self._fixed_rows[key]
        self._fixed_rows[key] = None                     # until it is proved below
        gaps = self._row_gaps(i)
        try:                                             # prepare_fixed made them, as a rule
            values = list(map(cache.__getitem__, gaps))
        except KeyError:
            self._fill_fixed(gaps, bits, fine_bits)
            values = list(map(cache.__getitem__, gaps))
        if self._fixed_undecided and None in values:     # a floor no ball decided
            return None
        plan = self.rows[i]
        if len(gaps) == self.m:
            exps = values
        else:
            exps = [0] * self.m
            for j, e in zip(plan.allowed, values):
                exps[j] = e
        fine = {j: fine_cache[g] for j, g in zip(plan.allowed, gaps) if g in fine_cache} \
            if fine_cache else {}
        terms = len(plan.allowed)
        total = sum(exps)
        if self.sink is not None:
            value = _fixed_exps([self.sink_exponent(i)], bits, 0)[0]
            if value is None:
                return None
            total, terms = total + value[0], terms + 1
        fixed = self._fixed_rows[key] = FixedRow(exps, total, terms, fine)
        return fixed

    def prepare_fixed(self, rows, bits: int, fine_bits: int) -> None:
        """Every distinct e^t the given rows need, floored in one batch (one precision switch
        instead of one per row: setting flint's precision is not free)."""
        gaps: set[int] = set()
        self._fixed_caches(bits, fine_bits)
        for i in rows:
            if self._fixed_applies(i):
                gaps.update(self._row_gaps(i))
        self._fill_fixed(gaps, bits, fine_bits)

    def _fixed_applies(self, i: int) -> bool:
        return (self.plain and self._score_ints is not None and self.scale_rational is not None
                and self.rows[i].argmax is not None and "exp" not in self.extra
                and "weights" not in self.extra
                and (self.sink is None or self.sink.is_Rational))   # log 2 could make a value rational

    def _fixed_caches(self, bits: int, fine_bits: int) -> tuple[dict, dict]:
        """The floors by score gap at this precision; one precision is kept (memory: 20 MB of
        rows at n = 512), as keep_only does for the balls."""
        if self._fixed_precision != (bits, fine_bits):
            self._fixed_precision = (bits, fine_bits)
            for caches in (self._fixed_rows, self._fixed, self._fixed_fine, self._fixed_fmpz,
                           self._fixed_gaps):
                caches.clear()
            self._fixed_fmpz_made = (0, 0)
            self._fixed_undecided = 0
        return (self._fixed.setdefault((bits, fine_bits), {}),
                self._fixed_fine.setdefault((bits, fine_bits), {}))

    def _row_gaps(self, i: int) -> list[int]:
        """N_j − N_top over row i's allowed keys (the integer score differences; made once
        per row and precision, for prepare_fixed and fixed_exps both)."""
        gaps = self._fixed_gaps.get(i)
        if gaps is None:
            plan, row = self.rows[i], self._integer_row(i)
            top = row[self._argmax(i)]
            if len(plan.allowed) == self.m:
                gaps = [x - top for x in row]
            else:
                gaps = [row[j] - top for j in plan.allowed]
            self._fixed_gaps[i] = gaps
        return gaps

    def _fill_fixed(self, gaps, bits: int, fine_bits: int) -> None:
        """Floor the e^(scale·gap/den) not yet cached (None where no ball decides it)."""
        cache, fine_cache = self._fixed_caches(bits, fine_bits)
        missing = sorted(set(gaps).difference(cache))
        if not missing:
            return
        factor = self._integer_scale()
        for gap, value in zip(missing, _fixed_exps_of_gaps(factor, missing, bits, fine_bits)):
            cache[gap] = None if value is None else value[0]
            self._fixed_undecided += value is None
            if value is not None and value[2]:
                fine_cache[gap] = value[1:]

    def fixed_exps_fmpz(self, i: int, bits: int, fine_bits: int, shift: int = 0) -> list[flint.fmpz]:
        """:meth:`fixed_exps` of row i at the unit 2^(bits − shift), for the output's matrix
        product: the floors E_j >> shift = ⌊e_j·2^(bits − shift)⌋ (floors of floors) as
        fmpz, each made once per distinct exponent (building an fmpz_mat from fmpz is about
        three times faster than from Python ints; fewer bits make the product faster)."""
        self.fixed_exps(i, bits, fine_bits)                 # the row and its score gaps
        exps, fz = self._fixed[bits, fine_bits], self._fixed_fmpz
        if self._fixed_fmpz_made != (shift, len(exps)):    # floors made since: all at once
            if self._fixed_fmpz_made[0] != shift:
                fz.clear()
            for gap, e in exps.items():
                if e is not None and gap not in fz:
                    fz[gap] = flint.fmpz(e >> shift)
            self._fixed_fmpz_made = (shift, len(exps))
        values = list(map(fz.__getitem__, self._fixed_gaps[i]))
        if len(values) == self.m:
            return values
        out = [flint.fmpz(0)] * self.m
        for j, z in zip(self.rows[i].allowed, values):
            out[j] = z
        return out


#: the finer floors of tiny e^t go at most this many times ``bits`` further down (smaller
#: ones are left to the arb path)
_FINE_REACH = 8


def _fixed_exps(exponents: list[flint.fmpq | sympy.Expr], bits: int,
                fine_bits: int) -> list[tuple[int, int, int] | None]:
    """(E, M, s) for each exponent t: E = ⌊e^t·2^bits⌋ and the finer M = ⌊e^t·2^(bits+s)⌋,
    with the shift s ≥ 0 that gives M about ``fine_bits`` bits (s = 0 and M = E when E
    has them already; M = 0 for e^t below 2^−(bits·(1 + _FINE_REACH))).  Each floor is
    proved by an arb ball (one precision context per batch); None where two precisions
    do not decide it.  E = ⌊M/2^s⌋ exactly (floors of floors)."""
    found: list[tuple[int, int, int] | None] = [None] * len(exponents)
    todo = []
    reach = bits * (1 + _FINE_REACH)
    for k, t in enumerate(exponents):
        if isinstance(t, flint.fmpq) and t == 0:
            found[k] = (1 << bits, 1 << bits, 0)
        elif isinstance(t, flint.fmpq) and t < -reach:   # e^t < e^-reach < 2^-reach
            found[k] = (0, 0, 0)
        else:
            todo.append(k)

    unit = flint.fmpz(1) << bits

    def ball(k: int, prec: int) -> flint.arb:
        t = exponents[k]
        return (flint.arb(t) if isinstance(t, flint.fmpq) else to_arb(t, prec)).exp() * unit
    _floor_balls(ball, todo, found, bits, fine_bits)
    return found


def _fixed_exps_of_gaps(factor: flint.fmpq, gaps: list[int], bits: int,
                        fine_bits: int) -> list[tuple[int, int, int] | None]:
    """:func:`_fixed_exps` of the exponents factor·g for integer score gaps g (factor·g ≤ 0),
    the same proved floors from fewer exponentials: with a = |factor| and G = |g| =
    256·h + l, e^(−a·G) = e^(−256·a·h)·e^(−a·l) exactly, so each distinct gap costs one arb
    product of two table balls (each table entry one arb exponential; the high ones times
    2^bits, exactly) instead of an exponential of its own.  The product's ball encloses e^(factor·g) like any other, and
    the floors are taken from it only when it proves them, as in :func:`_fixed_exps`."""
    a = abs(factor)
    reach = bits * (1 + _FINE_REACH)
    found: list[tuple[int, int, int] | None] = [None] * len(gaps)
    todo = []
    for k, g in enumerate(gaps):
        if g == 0 or a == 0:
            found[k] = (1 << bits, 1 << bits, 0)
        elif abs(g) * a.p > reach * a.q:                  # e^t < e^-reach < 2^-reach
            found[k] = (0, 0, 0)
        else:
            todo.append(k)
    if not todo:
        return found
    high = max(abs(gaps[k]) for k in todo) >> _LOW_BITS
    if high + 1 + (1 << _LOW_BITS) > len(todo):     # wide gaps, few of them: one each
        return _fixed_exps([factor * g for g in gaps], bits, fine_bits)
    tables: dict[int, tuple[list[flint.arb], list[flint.arb]]] = {}

    def ball(k: int, prec: int) -> flint.arb:
        if prec not in tables:            # inside the caller's precision context
            unit = flint.fmpz(1) << bits                 # exact: the highs carry the 2^bits
            tables[prec] = ([flint.arb(-a * low).exp() for low in range(1 << _LOW_BITS)],
                            [flint.arb(-a * (h << _LOW_BITS)).exp() * unit for h in range(high + 1)])
        lows, highs = tables[prec]
        g = abs(gaps[k])
        return highs[g >> _LOW_BITS] * lows[g & _LOW_MASK]
    _floor_balls(ball, todo, found, bits, fine_bits)
    return found


#: the score gaps are split as 2^_LOW_BITS·h + l for the tables of :func:`_fixed_exps_of_gaps`
_LOW_BITS = 8
_LOW_MASK = (1 << _LOW_BITS) - 1


def _floor_balls(ball: Callable[[int, int], flint.arb], todo: list[int],
                 found: list[tuple[int, int, int] | None], bits: int, fine_bits: int) -> None:
    """Fill found[k] for k in todo with (E, M, s) from ball(k, prec), an arb enclosure of
    e^t·2^bits at the current precision: at bits + 64, then at 2·bits + 128 for the floors
    the first balls leave open (those stay None)."""
    reach = bits * (1 + _FINE_REACH)
    for prec in (bits + 64, 2 * bits + 128):
        with precision(prec):
            for k in todo:
                y = ball(k, prec)                       # e^t·2^bits
                floor = y.floor().unique_fmpz()
                if floor is None:
                    continue
                e = int(floor)
                if e.bit_length() >= fine_bits:         # the common case: E is fine already
                    found[k] = (e, e, 0)
                    continue
                man, exp = y.mid().man_exp()            # y ≈ 2^(exp + bits of man − 1)
                shift = min(max(0, fine_bits - int(exp) - int(man).bit_length()), reach - bits)
                fine = (y * (flint.fmpz(1) << shift)).floor().unique_fmpz()
                if fine is not None:
                    found[k] = (int(fine) >> shift, int(fine), shift)
        todo = [k for k in todo if found[k] is None]
        if not todo:
            break
