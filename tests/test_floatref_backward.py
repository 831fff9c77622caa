"""Correctly rounded gradients of float attention (issue 21's backward reference, built on 20).

Reference: complex-step derivatives of an mpmath forward at 60 digits (tests/backward_reference.py,
written for the tests) from the inputs' exact binary values, rounded to the format by mpmath at
the format's precision (round to nearest, ties to even)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.floatref.backward import correctly_rounded_backward
from symattn.floatref.errors import FloatRefError

from backward_reference import Ref, gradients


def _round(x, bits):
    with mpmath.workprec(bits):
        return float(+x)


@pytest.mark.parametrize("dtype, bits, causal", [("float32", 24, False), ("float32", 24, True),
                                                  ("float64", 53, False)])
def test_gradients_are_correctly_rounded(dtype, bits, causal):
    rng = np.random.default_rng(7)
    np_type = np.float32 if dtype == "float32" else np.float64
    Q, K, V, dO = (rng.standard_normal((4, 3)).astype(np_type) for _ in range(4))
    ref = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, is_causal=causal)
    exact = lambda A: [[Fraction(float(x)) for x in row] for row in A]  # noqa: E731
    truth = gradients(Ref(Q=exact(Q), K=exact(K), V=exact(V), grad_output=exact(dO),
                          mask=[[j <= i for j in range(4)] for i in range(4)] if causal else None), dps=60)
    with mpmath.workdps(60):
        for mine, name in ((ref.dQ, "d_Q"), (ref.dK, "d_K"), (ref.dV, "d_V")):
            want = np.array([[_round(x, bits) if abs(x) > mpmath.mpf(10) ** -100 else 0.0 for x in row]
                             for row in truth[name]])
            np.testing.assert_array_equal(mine, want, err_msg=name)
        want_lse = np.array([_round(row[0], bits) for row in truth["lse"]])
    np.testing.assert_array_equal(ref.lse, want_lse)
    if causal:
        assert ref.dK[-1].tolist() != [0.0, 0.0, 0.0] and ref.dQ[0].tolist() == [0.0, 0.0, 0.0]


def test_batched_inputs_and_bad_shapes():
    rng = np.random.default_rng(1)
    Q, K, V, dO = (rng.standard_normal((2, 3, 2)).astype(np.float32) for _ in range(4))
    ref = correctly_rounded_backward(Q, K, V, dO, dtype="bfloat16")
    assert ref.dQ.shape == (2, 3, 2) and ref.lse.shape == (2, 3)
    one = correctly_rounded_backward(Q[1], K[1], V[1], dO[1], dtype="bfloat16")
    np.testing.assert_array_equal(ref.dV[1], one.dV)
    with pytest.raises(FloatRefError, match="dO has shape"):
        correctly_rounded_backward(Q, K, V, dO[0], dtype="float32")
    with pytest.raises(FloatRefError, match="dtype is 'float8'"):
        correctly_rounded_backward(Q, K, V, dO, dtype="float8")
