"""The multi-head backward pass: through W_o, each head, and the sums over shared inputs.

Reference: complex-step derivatives of a numpy complex128 forward written here (accurate to
about 1e-15 on this mild problem), compared with symattn's certified decimals."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from symattn.errors import ProblemError
from symattn.heads.heads import MultiHeadProblem, attend_heads

X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_q = [[1, 0, 0, 1], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 1, 1]]
W_k = [[0, 1], [1, 1], [1, 0], [0, 1]]
W_v = [[1, 0], [0, 1], [1, 1], [0, 2]]
W_o = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
dY = [[1, 0, -1], [0, 2, 0], [1, 1, 1]]


def _forward(X, W_q, W_k, W_v, W_o):
    """Two query heads of width 2 sharing one key/value head (multi-query)."""
    K, V = X @ W_k, X @ W_v
    outs = []
    for h in range(2):
        Q = X @ W_q[:, 2 * h:2 * h + 2]
        S = Q @ K.T / np.sqrt(2)
        P = np.exp(S)
        P = P / P.sum(axis=1, keepdims=True)
        outs.append(P @ V)
    return np.hstack(outs) @ W_o


def _complex_step(name):
    arrays = {k: np.array(v, dtype=complex) for k, v in dict(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o).items()}
    G = np.array(dY, dtype=float)
    grad = np.zeros(arrays[name].shape)
    for idx in np.ndindex(*arrays[name].shape):
        bumped = {k: v.copy() for k, v in arrays.items()}
        bumped[name][idx] += 1e-30j
        grad[idx] = (G * _forward(**bumped)).sum().imag / 1e-30
    return grad


@pytest.fixture(scope="module")
def result():
    problem = MultiHeadProblem.split(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o, heads=2, kv_heads=1,
                                     backward={"grad_output": dY})
    return attend_heads(problem)


def _values(decimals):
    return np.array([[float(d.text) for d in row] for row in decimals])


def test_gradients_through_W_o_and_the_heads(result):
    g = result.gradients
    np.testing.assert_allclose(_values(g.decimals(g.d_W_o(), 15)), _complex_step("W_o"), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_values(g.decimals(g.d_X(), 15)), _complex_step("X"), rtol=1e-12, atol=1e-13)
    dW_q = np.hstack([_values(result.head(h).step("d_W_q").decimals(15)) for h in range(2)])
    np.testing.assert_allclose(dW_q, _complex_step("W_q"), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_values(g.decimals(g.kv_gradient("d_W_k", 0), 15)), _complex_step("W_k"),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_values(g.decimals(g.kv_gradient("d_W_v", 0), 15)), _complex_step("W_v"),
                               rtol=1e-12, atol=1e-13)


def test_each_head_gets_its_columns_of_dY_W_o_transposed(result):
    d_concat = np.array(dY) @ np.array(W_o).T
    for h in range(2):
        got = _values(result.head(h).step("d_output").decimals(6))
        np.testing.assert_array_equal(got, d_concat[:, 2 * h:2 * h + 2])


def test_a_multi_head_backward_key_of_the_wrong_shape():
    with pytest.raises(ProblemError, match=r"backward grad_output is 3×2 but the multi-head output is 3×3"):
        MultiHeadProblem.split(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o, heads=2, kv_heads=1,
                               backward={"grad_output": [[1, 0]] * 3})
    with pytest.raises(ProblemError, match="takes grad_output"):
        MultiHeadProblem.split(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o, heads=2, kv_heads=1,
                               backward={"loss": "half-squared-error", "target": dY})


def _mp_forward(A):
    """The same two-head multi-query forward in mpmath complex arithmetic (for complex steps)."""
    def mul(P, R):
        return [[mpmath.fsum(P[i][t] * R[t][j] for t in range(len(R))) for j in range(len(R[0]))]
                for i in range(len(P))]
    K, V = mul(A["X"], A["W_k"]), mul(A["X"], A["W_v"])
    concat = [[] for _ in X]
    for h in range(2):
        Q = mul(A["X"], [row[2 * h:2 * h + 2] for row in A["W_q"]])
        for i, q in enumerate(Q):
            e = [mpmath.exp((q[0] * k[0] + q[1] * k[1]) / mpmath.sqrt(2)) for k in K]
            total = mpmath.fsum(e)
            concat[i] += [mpmath.fsum(e[j] * V[j][c] for j in range(len(K))) / total for c in range(2)]
    return mul(concat, A["W_o"])


def _mp_complex_step(name, dps):
    """dL/d(name) with L = Σ dY ∘ Y, by complex steps of size 10^-(2·dps) at dps digits."""
    with mpmath.workdps(dps):
        h = mpmath.mpf(10) ** (-2 * dps)
        base = {k: [[mpmath.mpc(x) for x in row] for row in v]
                for k, v in dict(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o).items()}
        grad = []
        for i, row in enumerate(base[name]):
            grad.append([])
            for j in range(len(row)):
                bumped = {k: [list(r) for r in v] for k, v in base.items()}
                bumped[name][i][j] += mpmath.mpc(0, h)
                Y = _mp_forward(bumped)
                grad[-1].append(mpmath.fsum(dY[a][b] * Y[a][b] for a in range(3) for b in range(3)).imag / h)
        return grad


@pytest.mark.parametrize("digits", [3, 30, 1000])
def test_multi_head_gradients_against_a_high_precision_reference(result, digits):
    """Every gradient of the multi-head problem to 3, 30 and 1000 certified digits, against
    complex-step derivatives of an mpmath forward written here at digits + 30."""
    g = result.gradients
    got = {"W_o": g.d_W_o(), "X": g.d_X(), "W_k": g.kv_gradient("d_W_k", 0),
           "W_v": g.kv_gradient("d_W_v", 0)}
    decimals = {k: g.decimals(M, digits) for k, M in got.items()}
    decimals["W_q"] = [a + b for a, b in zip(*(result.head(h).step("d_W_q").decimals(digits) for h in range(2)))]
    with mpmath.workdps(digits + 30):
        for name, rows in decimals.items():
            want = _mp_complex_step(name, digits + 30)
            for i, row in enumerate(rows):
                for j, d in enumerate(row):
                    w = want[i][j]
                    value = mpmath.mpf(d.mantissa) * mpmath.mpf(10) ** d.exponent
                    if abs(w) < mpmath.mpf(10) ** (-digits - 20):
                        assert value == 0, (name, i, j, d.text)
                        continue
                    ulp = mpmath.mpf(10) ** (mpmath.floor(mpmath.log10(abs(w))) - digits + 1)
                    assert abs(value - w) <= mpmath.mpf("0.51") * ulp, (name, i, j, d.text)
