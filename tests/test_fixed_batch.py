"""The batched ratio of the fixed-point path (symattn.engine.fixed._ratios) and the coarse
output product: crafted rows at the edges of what the per-entry shortcut decides, and the
n = 512 forward against main's decimals and against mpmath.

The shortcut takes each weight's decade from its numerator's bit length and one threshold,
and its rounding from the bits below a reciprocal's shift; entries within the margin of a
half, or at a decade's edge, go to the general test.  Every decided weight must be the
rounding of both ends of the interval its integers allow, in Python fractions.
"""

from __future__ import annotations

import hashlib
import random
from fractions import Fraction

import mpmath
import pytest

import symattn as sa
from symattn.engine.engine import FixedRow
from symattn.engine.fixed import fixed_point_decimals, working_bits
from symattn.numbers.certify import Rounding, round_ratio


class _Rows:
    """An engine stand-in handing out given fixed-point rows (weights only)."""

    def __init__(self, rows: list[FixedRow]):
        self._rows, self.m = rows, len(rows[0].exps)

    def fixed_exps(self, i: int, bits: int, fine_bits: int) -> FixedRow:
        return self._rows[i]

    def prepare_fixed(self, rows, bits: int, fine_bits: int) -> None:
        pass

    def softmax_is_rational(self, i: int) -> bool:
        return False


def _both_ends(row: FixedRow, rounding: Rounding) -> tuple[int, int]:
    """(decided, checked): every decided weight against both ends of [E/(S + k), (E + 1)/S]."""
    got = fixed_point_decimals(_Rows([row]), "weights", rounding, {0: list(range(len(row.exps)))}).get(0, {})
    for j, d in got.items():
        for end in (Fraction(row.exps[j], row.total + row.terms), Fraction(row.exps[j] + 1, row.total)):
            r = round_ratio(end.numerator, end.denominator, rounding)
            assert (r.mantissa, r.exponent) == (d.mantissa, d.exponent), (j, d, float(end))
        assert not d.exact
    return len(got), len(row.exps)


@pytest.mark.parametrize("digits", [1, 3, 15, 30, 60])
def test_weights_at_decade_edges_round_like_both_ends(digits):
    """A weight a few units either side of 10^−c (c = 1 … 6) of its own row, where the bit
    length leaves two decades and the threshold ⌈S·10^−c⌉ decides between them: with the
    rest of the row summing to R, E = R/(10^c − 1) gives E/(R + E) = 10^−c."""
    b, bits = working_bits(digits, 64)
    rng = random.Random(digits)
    top = 1 << bits
    decided = checked = 0
    for c in range(1, 7):
        for _ in range(3):
            rest = [top] + [rng.randrange(top >> 20, top >> 6) for _ in range(6)]
            edge = sum(rest) // (10 ** c - 1)
            for delta in (-3, -1, 0, 1, 3):
                exps = rest + [edge + delta]
                row = FixedRow(exps, sum(exps), len(exps), {})
                n, k = _both_ends(row, Rounding(digits=digits))
                decided, checked = decided + n, checked + k
    assert decided >= 0.9 * checked


@pytest.mark.parametrize("digits", [2, 30, 90])
def test_weights_next_to_a_half_are_left_or_right(digits):
    """A weight placed 2^−g rounding units from (M + ½)·10^−p: within the remainder's margin
    (2^−20 of a unit) the shortcut must not decide it, and the general test (4 guard digits)
    leaves it too; far from the half (g ≤ 8) it is decided, like both ends of its interval."""
    b, bits = working_bits(digits, 2)
    rng = random.Random(f"half-{digits}")
    top = 1 << bits
    for _ in range(40):
        g = rng.choice([2, 5, 8, 22, 26, 30])
        mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
        unit = Fraction(1, 10 ** (digits + rng.randint(0, 3)))
        w = (mantissa + Fraction(1, 2) + rng.choice([-1, 1]) * Fraction(1, 2 ** g)) * unit
        x = int(w * top / (1 - w))                                  # w = x/(top + x)
        row = FixedRow([top, x], top + x, 2, {})
        got = fixed_point_decimals(_Rows([row]), "weights", Rounding(digits=digits), {0: [1]}).get(0, {})
        assert (1 in got) == (g <= 8), (g, got)
        _both_ends(row, Rounding(digits=digits))


def _problem(n: int, d: int, seed: str) -> dict[str, list[list[str]]]:
    rng = random.Random(seed)

    def matrix():
        return [[f"{k / 10:.1f}" for k in (rng.randint(-30, 30) for _ in range(d))] for _ in range(n)]
    return {"Q": matrix(), "K": matrix(), "V": matrix()}


#: sha256 of the n = 512, d = 64 weights and output to 30 digits ("text:exact" per entry, rows
#: joined by "|" and ended by newlines), as main's engine gave them before the batched path
MAIN_512_DIGEST = "4b5af5694abd5b783af29b5ee8c2c2ab35b415d4fe4d29f10f79ee7f173b9ebc"


def test_the_512_forward_is_main_s_and_agrees_with_mpmath():
    m = _problem(512, 64, "0-512-64")       # benchmarks/bench_floatref.py's digits30 problem
    trace = sa.Trace(sa.Problem(**m))
    rounding = Rounding(digits=30)
    weights = trace.step("weights").decimals(rounding)
    output = trace.step("output").decimals(rounding)
    h = hashlib.sha256()
    for rows in (weights, output):
        for row in rows:
            h.update(("|".join(f"{x}:{x.exact}" for x in row) + "\n").encode())
    assert h.hexdigest() == MAIN_512_DIGEST
    # and two rows by the definition in mpmath at 60 digits (an independent computation)
    with mpmath.workdps(60):
        K = [[mpmath.mpf(x) for x in row] for row in m["K"]]
        V = [[mpmath.mpf(x) for x in row] for row in m["V"]]
        for i in (0, 511):
            q = [mpmath.mpf(x) for x in m["Q"][i]]
            logits = [mpmath.fdot(q, k) / 8 for k in K]          # 1/√64
            top = max(logits)
            exps = [mpmath.exp(x - top) for x in logits]
            total = mpmath.fsum(exps)
            w = [e / total for e in exps]
            for j in range(512):
                d = weights[i][j]
                unit = mpmath.mpf(10) ** d.exponent
                assert abs(mpmath.mpf(d.mantissa) * unit - w[j]) <= unit / 2, (i, j, str(d))
            for c in range(64):
                o = mpmath.fdot(w, [v[c] for v in V])
                d = output[i][c]
                unit = mpmath.mpf(10) ** d.exponent
                assert abs(mpmath.mpf(d.mantissa) * unit - o) <= unit / 2, (i, c, str(d))
