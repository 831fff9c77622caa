"""The fp8 backward recipe (issue 21, scope 4): cuDNN / Transformer Engine's per-tensor-scaled
fp8 attention backward, its exact gradients correctly rounded, beside the true ones.

The reference written for the tests: the recipe in mpmath at 60 digits (P, dS) and Fractions
(every product after the two fp8 quantisations), rounded here with a round-to-nearest-even of
Fractions written for the test.  A kernel written here in numpy float64 with ml_dtypes' casts
(the recipe as a kernel computes it) is accepted by the gate with ``recipe=``; the same kernel
with P not rescaled, or dS not rescaled, is rejected."""

# ruff: noqa: E741

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

from symattn.floatref.backward import correctly_rounded_backward
from symattn.floatref.errors import FloatRefError
from symattn.floatref.fp8_backward import MAX_RECIPE_PAIRS, FP8BackwardRecipe, fp8_backward_reference
from symattn.numbers.precision import precision
from symattn.testing import AttentionGradsMismatch, assert_attention_grads_close

E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
#: (precision, least normal exponent) of the formats the tests round to
FORMATS = {"float8_e4m3fn": (4, -6), "float8_e5m2": (3, -14), "float32": (24, -126), "bfloat16": (8, -126)}
RECIPE = FP8BackwardRecipe(scale_s=256.0, scale_dp=64.0, descale_q=0.5, descale_do=0.25, scale_dq=2.0,
                           scale_dv=0.5)


def rne(x: Fraction, fmt: str) -> float:
    """Round to nearest, ties to even, of an exact rational into a format (no overflow here)."""
    p, e_min = FORMATS[fmt]
    if x == 0:
        return 0.0
    e = 0
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    while Fraction(2) ** e > abs(x):
        e -= 1
    q = Fraction(2) ** (max(e, e_min) - p + 1)
    return float(round(x / q) * q)          # Fraction.__round__: half to even


def frac(x) -> Fraction:
    """An mpf or float exactly as a Fraction."""
    if isinstance(x, mpmath.mpf):
        sign, man, exp, _ = x._mpf_                 # man_exp drops the sign
        return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)
    return Fraction(float(x))


