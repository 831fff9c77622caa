"""The conditional backward reference (issue 21): the exact gradient of FlashAttention's backward
recipe *given* a kernel's own saved O and LSE, correctly rounded, and the rows' conditioning.

Reference: the recipe written here from its definition (P = e^(s·q·k + m − lse), D = rowsum(dO∘O),
dS = P∘(dO·Vᵀ − D), dV = Pᵀ·dO, dQ = s·dS·K, dK = s·dSᵀ·Q; GQA heads summed) in mpmath at 60
digits from the inputs' exact binary values, rounded to the format with its exponent range by
mpmath (round to nearest; the values are far from ties at 60 digits)."""

from __future__ import annotations

import zlib
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

from symattn.floatref.backward import correctly_rounded_backward
from symattn.floatref.errors import FloatRefError

from backward_reference import Ref, gradients

FORMATS = {"float64": (np.float64, 53, -1022), "float32": (np.float32, 24, -126),
           "float16": (np.float16, 11, -14), "bfloat16": (ml_dtypes.bfloat16, 8, -126)}


def _round(x, p: int, e_min: int) -> float:
    """RNE of an mpf into a binary format of precision p, subnormals below 2^e_min."""
    if x == 0:
        return 0.0
    e = int(mpmath.floor(mpmath.log(abs(x), 2)))
    q = max(e, e_min) - p + 1
    return float(mpmath.nint(x / mpmath.mpf(2) ** q) * mpmath.mpf(2) ** q)


