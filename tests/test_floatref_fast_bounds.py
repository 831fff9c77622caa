"""The float64 fast path's per-row bounds (symattn/floatref/fast.py), each against exact
rational arithmetic written here: Σ w̃|v| read through a float32 product, the score error
read off the row's largest scaled score, and the additions a term goes through when key
blocks are summed in groups and then as a tree."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from symattn import floatref as fr
from symattn.floatref import fast
from test_floatref_sdpa import assert_matches


def exact_abs_sums(W, V):
    """Σ_j w_j·|v_jc| per row and column, in Fractions."""
    return [[sum(Fraction(float(w)) * abs(Fraction(float(v))) for w, v in zip(row, col))
             for col in V.T] for row in W]


def _weights(rng, rows, S):
    """Weights as the fast path has them: in [0, 1], a 1 per row, zeros, and tiny values
    down to float64 subnormals (far below float32's smallest)."""
    W = rng.random((rows, S))
    W[:, 0] = 1.0
    W[:, 1] = 0.0
    W[:, 2:6] = np.ldexp(rng.random((rows, 4)) + 0.5, rng.integers(-1074, -120, (rows, 4)))
    return W


@pytest.mark.parametrize("magnitude", [1.0, 2.0 ** -140, 2.0 ** 110])
def test_abs_sums_bound_the_exact_sums_in_float32(magnitude):
    """Float32 |V| (small and subnormal entries too): A ≥ Σ w̃|v| on every entry, and within
    0.1 % of it (γ_S of float32 at S = 70 is 4·10⁻⁶) plus the underflow allowance 2S·2^-126
    (nothing beside a row sum of at least 1)."""
    rng = np.random.default_rng(5)
    S = 70
    V = (rng.standard_normal((S, 3)) * magnitude).astype(np.float32).astype(np.float64)
    V[3, 0] = np.float32(2.0 ** -149)                      # the smallest float32 subnormal
    h = fast._Head(rng.standard_normal((S, 4)), V)
    assert h.absV.dtype == np.float32                     # the float32 product is used
    W = _weights(rng, 4, S)
    A = fast._abs_sums(W, h)
    for row, want in zip(A, exact_abs_sums(W, V)):
        for got, exact in zip(row, want):
            assert Fraction(float(got)) >= exact
            assert float(got) <= float(exact) * 1.001 + 3 * S * 2.0 ** -126


def test_abs_sums_of_values_near_float32_overflow_use_float64():
    """Σ|v| past 2^125 could overflow a float32 partial sum: the float64 product is used, and
    it bounds the exact sums too."""
    rng = np.random.default_rng(6)
    S = 40
    V = rng.standard_normal((S, 2)) * 2.0 ** 124
    h = fast._Head(rng.standard_normal((S, 4)), V)
    assert h.absV.dtype == np.float64
    W = _weights(rng, 3, S)
    A = fast._abs_sums(W, h)
    for row, want in zip(A, exact_abs_sums(W, V)):
        for got, exact in zip(row, want):
            assert Fraction(float(got)) >= exact and float(got) <= float(exact) * (1 + 1e-5)


@pytest.mark.parametrize("scale", [0.125, -0.3, 2.0 ** -1000, 0.0])
def test_score_bounds_hold_against_exact_scores(scale):
    """|D̃ − d| ≤ e_D and |d̃| ≤ D_m per row, with d = q·k exact; a scale so small that
    s̃·d̃ underflows (or 0) falls back to the Cauchy–Schwarz bound instead of dividing by it."""
    rng = np.random.default_rng(7)
    E = 16
    Q = rng.standard_normal((5, E)).astype(np.float32).astype(np.float64)
    K = rng.standard_normal((30, E)).astype(np.float32).astype(np.float64)
    h = fast._Head(K, rng.standard_normal((30, 2)))
    D, e2, cs = fast._split_scores(Q, h)
    P = np.abs(D * scale).max(axis=1)
    eD, Dm = fast._score_bounds(e2, cs, P, scale, E)
    for i in range(Q.shape[0]):
        for j in range(K.shape[0]):
            d = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(Q[i], K[j]))
            assert abs(Fraction(float(D[i, j])) - d) <= Fraction(float(eD[i]))
            assert abs(float(D[i, j])) <= Dm[i]
    if scale == 0.125:                                    # read off the scores: below the cs bound
        assert (Dm < cs / 1.5).all()
        assert (eD < 2 * 2.0 ** -53 * Dm + 1e-20).all()


class Adds:
    """A term's count of additions so far (the deepest of the terms in a sum)."""

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth

    def __add__(self, other: Adds) -> Adds:
        return Adds(max(self.depth, other.depth) + 1)


@pytest.mark.parametrize("nb", [1, 2, 3, 5, 8, 9, 16, 32, 33, 64, 100])
def test_depth_counts_every_addition_of_the_groups_and_the_tree(nb):
    """The grouped sum of nb block products (in turn within a group, then _tree_sum over the
    groups), simulated on addition counters: no term goes through more than _depth(nb)
    additions, and the tree alone over nb parts through no more either."""
    g = fast._group(nb)
    groups = []
    for first in range(0, nb, g):
        acc = Adds()
        for _ in range(first + 1, min(nb, first + g)):
            acc = acc + Adds()
        groups.append(acc)
    parts = np.array(groups, dtype=object)
    assert fast._tree_sum(parts).depth <= fast._depth(nb)
    assert fast._tree_sum(np.array([Adds() for _ in range(nb)], dtype=object)).depth <= fast._depth(nb)
    assert fast._depth(nb) <= max(0, nb - 1)              # never worse than all in turn


def test_tree_sum_adds_every_part_once():
    parts = np.arange(1.0, 12.0)[:, None] * np.ones((11, 3))
    assert fast._tree_sum(parts.copy()).tolist() == [66.0] * 3


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_many_key_blocks_every_entry_against_mpmath(fmt):
    """S = 700: 11 key blocks of 64 in groups of 4 and a tree, the float32 Σ w̃|v| and the
    scores' bound read off the row; every weight and output against mpmath."""
    rng = np.random.default_rng(8)
    Q, K, V = (rng.standard_normal((n, 8)).astype(np.float32) for n in (3, 700, 700))
    Q *= 3
    ref = fr.correctly_rounded(Q, K, V, dtype=fmt)
    assert_matches(ref, Q, K, V, fmt)


@pytest.mark.parametrize("E", [1, 2, 3, 7, 64, 80, 96, 128, 256, 1000, 4096])
def test_default_scale_error_bounds_the_true_error_tightly(E):
    """|fl(1/fl(√E)) − 1/√E| against mpmath at 60 digits: the bound holds, is 0 where √E is a
    power of two, and is below 2u·s̃ (the two roundings' worst case being 3u·s̃)."""
    import math

    import mpmath

    from symattn.floatref.sdpa import _default_scale_error

    s = 1.0 / math.sqrt(E)
    err = _default_scale_error(s, E)
    with mpmath.workdps(60):
        true = abs(mpmath.mpf(s) - 1 / mpmath.sqrt(E))
        assert mpmath.mpf(err) >= true
        assert mpmath.mpf(err) <= true * (1 + mpmath.mpf(2) ** -50) + mpmath.mpf(2) ** -1074
    assert err < 2 * 2.0 ** -53 * s
    assert (err == 0) == (E in (1, 64, 256, 4096))
