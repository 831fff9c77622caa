"""The plain backward's tight tier (floatref/plaintight.py) and the first tier's tight row sums
(plainexp's unrounded exp pair, plainfast's Z and D from the split product W·V).

References: mpmath at 60–400 digits from the inputs' exact binary values (Fractions for q·k), and
test_floatref_plainback's 60-digit backward.  The tier is run alone (the first tier deciding
nothing, the later tiers refusing to run), on random problems and on crafted ones whose gradient
entries lie within 2^-40 (relative) of a bfloat16 rounding midpoint, so a ball that missed the
exact value would round them the wrong way."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from test_floatref_plainback import CASES, EXTRAS, _check, _inputs, _mp, rounded, truth

from symattn.floatref import backfast, plainexp, plainfast, plainrest
from symattn.floatref.backward import correctly_rounded_backward

U = 2.0 ** -53


def test_the_exp_pair_encloses_the_exact_value_within_u_over_8():
    rng = np.random.default_rng(1)
    xh = np.concatenate([-rng.random(300) * 30, -rng.random(60) * 790, [0.0, -1e-300, -745.1, -789.9, -800.0],
                         -np.log(2) / 128 * np.arange(1, 9)])
    xl = rng.standard_normal(xh.size) * 2.0 ** -60
    ex = np.full(xh.size, 2.0 ** -62)
    W0, R0 = plainexp.exp_dd(xh[None, :], xl[None, :], ex[None, :], None)
    W, R, lo, R2 = plainexp.exp_dd(xh[None, :], xl[None, :], ex[None, :], None, residual=True)
    np.testing.assert_array_equal(W, W0)                     # the same midpoints as without the pair
    with mpmath.workdps(400):
        for a, b, w, r, wl, r2 in zip(xh, xl, W[0], R[0], lo[0], R2[0]):
            for d in (-2.0 ** -62, 0.0, 2.0 ** -62):
                exact = mpmath.exp(_mp(a) + _mp(b) + _mp(d))
                assert abs(exact - _mp(w) - _mp(wl)) <= _mp(r2), (a, b)
                assert abs(exact - _mp(w)) <= _mp(r), (a, b)
            assert r2 <= U / 8 * w + 2.0 ** -990, (a, r2 / max(w, 1e-300))
            assert r <= 1.2 * U * w + 2.0 ** -990


def test_pairwise_sums_enclose_without_the_last_rounding():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 999)) * np.logspace(-8, 8, 999)
    hi, lo, bound, absum = plainexp.pairwise(A)
    with mpmath.workdps(400):
        for row, h, t, e, a in zip(A, hi, lo, bound, absum):
            assert abs(mpmath.fsum(_mp(x) for x in row) - _mp(h) - _mp(t)) <= _mp(e)
            assert e < 2.0 ** -95 * a and a >= np.abs(row).sum()


def _head(seed, L=6, S=7, E=3, Ev=4, causal=True):
    Q, K, V, dO = (np.asarray(x[0], dtype=np.float64) for x in _inputs(seed, H=1, L=L, S=S, E=E, Ev=Ev))
    V[:, 0] *= 2.0 ** -30                      # columns of V far apart in size (the split's grid per column)
    V[:, 1] *= 2.0 ** 20
    dO[2] = 0.0                                # D = 0 exactly on row 2
    allowed = np.tril(np.ones((L, S), bool)) if causal else None
    return Q, K, V, dO, allowed


@pytest.mark.parametrize("causal", [True, False])
def test_the_tight_row_sums_and_D_enclose_the_exact_values(causal):
    Q, K, V, dO, allowed = _head(7, causal=causal)
    s = float(np.float32(0.61))
    P, RP, live, (c, Z, RZ), tight, _ = plainfast.probabilities(Q, K, allowed, s, 0.0, dO, V)
    Dm, RD, Zh, Zl, RZt, Nh, Nl, RN = tight
    L, S = P.shape
    with mpmath.workdps(60):
        for i in range(L):
            keys = [j for j in range(S) if allowed is None or allowed[i, j]]
            t = {j: _mp(s) * _mp(sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(Q[i], K[j])),
                                     Fraction(0))) for j in keys}
            w = {j: mpmath.exp(t[j] - _mp(c[i])) for j in keys}
            z = mpmath.fsum(w.values())
            num = mpmath.fsum(_mp(dO[i, e]) * mpmath.fsum(w[j] * _mp(V[j, e]) for j in keys) for e in range(V.shape[1]))
            assert abs(z - _mp(Zh[i]) - _mp(Zl[i])) <= _mp(RZt[i]) <= U / 4 * z
            assert abs(z - _mp(Z[i])) <= _mp(RZ[i])
            assert abs(num - _mp(Nh[i]) - _mp(Nl[i])) <= _mp(RN[i])
            assert abs(num / z - _mp(Dm[i])) <= _mp(RD[i])
            scale = mpmath.fsum(w[j] / z * abs(_mp(dO[i, e]) * _mp(V[j, e])) for j in keys for e in range(V.shape[1]))
            assert RD[i] <= 4 * U * scale + 2.0 ** -990
            for j in keys:
                assert abs(w[j] / z - _mp(P[i, j])) <= _mp(RP[i, j]) <= 4 * U * w[j] / z
            W, lo, R2 = plainfast.weights(Q[i:i + 1], K[keys], None, s, 0.0, c[i:i + 1])
            for n, j in enumerate(keys):
                assert abs(w[j] - _mp(W[0, n]) - _mp(lo[0, n])) <= _mp(R2[0, n]) <= U / 8 * w[j]
    assert Dm[2] == 0 and RD[2] < 2.0 ** -900


def _tight_alone(monkeypatch) -> None:
    """The first tier decides nothing; the double-double tier and the engine must find nothing left."""
    monkeypatch.setattr(backfast, "decide", lambda *a, **k: None)
    monkeypatch.setattr(backfast, "_decide", lambda mid, rad, fmt: (np.full(np.shape(mid), np.nan),
                                                                    np.zeros(np.shape(mid), bool)))
    first = plainrest.finish

    def finish(pr, dO, fmt, group, kv_batch, known, zero):
        for name, (_, ok) in known.items():
            assert name == "dP" or ok.all(), f"the tight tier left {name} entries"
        first(pr, dO, fmt, group, kv_batch, known, zero)

    monkeypatch.setattr(plainrest, "finish", finish)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case, L, S, kw", CASES, ids=[c[0] for c in CASES])
def test_the_tight_tier_alone_against_mpmath(monkeypatch, dtype, case, L, S, kw):
    group = 2 if case == "gqa" else 1
    Q, K, V, dO = _inputs(12, H=4 if group > 1 else 2, L=L, S=S, group=group, dtype=dtype)
    allowed = None
    if kw.get("is_causal"):
        off = 0 if kw.get("causal_align", "top_left") == "top_left" else S - L
        allowed = np.broadcast_to(np.tril(np.ones((L, S), bool), k=off), (Q.shape[0], L, S))
    want = rounded(truth(Q, K, V, dO, allowed=allowed, group=group, scale=kw.get("scale")), dtype)
    _tight_alone(monkeypatch)
    ref = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, extras=EXTRAS, **kw)
    _check(ref, want)


def test_entries_next_to_bfloat16_midpoints(monkeypatch):
    """Three keys whose scores differ by s·2^-43 (K = 2^-20·(1, 1, 1 + 2^-23)): P ≈ 1/3 on each
    within 2^-44, and dO = 3m with m = 1 + 2^-8, a bfloat16 midpoint, so dV and the dQ, dK entries
    lie within about 2^-40 of a midpoint (the first two just below, the third just above)."""
    m = 1 + 2.0 ** -8
    Q = np.array([[[1.0, 0.0], [0.5, 0.25]]], np.float32)
    K = np.array([[[2.0 ** -20, 0.0], [2.0 ** -20, 0.0], [2.0 ** -20 * (1 + 2.0 ** -23), 0.0]]], np.float32)
    V = np.array([[[1.0, 0.0], [0.0, 1.0], [0.5, 1.0]]], np.float32)
    dO = np.array([[[3 * m, -3 * m], [0.0, 0.0]]], np.float32)
    want = rounded(truth(Q, K, V, dO), "bfloat16")
    assert want["dV"][0, 0, 0] == 1.0 and want["dV"][0, 2, 0] == 1 + 2.0 ** -7      # below, above m
    for tight in (False, True):
        if tight:
            _tight_alone(monkeypatch)
        ref = correctly_rounded_backward(Q, K, V, dO, dtype="bfloat16", extras=EXTRAS)
        _check(ref, want)