def recipe(Q, K, V, dO, Ok, lse, *, scale=None, allowed=None, additive=None, group=1):
    """dQ, dK, dV of the recipe in mpmath (3-D (heads, L, ·) arrays; K, V (heads / group, S, ·))."""
    H, L, E = Q.shape
    S, Ev = K.shape[1], V.shape[2]
    f = lambda x: mpmath.mpf(Fraction(float(x)).numerator) / Fraction(float(x)).denominator  # noqa: E731
    with mpmath.workdps(60):
        s = 1 / mpmath.sqrt(E) if scale is None else f(scale)
        dQ = [[[mpmath.mpf(0)] * E for _ in range(L)] for _ in range(H)]
        dK = [[[mpmath.mpf(0)] * E for _ in range(S)] for _ in range(H // group)]
        dV = [[[mpmath.mpf(0)] * Ev for _ in range(S)] for _ in range(H // group)]
        for h in range(H):
            kv = h // group
            for i in range(L):
                D = sum(f(dO[h, i, c]) * f(Ok[h, i, c]) for c in range(Ev))
                for j in range(S):
                    if allowed is not None and not allowed[h, i, j]:
                        continue
                    t = s * sum(f(Q[h, i, e]) * f(K[kv, j, e]) for e in range(E))
                    if additive is not None:
                        t += f(additive[h, i, j])
                    P = mpmath.exp(t - f(lse[h, i]))
                    dP = sum(f(dO[h, i, c]) * f(V[kv, j, c]) for c in range(Ev))
                    dS = P * (dP - D)
                    for c in range(Ev):
                        dV[kv][j][c] += P * f(dO[h, i, c])
                    for e in range(E):
                        dQ[h][i][e] += s * dS * f(K[kv, j, e])
                        dK[kv][j][e] += s * dS * f(Q[h, i, e])
    return dQ, dK, dV


def _rounded(tensor, dtype):
    _, p, e_min = FORMATS[dtype]
    with mpmath.workdps(60):
        return np.array([[[_round(x, p, e_min) for x in row] for row in m] for m in tensor])


def _kernel_forward(Q, K, V, dtype, allowed=None, additive=None, group=1, scale=None):
    """A kernel's saved O (in dtype, nudged a few ulps off) and lse (float32, or float64 for a
    float64 kernel), computed in float64 here: what a backward reads."""
    t = np.einsum("hle,hse->hls", Q.astype(np.float64), np.repeat(K, group, 0).astype(np.float64))
    t *= (1 / np.sqrt(Q.shape[-1])) if scale is None else scale
    if additive is not None:
        t = t + additive
    if allowed is not None:
        t = np.where(allowed, t, -np.inf)
    top = np.max(t, axis=-1, keepdims=True)
    live = np.isfinite(top[..., 0])
    w = np.exp(t - np.where(np.isfinite(top), top, 0))
    z = w.sum(-1)
    lse = np.where(live, np.log(np.where(live, z, 1)) + np.where(live, top[..., 0], 0), np.inf)
    Ok = np.einsum("hls,hsc->hlc", w / np.where(z > 0, z, 1)[..., None], np.repeat(V, group, 0).astype(np.float64))
    np_type = FORMATS[dtype][0]
    Ok = Ok.astype(np_type)
    Ok = np.nextafter(Ok.astype(np.float32) if dtype == "bfloat16" else Ok,
                     np.full(Ok.shape, np.inf, Ok.dtype if dtype != "bfloat16" else np.float32)).astype(np_type)
    lse_type = np.float64 if dtype == "float64" else np.float32
    return Ok, lse.astype(lse_type)


CASES = ["causal_top_left", "causal_bottom_right", "gqa", "sentinel"]


@pytest.mark.parametrize("dtype", list(FORMATS))
@pytest.mark.parametrize("case", CASES)
def test_conditional_gradients_are_correctly_rounded(dtype, case):
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {case}".encode()))
    np_type = FORMATS[dtype][0]
    H, group, L, S, E = 1, 1, 3, 5, 3
    kw: dict = {}
    allowed = additive = None
    if case == "causal_top_left":
        kw = dict(is_causal=True)
        allowed = np.tril(np.ones((L, S), bool))[None]
    elif case == "causal_bottom_right":
        L, S = 5, 3                                    # the first two queries see no key
        kw = dict(is_causal=True, causal_align="bottom_right")
        allowed = np.tril(np.ones((L, S), bool), k=S - L)[None]
    elif case == "gqa":
        H, group, L, S = 4, 2, 3, 3
        kw = dict(enable_gqa=True)
    else:
        mask = rng.random((1, L, S)) < 0.6
        mask[0, 1] = False                             # a row whose keys are all blocked
        kw = dict(attn_mask=mask, mask_value=-5e4)
        additive = np.where(mask, 0.0, -5e4)
    Q = rng.standard_normal((H, L, E)).astype(np_type)
    K = rng.standard_normal((H // group, S, E)).astype(np_type)
    V = rng.standard_normal((H // group, S, 2)).astype(np_type)
    dO = rng.standard_normal((H, L, 2)).astype(np_type)
    full = None if allowed is None else np.broadcast_to(allowed, (H, L, S))
    Ok, lse = _kernel_forward(Q, K, V, dtype, full, additive, group)
    g = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, given={"out": Ok, "lse": lse}, **kw)
    dQ, dK, dV = recipe(Q, K, V, dO, np.nan_to_num(Ok.astype(np.float64)), lse, allowed=full,
                        additive=additive, group=group)
    for mine, want, name in ((g.dQ, dQ, "dQ"), (g.dK, dK, "dK"), (g.dV, dV, "dV")):
        np.testing.assert_array_equal(mine, _rounded(want, dtype), err_msg=name)
    assert g.conditional and g.condition.shape == (H, L) and (g.condition >= 1).all()
    if case == "causal_bottom_right":
        assert (g.dQ[0, :2] == 0).all() and (g.condition[0, :2] == 1).all()   # no keys: nothing cancels


def test_the_kernels_forward_error_is_in_the_conditional_gradient():
    """V = ones: the true dS is 0 (dP = D = Σ dO); with the kernel's O exactly 1 the recipe's dQ, dK
    are exactly 0 too (decided by grouping exponents, not by balls) and every row is infinitely
    ill-conditioned; with O one ulp off they are not 0, and equal the recipe's value."""
    rng = np.random.default_rng(3)
    Q, K, dO = (rng.standard_normal((1, 3, 2)).astype(np.float32) for _ in range(3))
    V = np.ones((1, 3, 2), np.float32)
    Ok, lse = _kernel_forward(Q, K, V, "float32")
    ones = np.ones_like(Ok)
    g = correctly_rounded_backward(Q, K, V, dO, given={"out": ones, "lse": lse})
    assert not g.dQ.any() and not g.dK.any() and np.isinf(g.condition).all()
    bumped = correctly_rounded_backward(Q, K, V, dO, given={"out": Ok, "lse": lse})
    assert bumped.dQ.any()
    dQ, dK, _ = recipe(Q, K, V, dO, Ok, lse)
    np.testing.assert_array_equal(bumped.dQ, _rounded(dQ, "float32"))


def test_a_midpoint_entry_is_rounded_exactly():
    """lse = the score itself makes P = e^0 = 1: dV = dO_0 + dO_1 = 1 + 2^-24, the midpoint of two
    float32s, which rounds to the even 1.0 (no ball decides it; the exact pass does)."""
    Q = np.array([[[1.0], [1.0]]], np.float32)
    K = np.array([[[0.5], [0.25]]], np.float32)
    V = np.array([[[1.0], [2.0]]], np.float32)
    mask = np.array([[[True, False], [True, False]]])
    dO = np.array([[[1.0], [2.0 ** -24]]], np.float32)
    lse = np.array([[0.5, 0.5]], np.float32)                  # scale 1: t_i0 = 0.5
    g = correctly_rounded_backward(Q, K, V, dO, scale=1.0, attn_mask=mask,
                                   given={"out": np.ones((1, 2, 1), np.float32), "lse": lse})
    assert g.dV[0, 0, 0] == 1.0 and g.dV[0, 1, 0] == 0.0
    g64 = correctly_rounded_backward(Q, K, V, dO, dtype="float64", scale=1.0, attn_mask=mask,
                                     given={"out": np.ones((1, 2, 1), np.float32), "lse": lse})
    assert g64.dV[0, 0, 0] == 1.0 + 2.0 ** -24


def test_condition_numbers_against_their_definition():
    rng = np.random.default_rng(5)
    Q, K, V, dO = (rng.standard_normal((1, 4, 3)) for _ in range(4))
    Ok, lse = _kernel_forward(Q, K, V, "float64")
    g = correctly_rounded_backward(Q, K, V, dO, dtype="float64", given={"out": Ok, "lse": lse})
    with mpmath.workdps(40):
        for i in range(4):
            t = [sum(mpmath.mpf(Q[0, i, e]) * mpmath.mpf(K[0, j, e]) for e in range(3)) / mpmath.sqrt(3)
                 for j in range(4)]
            P = [mpmath.exp(x - mpmath.mpf(lse[0, i])) for x in t]
            D = sum(mpmath.mpf(dO[0, i, c]) * mpmath.mpf(Ok[0, i, c]) for c in range(3))
            dP = [sum(mpmath.mpf(dO[0, i, c]) * mpmath.mpf(V[0, j, c]) for c in range(3)) for j in range(4)]
            dPabs = [sum(abs(mpmath.mpf(dO[0, i, c]) * mpmath.mpf(V[0, j, c])) for c in range(3)) for j in range(4)]
            Dabs = sum(abs(mpmath.mpf(dO[0, i, c]) * mpmath.mpf(Ok[0, i, c])) for c in range(3))
            kappa = sum(p * (a + Dabs) for p, a in zip(P, dPabs)) / sum(p * abs(d - D) for p, d in zip(P, dP))
            assert g.condition[0, i] == pytest.approx(float(kappa), rel=1e-12)
    plain = correctly_rounded_backward(Q[0], K[0], V[0], dO[0], dtype="float64")
    assert plain.condition.shape == (4,) and plain.condition == pytest.approx(g.condition[0], rel=1e-6)


def test_bottom_right_without_given_through_the_engine():
    rng = np.random.default_rng(11)
    Q, dO = (rng.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    K, V = (rng.standard_normal((4, 2)).astype(np.float32) for _ in range(2))
    g = correctly_rounded_backward(Q, K, V, dO, is_causal=True, causal_align="bottom_right")
    exact = lambda A: [[Fraction(float(x)) for x in row] for row in A]  # noqa: E731
    truth = gradients(Ref(Q=exact(Q), K=exact(K), V=exact(V), grad_output=exact(dO),
                          mask=[[j <= i + 1 for j in range(4)] for i in range(3)]), dps=60)
    with mpmath.workdps(60):
        want = np.array([[_round(x, 24, -126) for x in row] for row in truth["d_K"]])
    np.testing.assert_array_equal(g.dK, want)
    assert g.dK[3].any()                                  # top-left would leave key 3 unseen


def test_bad_given_arrays_are_refused():
    rng = np.random.default_rng(2)
    Q, K, V, dO = (rng.standard_normal((1, 3, 2)).astype(np.float32) for _ in range(4))
    Ok, lse = _kernel_forward(Q, K, V, "float32")
    with pytest.raises(FloatRefError, match="give {'out': O, 'lse': lse}"):
        correctly_rounded_backward(Q, K, V, dO, given={"out": Ok})
    with pytest.raises(FloatRefError, match=r"given\['lse'\] has shape \(3,\)"):
        correctly_rounded_backward(Q, K, V, dO, given={"out": Ok, "lse": lse[0]})
    nan = Ok.copy()
    nan[0, 1, 0] = np.nan
    with pytest.raises(FloatRefError, match=r"given\['out'\] holds inf or NaN at row \[0, 1\]"):
        correctly_rounded_backward(Q, K, V, dO, given={"out": nan, "lse": lse})
    with pytest.raises(FloatRefError, match="mask_value needs given="):
        correctly_rounded_backward(Q, K, V, dO, mask_value=-5e4)
    with pytest.raises(FloatRefError, match="not broadcast"):
        correctly_rounded_backward(np.repeat(Q, 2, 0), K, V, np.repeat(dO, 2, 0),
                                   given={"out": np.repeat(Ok, 2, 0), "lse": np.repeat(lse, 2, 0)})


def test_round_balls_agrees_with_the_exact_rounding_near_boundaries():
    """The float64 shortcut never decides a ball the exact rounding would not, nor differently:
    balls around float32 and bfloat16 midpoints (exact, ± a few float64 ulps), tiny and subnormal."""
    import flint

    from symattn.floatref.binary import BINARY_FORMATS, round_ball
    from symattn.floatref.conditional import round_balls

    rng = np.random.default_rng(8)
    balls = []
    for x in rng.standard_normal(200).astype(np.float32):
        mid = float(x) + float(np.spacing(x)) / 2                # a float32 midpoint, exactly
        for k in (-3, -1, 0, 1, 3):
            for rad in (0.0, 2.0 ** -60, float(np.spacing(mid))):
                balls.append(flint.arb(float(np.nextafter(mid, np.inf * k)) if k else mid, rad))
    balls += [flint.arb(2.0 ** -1074, 2.0 ** -1074), flint.arb(-(2.0 ** -150), 0), flint.arb(2.0 ** -150)]
    for name in ("float32", "bfloat16"):
        fmt = BINARY_FORMATS[name]
        fast = round_balls(balls, fmt)
        assert sum(y is not None for y in fast) > 100
        assert name != "float32" or any(y is None for y in fast)   # balls on a midpoint stay undecided
        for b, y in zip(balls, fast):
            assert y == round_ball(b, fmt) or (y is None and round_ball(b, fmt) is None), (b, y)
            if y == 0:
                assert str(y) == "0.0"                             # +0, never -0


def test_the_conditional_reference_has_a_budget():
    Q = np.zeros((2, 1024, 1), np.float32)
    K = np.zeros((2, 600, 1), np.float32)
    with pytest.raises(FloatRefError, match=r"1,228,800 \(query, key\) pairs .* over the cap of 1,048,576"):
        correctly_rounded_backward(Q, K, K, Q, given={"out": Q, "lse": Q[..., 0]}, fast_path=False)
    with pytest.raises(FloatRefError, match=r"1,228,800 \(query, key\) pairs .* over the cap of 1,048,576"):
        correctly_rounded_backward(Q, K, K, Q, dtype="float64", given={"out": Q, "lse": Q[..., 0]})
    Q = np.zeros((5, 2048, 1), np.float32)
    with pytest.raises(FloatRefError, match=r"20,971,520 weights, over the cap of 16,777,216"):
        correctly_rounded_backward(Q, Q, Q, Q, given={"out": Q, "lse": Q[..., 0]})


def test_the_arb_work_left_by_the_fast_path_has_a_budget():
    """V = ones with O = 1: every dS is exactly 0 and no float64 enclosure decides dQ or dK: the
    arb balls left (rows of P for dQ, columns for dK and dV) are capped as without the fast path."""
    Q = np.full((1, 1100, 1), 0.5, np.float32)
    V = np.ones((1, 1100, 1), np.float32)
    with pytest.raises(FloatRefError, match=r"arb balls .* over the cap of 1,048,576"):
        correctly_rounded_backward(Q, Q, V, Q, given={"out": V, "lse": Q[..., 0]})


def test_gqa_without_given_sums_the_exact_gradients_of_a_group():
    """4 query heads over 2 kv heads: dK, dV of a kv head are the exact sums over its two query
    heads (each head's gradient from the complex-step mpmath reference, summed at 60 digits)."""
    rng = np.random.default_rng(13)
    Q, dO = (rng.standard_normal((4, 3, 2)).astype(np.float32) for _ in range(2))
    K, V = (rng.standard_normal((2, 3, 2)).astype(np.float32) for _ in range(2))
    g = correctly_rounded_backward(Q, K, V, dO, enable_gqa=True)
    assert g.dQ.shape == (4, 3, 2) and g.dK.shape == (2, 3, 2) and g.scales["dK"].shape == (2, 3, 2)
    exact = lambda A: [[Fraction(float(x)) for x in row] for row in A]  # noqa: E731
    heads = [gradients(Ref(Q=exact(Q[h]), K=exact(K[h // 2]), V=exact(V[h // 2]), grad_output=exact(dO[h])),
                       dps=60) for h in range(4)]
    with mpmath.workdps(60):
        for name, mine in (("d_K", g.dK), ("d_V", g.dV)):
            want = np.array([[[_round(heads[2 * k][name][j][c] + heads[2 * k + 1][name][j][c], 24, -126)
                               for c in range(2)] for j in range(3)] for k in range(2)])
            np.testing.assert_array_equal(mine, want, err_msg=name)
        want = np.array([[[_round(x, 24, -126) for x in row] for row in heads[h]["d_Q"]] for h in range(4)])
        np.testing.assert_array_equal(g.dQ, want)


def test_public_from_floatref():
    from symattn import floatref

    assert floatref.correctly_rounded_backward is correctly_rounded_backward
