"""The plain backward reference's fast path (issue 21: floatref/plainfast.py, plainrest.py,
plainref.py) and dS, dP, D on request.

Reference: the backward written here from its definition in mpmath at 60 digits, from the inputs'
exact binary values, the scores q·k and dP = dO·Vᵀ summed exactly as Fractions:
t = s·q·k (causal keys absent), lse = log Σ e^t, P = e^(t − lse), O = P·V, D = rowsum(dO∘O),
dS = P∘(dP − D), dQ = s·dS·K, dK = s·dSᵀ·Q, dV = Pᵀ·dO (GQA: dK, dV summed over a kv head's
query heads); a row with no key contributes nothing (dQ = dS = D = 0).  Rounded to the format by
mpmath with its exponent range (round to nearest, ties to even)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

from symattn.floatref import plainexp, plainfast, plainref, plainrest
from symattn.floatref.backward import correctly_rounded_backward
from symattn.floatref.errors import FloatRefError

FORMATS = {"float32": (np.float32, 24, -126), "float16": (np.float16, 11, -14),
           "bfloat16": (ml_dtypes.bfloat16, 8, -126)}
EXTRAS = ("dS", "dP", "D")


def _round(x, p: int, e_min: int) -> float:
    if x == 0:
        return 0.0
    e = int(mpmath.floor(mpmath.log(abs(x), 2)))
    q = max(e, e_min) - p + 1
    return float(mpmath.nint(x / mpmath.mpf(2) ** q) * mpmath.mpf(2) ** q)


def _mp(x) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def truth(Q, K, V, dO, *, allowed=None, group=1, scale=None):
    """{dQ, dK, dV, dS, dP, D, lse} in mpmath (3-D (heads, L, ·); K, V (heads / group, S, ·))."""
    H, L, E = Q.shape
    S, Ev = K.shape[1], V.shape[2]
    fr = lambda A: [[[Fraction(float(x)) for x in row] for row in m] for m in A]  # noqa: E731
    q, k, v, do = fr(Q), fr(K), fr(V), fr(dO)
    out: dict = {"dQ": np.empty((H, L, E), object), "dS": np.empty((H, L, S), object),
                 "dP": np.empty((H, L, S), object), "D": np.empty((H, L), object), "lse": np.empty((H, L), object),
                 "dK": np.zeros((H // group, S, E), object), "dV": np.zeros((H // group, S, Ev), object)}
    with mpmath.workdps(60):
        s = 1 / mpmath.sqrt(E) if scale is None else _mp(scale)
        for n in ("dK", "dV"):
            out[n][...] = mpmath.mpf(0)
        for h in range(H):
            kv = h // group
            for i in range(L):
                keys = [j for j in range(S) if allowed is None or allowed[h, i, j]]
                dP = [sum((do[h][i][c] * v[kv][j][c] for c in range(Ev)), Fraction(0)) for j in range(S)]
                out["dP"][h, i] = [_mp(x) for x in dP]
                out["dS"][h, i] = mpmath.mpf(0)
                out["dQ"][h, i] = mpmath.mpf(0)
                out["D"][h, i] = mpmath.mpf(0)
                out["lse"][h, i] = -mpmath.inf
                if not keys:
                    continue
                t = {j: s * _mp(sum((q[h][i][e] * k[kv][j][e] for e in range(E)), Fraction(0))) for j in keys}
                lse = mpmath.log(mpmath.fsum(mpmath.exp(x) for x in t.values()))
                P = {j: mpmath.exp(t[j] - lse) for j in keys}
                O = [mpmath.fsum(P[j] * _mp(v[kv][j][c]) for j in keys) for c in range(Ev)]  # noqa: E741
                D = mpmath.fsum(_mp(do[h][i][c]) * O[c] for c in range(Ev))
                out["lse"][h, i], out["D"][h, i] = lse, D
                for j in keys:
                    dS = P[j] * (_mp(dP[j]) - D)
                    out["dS"][h, i, j] = dS
                    for e in range(E):
                        out["dQ"][h, i, e] += s * dS * _mp(k[kv][j][e])
                        out["dK"][kv, j, e] += s * dS * _mp(q[h][i][e])
                    for c in range(Ev):
                        out["dV"][kv, j, c] += P[j] * _mp(do[h][i][c])
    return out


def rounded(t: dict, dtype: str) -> dict:
    _, p, e_min = FORMATS[dtype]
    with mpmath.workdps(60):
        return {n: np.vectorize(lambda x: -np.inf if x == -mpmath.inf else _round(x, p, e_min), otypes=[float])(a)
                for n, a in t.items()}


def _inputs(seed, H=2, L=5, S=6, E=3, Ev=4, group=1, dtype="float32"):
    rng = np.random.default_rng(seed)
    typ = FORMATS[dtype][0]
    Q = rng.standard_normal((H, L, E)).astype(typ)
    K = rng.standard_normal((H // group, S, E)).astype(typ)
    V = rng.standard_normal((H // group, S, Ev)).astype(typ)
    dO = rng.standard_normal((H, L, Ev)).astype(typ)
    return Q, K, V, dO


def _check(ref, want, names=("dQ", "dK", "dV") + EXTRAS + ("lse",)):
    for n in names:
        np.testing.assert_array_equal(np.asarray(getattr(ref, n), dtype=float), want[n], err_msg=n)


CASES = [("plain", 5, 6, {}), ("top_left", 5, 5, dict(is_causal=True)),
         ("top_left_long", 5, 7, dict(is_causal=True)),
         ("bottom_right", 4, 7, dict(is_causal=True, causal_align="bottom_right")),
         ("bottom_right_rows", 6, 4, dict(is_causal=True, causal_align="bottom_right")),
         ("gqa", 5, 6, dict(enable_gqa=True)), ("scale", 5, 6, dict(scale=0.3))]


@pytest.mark.parametrize("dtype", list(FORMATS))
@pytest.mark.parametrize("case, L, S, kw", CASES, ids=[c[0] for c in CASES])
def test_every_entry_against_mpmath(dtype, case, L, S, kw):
    group = 2 if case == "gqa" else 1
    Q, K, V, dO = _inputs(11, H=4 if group > 1 else 2, L=L, S=S, group=group, dtype=dtype)
    allowed = None
    if kw.get("is_causal"):
        off = 0 if kw.get("causal_align", "top_left") == "top_left" else S - L
        allowed = np.broadcast_to(np.tril(np.ones((L, S), bool), k=off), (Q.shape[0], L, S))
    ref = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, extras=EXTRAS, **kw)
    want = rounded(truth(Q, K, V, dO, allowed=allowed, group=group, scale=kw.get("scale")), dtype)
    _check(ref, want)
    if case == "bottom_right_rows":                 # the first L − S queries see no key: zeros
        assert not ref.dQ[:, :2].any() and not ref.D[:, :2].any() and ref.dQ[:, 2:].any()


def _forced(monkeypatch, tier: int) -> None:
    """Leave every entry to the double-double tier (2) or to the engine (3)."""
    first = plainfast.decide_plain

    def undecided(*args, **kwargs):
        got = first(*args, **kwargs)
        for _, ok in got[0].values():
            ok[...] = False
        return got

    monkeypatch.setattr(plainfast, "decide_plain", undecided)
    if tier == 3:
        monkeypatch.setattr(plainrest, "finish", lambda *a, **k: None)


@pytest.mark.parametrize("tier", [2, 3])
@pytest.mark.parametrize("case", ["gqa", "bottom_right_rows", "ones"])
def test_the_later_tiers_alone_give_the_same_entries(monkeypatch, tier, case):
    group = 2 if case == "gqa" else 1
    L, S = (6, 4) if case == "bottom_right_rows" else (4, 5)
    Q, K, V, dO = _inputs(5, H=4 if group > 1 else 2, L=L, S=S, group=group)
    kw: dict = dict(enable_gqa=True) if group > 1 else {}
    allowed = None
    if case == "bottom_right_rows":
        kw = dict(is_causal=True, causal_align="bottom_right")
        allowed = np.broadcast_to(np.tril(np.ones((L, S), bool), k=S - L), (2, L, S))
    if case == "ones":
        V[:] = 1
    want = rounded(truth(Q, K, V, dO, allowed=allowed, group=group), "float32")
    _forced(monkeypatch, tier)
    ref = correctly_rounded_backward(Q, K, V, dO, dtype="float32", extras=EXTRAS, **kw)
    _check(ref, want)


def test_crafted_exact_values():
    """V = ones: dP is constant on every row, so dS, dQ, dK are exactly 0 and D = Σ_c dO_ic
    exactly (proved with integers, rounded from the rational); a causal first row; a tied row."""
    Q, K, V, dO = _inputs(3, L=6, S=6)
    V[:] = 1
    ref = correctly_rounded_backward(Q, K, V, dO, dtype="float16", is_causal=True, extras=EXTRAS)
    assert not ref.dQ.any() and not ref.dK.any() and not ref.dS.any()
    D = [[float(np.float16(sum(Fraction(float(x)) for x in row))) for row in m] for m in dO]
    np.testing.assert_array_equal(ref.D, D)
    Q, K, V, dO = _inputs(4, L=5, S=5)
    Q[:, 2] = 0                                      # row 2 ties every key: P = 1/5 exactly
    ref = correctly_rounded_backward(Q, K, V, dO, dtype="float32", is_causal=True, extras=EXTRAS)
    want = rounded(truth(Q, K, V, dO, allowed=np.broadcast_to(np.tril(np.ones((5, 5), bool)), (2, 5, 5))),
                   "float32")
    _check(ref, want)
    assert not ref.dQ[:, 0].any()


def test_fast_path_equals_the_engine_path():
    Q, K, V, dO = _inputs(8, H=2, L=5, S=6, E=4, Ev=3)
    for kw in ({}, dict(is_causal=True, causal_align="bottom_right")):
        a = correctly_rounded_backward(Q, K, V, dO, dtype="bfloat16", extras=EXTRAS, **kw)
        b = correctly_rounded_backward(Q, K, V, dO, dtype="bfloat16", extras=EXTRAS, fast_path=False, **kw)
        for n in ("dQ", "dK", "dV", "lse") + EXTRAS:
            np.testing.assert_array_equal(getattr(a, n), getattr(b, n), err_msg=n)
        at = (1, 2, 1)
        with mpmath.workprec(128):
            assert abs(float(a.exact_ball("dK", at, 128).mid()) - float(b.exact_ball("dK", at, 128).mid())) < 1e-15
    assert a.dS is not None and correctly_rounded_backward(Q, K, V, dO).dS is None


def test_requests_and_budgets(monkeypatch):
    Q, K, V, dO = _inputs(2)
    with pytest.raises(FloatRefError, match="extras has 'dX'"):
        correctly_rounded_backward(Q, K, V, dO, extras=("dX",))
    with pytest.raises(FloatRefError, match="drop given= or extras"):
        correctly_rounded_backward(Q, K, V, dO, extras="dS", given={"out": dO, "lse": dO[..., 0]})
    _forced(monkeypatch, 2)
    monkeypatch.setattr(plainref, "MAX_LEFT", 10)
    with pytest.raises(FloatRefError, match="MAX_LEFT"):
        correctly_rounded_backward(Q, K, V, dO)
    monkeypatch.setattr(plainref, "MAX_LEFT", 1 << 15)
    monkeypatch.setattr(plainrest, "finish", lambda *a, **k: None)
    monkeypatch.setattr(plainref, "MAX_TRACE_PAIRS", 4)
    with pytest.raises(FloatRefError, match="MAX_TRACE_PAIRS"):
        correctly_rounded_backward(Q, K, V, dO)


def test_the_exp_and_the_row_sums_enclose_the_exact_values():
    rng = np.random.default_rng(0)
    xh = np.concatenate([-rng.random(200) * 30, -rng.random(50) * 790, [0.0, -1e-300, -745.1, -789.9, -800.0]])
    xl = rng.standard_normal(xh.size) * 2.0 ** -60
    ex = np.full(xh.size, 2.0 ** -58)
    W, R = plainexp.exp_dd(xh[None, :], xl[None, :], ex[None, :], None)
    with mpmath.workdps(400):
        for a, b, w, r in zip(xh, xl, W[0], R[0]):
            for d in (-2.0 ** -58, 0.0, 2.0 ** -58):
                exact = mpmath.exp(_mp(a) + _mp(b) + _mp(d))
                assert abs(exact - _mp(w)) <= _mp(r), (a, b)
            assert r <= 4 * 2.0 ** -53 * w + 2.0 ** -990   # the absolute terms: 2^-1069 and TINY = 2^-1000
        A = rng.standard_normal((3, 1000)) * np.logspace(-8, 8, 1000)
        total, bound = plainexp.row_sum(A)
        for row, t, e in zip(A, total, bound):
            assert abs(mpmath.fsum(_mp(x) for x in row) - _mp(t)) <= _mp(e)
            assert e < 2.0 ** -50 * np.abs(row).sum()
