"""Each KV-cache decode step is a Problem of its own through the one engine (issue 19).

The decode step t is q_t over the cached keys, with ALiBi by absolute positions; its weights
and output must equal row t of full causal attention (computed here in float64 numpy, written
for the test), also with a symmetric ALiBi bias (where slots and positions differ) and a
rolling window."""

from __future__ import annotations

import numpy as np
import pytest

import symattn as sa
from symattn.errors import ProblemError
from symattn.problem.problem import Problem

X = [[1, 0, 1], [0, 2, 1], [1, 1, 0], [2, 0, 1], [0, 1, 2]]
W = [[1, 0], [0, 1], [1, 1]]


def _reference_row(t, slope, symmetric, window):
    Xa, Wa = np.array(X, float), np.array(W, float)
    q, K, V = Xa[t] @ Wa, Xa @ Wa, Xa @ Wa
    keys = [j for j in range(t + 1) if window is None or t - j < window]
    z = np.array([q @ K[j] / np.sqrt(2) - slope * (abs(t - j) if symmetric else t - j) for j in keys])
    w = np.exp(z - z.max())
    w /= w.sum()
    return w, w @ V[keys]


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("window", [None, 2])
def test_decode_steps_through_the_engine_equal_the_full_rows(symmetric, window):
    mask = None if window is None else {"window": window}
    trace = sa.attend(Problem(X=X, W_q=W, W_k=W, W_v=W, decode={"prefill": 2}, mask=mask,
                              alibi={"slope": "1/2", "symmetric": symmetric}))
    for t in range(2, 5):
        w, o = _reference_row(t, 0.5, symmetric, window)
        got_w = [float(d.text) for d in trace.step(f"decode_{t}_weights").row_decimals(0, 15)]
        got_o = [float(d.text) for d in trace.step(f"decode_{t}_output").row_decimals(0, 15)]
        np.testing.assert_allclose(got_w, w, rtol=1e-13)
        np.testing.assert_allclose(got_o, o, rtol=1e-13)


def test_alibi_positions_are_checked():
    with pytest.raises(ProblemError, match="alibi positions has 1 entries but there are 2 queries"):
        Problem(Q=[[1], [2]], K=[[1], [0]], V=[[1], [2]], alibi={"slope": 1, "positions": [3]})
    with pytest.raises(ProblemError, match="alibi key_positions is 'x'"):
        Problem(Q=[[1], [2]], K=[[1], [0]], V=[[1], [2]], alibi={"slope": 1, "key_positions": "x"})
    far = Problem(Q=[[1]], K=[[1], [0]], V=[[1], [2]], alibi={"slope": 1, "positions": [7], "key_positions": [5, 6]})
    assert sa.attend(far).step("bias")[0, 0] == -2
