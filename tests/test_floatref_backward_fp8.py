"""fp8 gradients (issue 21, scope 4): correctly rounded dQ, dK, dV in float8_e4m3fn and float8_e5m2
(ml_dtypes' formats), from fp8 inputs, plain and given the kernel's saved O and LSE, and the gate
on an fp8 kernel.

References written for the tests: complex-step derivatives of an mpmath forward
(tests/backward_reference.py) and the recipe in mpmath (tests/test_floatref_conditional.py), at
60 digits, rounded here to the fp8 format (precision p, subnormals below 2^e_min)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

from symattn.floatref.backward import correctly_rounded_backward
from symattn.testing import AttentionGradsMismatch, assert_attention_grads_close

from backward_reference import Ref, gradients
from test_floatref_conditional import _round, recipe
from test_testing_grads import backward

FP8 = {"float8_e4m3fn": (ml_dtypes.float8_e4m3fn, 4, -6), "float8_e5m2": (ml_dtypes.float8_e5m2, 3, -14)}


def _inputs(dtype, seed, shape=(3, 2)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(FP8[dtype][0]) for _ in range(4)]


def _fp8(x, dtype):
    _, p, e_min = FP8[dtype]
    return 0.0 if abs(x) < mpmath.mpf(10) ** -100 else _round(x, p, e_min)


@pytest.mark.parametrize("dtype", list(FP8))
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_gradients_are_correctly_rounded(dtype, causal):
    Q, K, V, dO = _inputs(dtype, 3 + causal)
    g = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, is_causal=causal)
    exact = lambda A: [[Fraction(float(x)) for x in row] for row in A.astype(np.float32)]  # noqa: E731
    truth = gradients(Ref(Q=exact(Q), K=exact(K), V=exact(V), grad_output=exact(dO),
                          mask=[[j <= i for j in range(3)] for i in range(3)] if causal else None), dps=60)
    with mpmath.workdps(60):
        for mine, name in ((g.dQ, "d_Q"), (g.dK, "d_K"), (g.dV, "d_V")):
            want = np.array([[_fp8(x, dtype) for x in row] for row in truth[name]])
            np.testing.assert_array_equal(mine, want, err_msg=name)
    assert g.dQ.any() and g.dV.any()


@pytest.mark.parametrize("dtype", list(FP8))
def test_fp8_conditional_gradients(dtype):
    Q, K, V, dO = (a[None] for a in _inputs(dtype, 9))
    f32 = [a.astype(np.float32).astype(np.float64) for a in (Q, K, V)]
    t = f32[0] @ np.swapaxes(f32[1], -1, -2) / np.sqrt(2)
    lse = np.log(np.exp(t).sum(-1)).astype(np.float32)
    O = (np.exp(t - lse[..., None]) @ f32[2]).astype(FP8[dtype][0])  # noqa: E741
    g = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, given={"out": O, "lse": lse})
    as64 = [a.astype(np.float32).astype(np.float64) for a in (Q, K, V, dO, O)]
    dQ, dK, dV = recipe(*as64, lse)
    with mpmath.workdps(60):
        for mine, want, name in ((g.dQ, dQ, "dQ"), (g.dK, dK, "dK"), (g.dV, dV, "dV")):
            np.testing.assert_array_equal(mine, np.array([[[_fp8(x, dtype) for x in row] for row in m]
                                                          for m in want]), err_msg=name)


def test_the_gate_on_an_fp8_kernel():
    dtype = "float8_e5m2"
    Q, K, V, dO = (a[None].astype(np.float32).astype(np.float64) for a in _inputs(dtype, 5, (4, 3)))
    right = [a.astype(ml_dtypes.float8_e5m2) for a in backward(Q, K, V, dO)]
    report = assert_attention_grads_close(*right, Q, K, V, dO, ulp_scale="entry", max_ulp=1)
    assert report.fmt == dtype
    wrong = [a.astype(ml_dtypes.float8_e5m2) for a in backward(Q, K, V, dO, bug="no-scale")]
    with pytest.raises(AttentionGradsMismatch, match=r"float8_e5m2.*\n- dQ: "):
        assert_attention_grads_close(*wrong, Q, K, V, dO, max_ulp=1)
