"""The multi-head backward pass: through W_o, each head, and the sums over shared inputs.

Reference: complex-step derivatives of a numpy complex128 forward written here (accurate to
about 1e-15 on this mild problem), compared with symattn's certified decimals."""

from __future__ import annotations

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