def recipe_mp(Q, K, V, O, dO, lse, rc, *, allowed=None, additive=None, group=1, out="float32"):
    """The recipe's stored dQ, dK, dV (3-D (heads, ·, ·)), P8 and dS8, in mpmath and Fractions."""
    H, L, E = Q.shape
    S, Ev = K.shape[1], V.shape[2]
    f = lambda x: mpmath.mpf(frac(x).numerator) / frac(x).denominator  # noqa: E731
    c = {k: Fraction(float(getattr(rc, k))) for k in ("scale_s", "scale_dp", "descale_q", "descale_k", "descale_v",
                                                      "descale_o", "descale_do", "scale_dq", "scale_dk", "scale_dv")}
    P8, dS8 = np.zeros((H, L, S)), np.zeros((H, L, S))
    R = {"dQ": np.zeros((H, L, E), dtype=object), "dK": np.zeros((H // group, S, E), dtype=object),
         "dV": np.zeros((H // group, S, Ev), dtype=object)}
    with mpmath.workdps(60):
        s = 1 / mpmath.sqrt(E)
        for h in range(H):
            kv = h // group
            for i in range(L):
                keys = [j for j in range(S) if allowed is None or allowed[h, i, j]]
                t = {j: s * f(c["descale_q"] * c["descale_k"]) * sum(f(Q[h, i, e]) * f(K[kv, j, e]) for e in range(E))
                     for j in keys}
                if additive is not None:
                    t = {j: x + f(additive[h, i, j]) for j, x in t.items()}
                z = mpmath.log(sum(mpmath.exp(x) for x in t.values())) if lse is None else f(lse[h, i])
                D = c["descale_do"] * c["descale_o"] * sum(frac(dO[h, i, e]) * frac(O[h, i, e]) for e in range(Ev))
                for j in keys:
                    P = mpmath.exp(t[j] - z)
                    dP = c["descale_do"] * c["descale_v"] * sum(frac(dO[h, i, e]) * frac(V[kv, j, e]) for e in range(Ev))
                    P8[h, i, j] = rne(frac(f(c["scale_s"]) * P), rc.p_format)
                    dS8[h, i, j] = rne(frac(f(c["scale_dp"]) * P * f(dP - D)), rc.ds_format)
                    for e in range(Ev):
                        R["dV"][kv, j, e] += Fraction(P8[h, i, j]) / c["scale_s"] * c["descale_do"] * frac(dO[h, i, e])
                    for e in range(E):
                        R["dQ"][h, i, e] += Fraction(dS8[h, i, j]) / c["scale_dp"] * c["descale_k"] * frac(K[kv, j, e])
                        R["dK"][kv, j, e] += Fraction(dS8[h, i, j]) / c["scale_dp"] * c["descale_q"] * frac(Q[h, i, e])
        grads = {}
        for name, k in (("dQ", "scale_dq"), ("dK", "scale_dk"), ("dV", "scale_dv")):
            m = R[name] * c[k]
            grads[name] = np.vectorize(lambda x, n=name: rne(Fraction(x) if n == "dV" else frac(s * f(Fraction(x))),
                                                             out))(m).astype(np.float64)
    return grads, P8, dS8


def forward(Q, K, V, rc, allowed=None, group=1):
    """A kernel's saved forward: O in e4m3 and the natural LSE in float32 (numpy float64 inside)."""
    f = [a.astype(np.float64) for a in (Q, K, V)]
    k, v = np.repeat(f[1], group, 0), np.repeat(f[2], group, 0)
    t = np.einsum("hle,hse->hls", f[0], k) * float(rc.descale_q * rc.descale_k) / np.sqrt(Q.shape[-1])
    if allowed is not None:
        t = np.where(allowed, t, -np.inf)
    lse = np.log(np.exp(t).sum(-1))
    O = np.einsum("hls,hsc->hlc", np.exp(t - lse[..., None]), v * rc.descale_v)  # noqa: E741
    return (O / rc.descale_o).astype(E4), lse.astype(np.float32)


def inputs(seed, H=2, L=3, S=4, E=2, Ev=2, heads_kv=None):
    rng = np.random.default_rng(seed)
    hk = heads_kv or H
    return (rng.standard_normal((H, L, E)).astype(E4), rng.standard_normal((hk, S, E)).astype(E4),
            rng.standard_normal((hk, S, Ev)).astype(E4), (4 * rng.standard_normal((H, L, Ev))).astype(E5))


def _check(res, want, P8, dS8):
    np.testing.assert_array_equal(res.P8, P8, err_msg="P8")
    np.testing.assert_array_equal(res.dS8, dS8, err_msg="dS8")
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_array_equal(getattr(res.recipe, name), want[name], err_msg=name)


@pytest.mark.parametrize("given_lse", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_the_recipe_is_correctly_rounded(given_lse, causal):
    Q, K, V, dO = inputs(1 + causal + 2 * given_lse)
    allowed = np.broadcast_to(np.tril(np.ones((3, 4), bool)), (2, 3, 4)) if causal else None
    O, lse = forward(Q, K, V, RECIPE, allowed)
    res = fp8_backward_reference(Q, K, V, dO, out=O, lse=lse if given_lse else None, recipe=RECIPE,
                                 is_causal=causal)
    want, P8, dS8 = recipe_mp(Q, K, V, O, dO, lse if given_lse else None, RECIPE, allowed=allowed)
    _check(res, want, P8, dS8)
    assert res.recipe.dQ.any() and res.recipe.dK.any() and res.recipe.dV.any()
    assert (res.P8 != 0).sum() > 6 and (res.dS8 != 0).sum() > 6


@pytest.mark.parametrize("out", ["float8_e5m2", "bfloat16"])
def test_the_recipe_with_fp8_and_bfloat16_outputs_rational_scale_and_gqa(out):
    Q, K, V, dO = inputs(7, H=4, L=2, S=3, E=4, heads_kv=2)      # E = 4: the scale 1/2 is rational
    O, lse = forward(Q, K, V, RECIPE, group=2)
    res = fp8_backward_reference(Q, K, V, dO, out=O, lse=lse, recipe=RECIPE, dtype=out, enable_gqa=True)
    want, P8, dS8 = recipe_mp(Q, K, V, O, dO, lse, RECIPE, group=2, out=out)
    _check(res, want, P8, dS8)
    assert res.recipe.dK.shape == (2, 3, 4) and res.true.dK.shape == (2, 3, 4)
    # the balls a failure report certifies from hold the exact values the entries round from
    p = FORMATS[out][0]
    for name in ("dQ", "dK", "dV"):
        for at in np.ndindex(*getattr(res.recipe, name).shape):
            y = getattr(res.recipe, name)[at]
            with precision(128):
                man, exp = res.recipe.exact_ball(name, at, 128).mid().man_exp()
            x = Fraction(int(man)) * Fraction(2) ** int(exp)
            assert abs(Fraction(y) - x) <= abs(x) * Fraction(1, 2 ** p), (name, at)


def test_the_true_gradients_beside_the_recipe():
    Q, K, V, dO = inputs(11, L=4, S=4)
    O, lse = forward(Q, K, V, RECIPE)
    res = fp8_backward_reference(Q, K, V, dO, out=O, lse=lse, recipe=RECIPE)
    real = [a.astype(np.float64) * d for a, d in ((Q, 0.5), (K, 1.0), (V, 1.0), (dO, 0.25))]
    true = correctly_rounded_backward(*real, dtype="float32")
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_array_equal(getattr(res.true, name), getattr(true, name))
    # the recipe's stored dV is scale_dv·dV: halved, and near the truth but not on it (P is e4m3)
    rel = np.abs(res.recipe.dV / 0.5 - true.dV).max() / np.abs(true.dV).max()
    assert 1e-4 < rel < 0.1


def test_exact_cases_v_ones_equal_logits_and_p_one():
    rc = FP8BackwardRecipe()
    Q = np.zeros((1, 2, 2), dtype=np.float32)                      # every logit 0: P = 1/3 exactly
    K = np.array([[[1, 0], [0, 1], [1, 1]]], dtype=np.float32)
    V = np.ones((1, 3, 2), dtype=np.float32)
    dO = np.array([[[1, -2], [0.5, 3]]], dtype=np.float32)
    O = np.ones((1, 2, 2), dtype=np.float32)                        # V = 1: O = 1, dP = D, dS = 0
    res = fp8_backward_reference(Q, K, V, dO, out=O, recipe=rc)
    assert (res.P8 == 0.34375).all()                                # RN_e4m3(1/3): 11/32, not 5/16
    assert (res.dS8 == 0).all() and (res.recipe.dQ == 0).all() and (res.recipe.dK == 0).all()
    np.testing.assert_array_equal(res.recipe.dV, np.full((1, 3, 2), 0.34375) * dO.sum(1, keepdims=True))
    # the kernel's lse = t exactly on a row with one key: P = 1, scale_s·1 rounded exactly
    res = fp8_backward_reference(Q, K, V, dO, out=O, lse=np.zeros((1, 2), np.float32),
                                 recipe=FP8BackwardRecipe(scale_s=300.0), is_causal=True)
    # RN_e4m3(300) = 288 (320 is further), on the live keys only
    np.testing.assert_array_equal(res.P8, [[[288, 0, 0], [288, 288, 0]]])


def fp8_kernel(Q, K, V, O, dO, lse, rc, *, causal=False, bug=None):
    """The recipe as a kernel computes it: float64 arithmetic, ml_dtypes' fp8 casts, float32
    outputs.  ``bug``: 'p-not-rescaled' (dV without 1/scale_s), 'ds-not-rescaled'."""
    Q, K, V, O, dO = (a.astype(np.float64) for a in (Q, K, V, O, dO))
    s = 1 / np.sqrt(Q.shape[-1])
    t = s * rc.descale_q * rc.descale_k * Q @ np.swapaxes(K, -1, -2)
    if causal:
        t = np.where(np.tril(np.ones(t.shape[-2:], bool)), t, -np.inf)
    P = np.exp(t - lse.astype(np.float64)[..., None])
    P8 = (rc.scale_s * P).astype(E4).astype(np.float64)
    dV = (1 if bug == "p-not-rescaled" else 1 / rc.scale_s) * rc.descale_do * np.swapaxes(P8, -1, -2) @ dO
    dP = rc.descale_do * rc.descale_v * dO @ np.swapaxes(V, -1, -2)
    D = rc.descale_do * rc.descale_o * (dO * O).sum(-1, keepdims=True)
    dS8 = (rc.scale_dp * P * (dP - D)).astype(E5).astype(np.float64)
    k = s * (1 if bug == "ds-not-rescaled" else 1 / rc.scale_dp)
    dQ, dK = k * rc.descale_k * dS8 @ K, k * rc.descale_q * np.swapaxes(dS8, -1, -2) @ Q
    return [(c * g).astype(np.float32) for c, g in ((rc.scale_dq, dQ), (rc.scale_dk, dK), (rc.scale_dv, dV))]


@pytest.mark.parametrize("causal", [False, True])
def test_the_gate_on_an_fp8_kernel(causal):
    Q, K, V, dO = inputs(5, H=2, L=4, S=4, E=2)
    allowed = np.broadcast_to(np.tril(np.ones((4, 4), bool)), (2, 4, 4)) if causal else None
    O, lse = forward(Q, K, V, RECIPE, allowed)
    given = {"out": O, "lse": lse}
    right = fp8_kernel(Q, K, V, O, dO, lse, RECIPE, causal=causal)
    report = assert_attention_grads_close(*right, Q, K, V, dO, is_causal=causal, given=given, recipe=RECIPE,
                                          ulp_scale="entry", max_ulp=1)
    assert report.fmt == "float32" and max(report.max_ulps.values()) <= 1.5
    # judged against the plain recipe (no fp8) the same right kernel is far off: its error is its algorithm's
    with pytest.raises(AttentionGradsMismatch):
        assert_attention_grads_close(*[g / c for g, c in zip(right, (2.0, 1.0, 0.5))], Q * 0.5, K, V, dO * 0.25,
                                     is_causal=causal, given={"out": O, "lse": lse}, max_ulp=8)
    for bug, name in (("p-not-rescaled", "dV"), ("ds-not-rescaled", "dQ")):
        wrong = fp8_kernel(Q, K, V, O, dO, lse, RECIPE, causal=causal, bug=bug)
        with pytest.raises(AttentionGradsMismatch, match=rf"fp8 recipe cudnn_fp8_per_tensor[\s\S]*- {name}: "):
            assert_attention_grads_close(*wrong, Q, K, V, dO, is_causal=causal, given=given, recipe=RECIPE,
                                         max_ulp=8)


def test_refusals_and_the_budget():
    Q, K, V, dO = inputs(3)
    O, lse = forward(Q, K, V, RECIPE)
    with pytest.raises(FloatRefError, match=r"needs given=\{'out': O\}"):
        RECIPE.reference(Q, K, V, dO, given=None)
    with pytest.raises(FloatRefError, match="scale_s is -1.0: give a finite positive float"):
        FP8BackwardRecipe(scale_s=-1.0)
    with pytest.raises(FloatRefError, match="p_format is 'float8'"):
        FP8BackwardRecipe(p_format="float8")
    with pytest.raises(FloatRefError, match=r"given\['lse'\] has shape \(2, 2\): give \(2, 3\)"):
        fp8_backward_reference(Q, K, V, dO, out=O, lse=lse[:, :2])
    with pytest.raises(FloatRefError, match="overflows its fp8 format"):
        fp8_backward_reference(Q, K, V, dO, out=O, lse=lse, recipe=FP8BackwardRecipe(scale_s=2.0 ** 12))
    with pytest.raises(FloatRefError, match=r"descale × Q is not a float64 exactly"):
        fp8_backward_reference(Q.astype(np.float32) * np.float32(1.1), K, V, dO, out=O, lse=lse,
                               recipe=FP8BackwardRecipe(descale_q=0.1))
    with pytest.raises(FloatRefError, match="Q has dtype <U1"):
        fp8_backward_reference(np.array([["a"]]), K, V, dO, out=O)
    n = int(np.sqrt(MAX_RECIPE_PAIRS)) + 1
    big = np.zeros((1, n, 2), dtype=np.float32)
    with pytest.raises(FloatRefError, match="MAX_RECIPE_PAIRS"):
        fp8_backward_reference(big, big, big, big, out=big)


def test_a_finite_sentinel_mask():
    Q, K, V, dO = inputs(13)
    causal = np.tril(np.ones((3, 4), bool))
    O, lse = forward(Q, K, V, RECIPE, np.broadcast_to(causal, (2, 3, 4)))
    res = fp8_backward_reference(Q, K, V, dO, out=O, lse=lse, recipe=RECIPE, is_causal=True, mask_value=-4.0)
    additive = np.broadcast_to(np.where(causal, 0.0, -4.0), (2, 3, 4))
    want, P8, dS8 = recipe_mp(Q, K, V, O, dO, lse, RECIPE, additive=additive)
    _check(res, want, P8, dS8)
    assert (res.P8[:, ~causal] != 0).any()          # the blocked keys weigh e^-4: not removed


def test_torch_fp8_tensors():
    """torch's fp8 tensors read as their values (optional: skipped where torch is absent)."""
    torch = pytest.importorskip("torch")
    Q, K, V, dO = inputs(5, H=2, L=4, S=4, E=2)
    O, lse = forward(Q, K, V, RECIPE)
    T = lambda a, dt: torch.from_numpy(a.astype(np.float32)).to(dt)  # noqa: E731
    tq, tk, tv, to = (T(a, torch.float8_e4m3fn) for a in (Q, K, V, O))
    tdo = T(dO, torch.float8_e5m2)
    mine = fp8_backward_reference(tq, tk, tv, tdo, out=to, lse=torch.from_numpy(lse), recipe=RECIPE)
    want = fp8_backward_reference(Q, K, V, dO, out=O, lse=lse, recipe=RECIPE)
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_array_equal(getattr(mine.recipe, name), getattr(want.recipe, name))
    right = [torch.from_numpy(g) for g in fp8_kernel(Q, K, V, O, dO, lse, RECIPE)]
    assert_attention_grads_close(*right, tq, tk, tv, tdo, given={"out": to, "lse": torch.from_numpy(lse)},
                                 recipe=RECIPE, max_ulp=1)
