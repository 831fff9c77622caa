"""The fixed-point exponentials of integer score gaps from two tables
(symattn.engine.fixedrows._fixed_exps_of_gaps: e^(−a·G) = e^(−256·a·h)·e^(−a·l)), against
mpmath at 400 digits (an independent computation) and against one exponential per gap."""

from __future__ import annotations

import random

import flint
import mpmath
import pytest

from symattn.engine.fixedrows import _fixed_exps, _fixed_exps_of_gaps


def _floor_by_mpmath(factor: flint.fmpq, gap: int, bits: int) -> int:
    with mpmath.workdps(400):
        value = mpmath.exp(mpmath.mpf(int(factor.p)) * gap / int(factor.q)) * mpmath.mpf(2) ** bits
        return int(mpmath.floor(value))


@pytest.mark.parametrize("factor", [flint.fmpq(1, 800), flint.fmpq(-3, 7), flint.fmpq(5, 2), flint.fmpq(0)])
def test_gap_floors_are_the_floors_of_e_to_the_exponent(factor):
    bits, fine_bits = 140, 60
    rng = random.Random(str(factor))
    sign = -1 if factor >= 0 else 1             # factor·gap ≤ 0, as the engine's gaps are
    gaps = sorted({0, sign, sign * 255, sign * 256, sign * 257, *(sign * rng.randrange(1, 40_000) for _ in range(60))})
    got = _fixed_exps_of_gaps(factor, gaps, bits, fine_bits)
    assert got == _fixed_exps([factor * g for g in gaps], bits, fine_bits)
    reach = bits * 9
    for g, value in zip(gaps, got):
        assert value is not None
        e, fine, shift = value
        if abs(factor * g) > reach:
            assert value == (0, 0, 0)
            continue
        assert e == _floor_by_mpmath(factor, g, bits), g
        assert fine >> shift == e
        if shift:                      # a tiny exponential: its finer floor has about fine_bits bits
            assert fine == _floor_by_mpmath(factor, g, bits + shift)
            if shift < reach - bits:     # (the shift is capped: below that M may keep fewer)
                assert fine.bit_length() >= fine_bits - 1
    if factor == 0:
        assert all(v == (1 << bits, 1 << bits, 0) for v in got)


def test_tiny_exponentials_keep_their_finer_floors():
    """Gaps whose e^t·2^bits has few bits (peaked rows): the finer floor M = ⌊e^t·2^(bits+s)⌋."""
    factor, bits, fine_bits = flint.fmpq(1, 4), 64, 80
    gaps = [-g for g in (100, 180, 250, 300, 511, 1000, 2000)]
    got = _fixed_exps_of_gaps(factor, gaps, bits, fine_bits)
    assert got == _fixed_exps([factor * g for g in gaps], bits, fine_bits)
    assert any(value[2] > 0 for value in got if value is not None)
    for g, value in zip(gaps, got):
        e, fine, shift = value
        if shift:
            assert fine == _floor_by_mpmath(factor, g, bits + shift), g
        assert e == _floor_by_mpmath(factor, g, bits)


def test_a_few_wide_gaps_take_one_exponential_each():
    """Gaps of 10^12 (projected inputs over large denominators): the tables would need
    millions of entries, so each gap takes its own exponential, with the same floors."""
    factor, bits, fine_bits = flint.fmpq(1, 10 ** 12), 100, 60
    gaps = [0, -1, -(10 ** 12), -3 * 10 ** 12 - 7, -(10 ** 13) + 1]
    got = _fixed_exps_of_gaps(factor, gaps, bits, fine_bits)
    assert got == _fixed_exps([factor * g for g in gaps], bits, fine_bits)
    for g, value in zip(gaps, got):
        assert value[0] == _floor_by_mpmath(factor, g, bits)
