"""Facts that gave a wrong verdict or an error on valid problems (issue 25, item 7's sweep).

* window-is-a-mask with a sink: the window's weights are the wider problem's band weights
  renormalised *with the sink's share* (the sink keeps its part of the row);
* gqa-equals-repeated-heads on Q, K, V given directly embeds them in max(n, m) columns, so
  a 16-token symbolic problem is within MAX_SYMBOLIC_SIDE (it was refused: d_model 32);
* temperature-limits' second opinion (SymPy's limit given the logits' exact signs) agrees
  with the argmax / uniform limits computed here in float64.
"""

from __future__ import annotations

import numpy as np
import sympy

import symattn as sa
from symattn.facts import prove
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

Q = [[1, 0], [0, 1], [1, 1], [2, 0]]
K = [[1, 1], [2, 0], [0, 1], [1, 0]]
V = [[1], [2], [3], [4]]


def _window_with_sink_float(width: int, sink: float) -> tuple[np.ndarray, np.ndarray]:
    """float64: the window's weights, and the causal weights on the band over band + sink share."""
    s = np.array(Q, float) @ np.array(K, float).T / np.sqrt(2)
    n = len(Q)
    window = np.zeros((n, n))
    renorm = np.zeros((n, n))
    for i in range(n):
        band = [j for j in range(n) if i - width < j <= i]
        e = np.exp(np.r_[s[i, band], sink])
        window[i, band] = e[:-1] / e.sum()
        causal = np.exp(np.r_[s[i, : i + 1], sink])
        causal_w = causal / causal.sum()
        share = causal_w[-1]
        renorm[i, band] = causal_w[band] / (causal_w[band].sum() + share)
    return window, renorm


def test_window_is_a_mask_holds_with_a_sink() -> None:
    window, renorm = _window_with_sink_float(2, 0.0)
    assert np.allclose(window, renorm, rtol=1e-13, atol=1e-15)   # the identity the check uses
    p = Problem(Q=Q, K=K, V=V, mask={"window": 2}, sink=0)
    proof = prove("window-is-a-mask", Trace(p))
    assert proof.holds
    assert all("with the sink's share" in line.text and "exactly" in line.text for line in proof.checks)
    # the engine's weights are the float64 ones
    w = Trace(p).weights
    assert np.allclose(np.array([[float(w[i, j]) for j in range(4)] for i in range(4)]), window, rtol=1e-12)


def test_window_is_a_mask_without_a_sink_unchanged() -> None:
    proof = prove("window-is-a-mask", sa.load_example("sliding-window"))
    assert proof.holds and all("sink" not in line.text for line in proof.checks)


def test_gqa_on_a_direct_problem_embeds_in_max_n_m_columns() -> None:
    from symattn.facts.heads_facts import grouped_from
    r2 = sympy.sqrt(2)
    p = Problem(Q=[[1, r2]] * 3, K=[[r2, 0], [1, 1]], V=[[1], [2]])
    mhp = grouped_from(p)
    assert all(h.d_model == 3 for h in mhp.head_problems)     # max(n, m), not n + m = 5
    assert prove("gqa-equals-repeated-heads", p).holds


def test_temperature_limits_match_argmax_and_mean_in_float64() -> None:
    trace = Trace(sa.load_example("softcap"))
    proof = prove("temperature-limits", trace)
    assert proof.holds
    assert trace.logit_step == "capped"
    logits = np.array([[float(5 * np.tanh(float(trace.scaled[i, j]) / 5)) for j in range(3)]
                       for i in range(3)])
    Vf = np.array([[float(x) for x in row] for row in trace.V.matrix.tolist()])
    for i, token in enumerate(trace.problem.tokens):
        top = np.flatnonzero(np.isclose(logits[i], logits[i].max(), rtol=0, atol=1e-12))
        got = proof.data["limits"][token]
        hot = [float(sympy.Rational(x)) for x in got["weights_hot"]]
        assert np.allclose(hot, [1 / len(top) if j in top else 0 for j in range(3)])
        assert np.allclose([float(sympy.sympify(x)) for x in got["output_cold"]], Vf.mean(axis=0))
