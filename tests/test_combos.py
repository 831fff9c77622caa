"""Variants combined (issue 11): online softmax with a sink, ALiBi and a soft-cap; KV-cache
decoding with a sink, a sliding window (Mistral's rolling buffer), ALiBi and a soft-cap; and
the mistakes of ALiBi, soft-capping and sinks.

Cross-checks: independent float64 loops written here (vLLM's online softmax started from the
sink; a rolling-buffer KV cache as a deque of the last W keys), never symattn's own values;
hand-worked numbers at their printed precision.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections import deque

import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.check import Checker
from symattn.cli import main
from symattn.trace.decode import work_counts
from symattn.errors import ProblemError
from symattn.facts.claims import Claims
from symattn.facts.softmax_facts import same

DIGITS = sa.Rounding(digits=12)
E = math.exp


def floats(step) -> np.ndarray:
    return np.array([[-math.inf if d is sa.NEG_INF else float(d.as_fraction()) for d in row]
                     for row in step.decimals(DIGITS)])


def logits64(S: np.ndarray, scale: float, slope: float | None, cap: float | None,
             rows: np.ndarray | None = None) -> np.ndarray:
    """scale·S, minus slope·(i − j) (query i at its row's position), capped by c·tanh(x/c)."""
    n, m = S.shape
    i = np.arange(n)[:, None] if rows is None else rows[:, None]
    x = scale * S
    if slope is not None:
        x = x - slope * (i - np.arange(m)[None, :])
    return x if cap is None else cap * np.tanh(x / cap)


def sink_softmax64(z: np.ndarray, allowed: np.ndarray, sink: float | None) -> np.ndarray:
    """Row-wise e^z / (Σ_allowed e^z + e^sink), masked keys 0."""
    z = np.where(allowed, z, -np.inf)
    top = z.max(axis=1, keepdims=True)
    e = np.exp(z - top)
    total = e.sum(axis=1, keepdims=True)
    if sink is not None:
        total = total + np.exp(sink - top)
    return e / total


def online_from_sink64(x: np.ndarray, V: np.ndarray, blocks, sink: float | None):
    """FlashAttention's loop on one row of logits (−inf where masked), started as vLLM's kernel
    does with a sink: m = sink, l = 1, O = 0 (m = −inf, l = 0 without one)."""
    m, l = (-math.inf, 0.0) if sink is None else (sink, 1.0)
    O = np.zeros(V.shape[1])
    out = {"running_max": [], "rescale": [], "running_sum": [], "running_output": []}
    for b, (start, end) in enumerate(blocks):
        xs = x[start:end]
        m_new = max(m, xs.max())
        alpha = 1.0 if (b == 0 and sink is None) else (0.0 if m == -math.inf else E(m - m_new))
        p = np.where(np.isinf(xs), 0.0, np.exp(xs - (m_new if m_new > -math.inf else 0.0)))
        l, O, m = alpha * l + p.sum(), alpha * O + p @ V[start:end], m_new
        for key, value in (("running_max", m), ("rescale", alpha), ("running_sum", l),
                           ("running_output", O.copy())):
            out[key].append(value)
    return out


def blocks_of(tiles, m: int):
    if isinstance(tiles, int):
        return [(s, min(s + tiles, m)) for s in range(0, m, tiles)]
    edges = [0, *tiles, m]
    return list(zip(edges[:-1], edges[1:]))


# ---------------------------------------------------------------- 1 and 3: tiles with the variants
CONFIGS = {
    "sink": {"sink": "-1/2"},
    "sink 0": {"sink": 0},
    "alibi": {"alibi": {"slope": "1/4"}},
    "softcap": {"softcap": 2},
    "all three": {"sink": 1, "alibi": {"slope": "1/2"}, "softcap": 3},
}


def _float_keys(keys: dict) -> tuple[float | None, float | None, float | None]:
    sink = keys.get("sink")
    slope = keys.get("alibi", {}).get("slope")
    cap = keys.get("softcap")
    to = lambda v: None if v is None else float(sympy.Rational(v))   # noqa: E731
    return to(sink), to(slope), to(cap)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mask", [None, "causal"])
@pytest.mark.parametrize("tiles", [1, 2, [3]])
def test_online_with_variants_matches_a_float64_loop(seed, config, mask, tiles):
    rng = np.random.default_rng(seed)
    n = m = 4
    Q, K = rng.integers(-2, 3, size=(n, 2)), rng.integers(-2, 3, size=(m, 2))
    V = rng.integers(-3, 4, size=(m, 2)).astype(float)
    keys = CONFIGS[config]
    p = sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.astype(int).tolist(), mask=mask, tiles=tiles, **keys)
    t = sa.attend(p)
    sink, slope, cap = _float_keys(keys)
    allowed = np.tril(np.ones((n, m), bool)) if mask else np.ones((n, m), bool)
    z = logits64((Q @ K.T).astype(float), 1 / math.sqrt(2), slope, cap)
    x = np.where(allowed, z, -np.inf)
    blocks = blocks_of(tiles, m)
    got = {name: floats(t.step(name)) for name in ("running_max", "rescale", "running_sum")}
    outs = [floats(t.step(f"running_output_{b}")) for b in range(len(blocks))]
    weights = sink_softmax64(z, allowed, sink)
    for i in range(n):
        ref = online_from_sink64(x[i], V, blocks, sink)
        for name in got:
            assert got[name][i] == pytest.approx(ref[name], rel=1e-9, abs=1e-12), (name, i)
        for b in range(len(blocks)):
            assert outs[b][i] == pytest.approx(ref["running_output"][b], rel=1e-9, abs=1e-12)
        # the last block, divided by the last running sum, is the sink attention's output
        assert ref["running_output"][-1] / ref["running_sum"][-1] == pytest.approx(weights[i] @ V, abs=1e-12)
        assert floats(t.output)[i] == pytest.approx(weights[i] @ V, rel=1e-9, abs=1e-12)
    assert floats(t.weights) == pytest.approx(weights, rel=1e-9, abs=1e-12)
    assert sa.facts.prove("online-softmax-equals-softmax", t).holds


def test_tiles_with_a_sink_hand_worked():
    """Logits 2, 1 | 3 at scale 1, sink 0, started at m = 0, l = 1: block 0 raises m to 2, so
    l0 = e^(0−2)·1 + e^(2−2) + e^(1−2) = 0.1353 + 1 + 0.3679 = 1.5032; block 1 raises m to 3:
    l1 = e^(−1)·1.5032 + 1 = 1.5530 (= e^(−3) + e^(−1) + e^(−2) + 1, the sink softmax's
    denominator against the maximum 3); weights 0.2369, 0.0871, 0.6439 (they sum to 0.9679: the
    sink keeps e^(−3)/1.5530 = 0.0321); output 0.2369·1 + 0.6439·2 = 1.5247."""
    p = sa.Problem(Q=[[1]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, tiles=[2], sink=0,
                   tokens=["q"], key_tokens=["a", "b", "c"])
    t = sa.attend(p)
    assert t.running_max.matrix.tolist() == [[2, 3]]
    assert t.rescale.matrix.tolist() == [[sympy.exp(-2), sympy.exp(-1)]]
    assert [str(d) for d in t.rescale.decimals(sa.Rounding(places=4))[0]] == ["0.1353", "0.3679"]
    assert [str(d) for d in t.running_sum.decimals(sa.Rounding(places=4))[0]] == ["1.5032", "1.5530"]
    assert [str(d) for d in t.weights.decimals(sa.Rounding(places=4))[0]] == ["0.2369", "0.0871", "0.6439"]
    assert str(t.output.decimal(0, 0, sa.Rounding(places=4))) == "1.5247"
    assert same(t.running_sum[0, 1], t.row_sum[0, 0])      # both against the maximum 3
    assert t.online.run(0)[2][-1] == sympy.exp(-3)           # the sink's coefficient in l1


def test_tiles_where_the_sink_stays_the_maximum():
    """sink 5 above every logit (1, 2): m stays 5, every rescale is e^0 = 1 and
    l = 1 + e^(1−5) + e^(2−5) = 1.0681; the weights e^(−4)/l = 0.0171, e^(−3)/l = 0.0466."""
    t = sa.attend(sa.Problem(Q=[[1]], K=[[1], [2]], V=[[1], [0]], scale=1, tiles=1, sink=5))
    assert t.running_max.matrix.tolist() == [[5, 5]] and t.rescale.matrix.tolist() == [[1, 1]]
    assert str(t.running_sum.decimal(0, 1, sa.Rounding(places=4))) == "1.0681"
    assert [str(d) for d in t.weights.decimals(sa.Rounding(places=4))[0]] == ["0.0171", "0.0466"]
    assert 1 + E(-4) + E(-3) == pytest.approx(1.0681, abs=5e-5)


def test_tiles_with_alibi_hand_worked():
    """Scores 2, 1 | 3 at scale 1, slope 1/2, no mask, query 0: bias [0, +1/2, +1] (future keys
    get +slope·(j − i)), logits 2, 3/2 | 4; l0 = 1 + e^(−1/2) = 1.6065, l1 = e^(−2)·1.6065 + 1
    = 1.2174."""
    t = sa.attend(sa.Problem(Q=[[1]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, tiles=[2],
                             alibi={"slope": "1/2"}))
    assert t.running_max.matrix.tolist() == [[2, 4]]
    assert [str(d) for d in t.running_sum.decimals(sa.Rounding(places=4))[0]] == ["1.6065", "1.2174"]
    assert (1 + E(-0.5)) * E(-2) + 1 == pytest.approx(1.2174, abs=5e-5)


def test_tiles_with_a_softcap_hand_worked():
    """Scores 0 | 2, scale 1, c = 1: logits 0 | tanh 2 = 0.96403; l0 = 1, m1 = tanh 2,
    rescale e^(−0.96403) = 0.3814, l1 = 0.3814 + 1 = 1.3814: the weights 0.2761, 0.7239 of
    tests/test_variants_logits.py's hand-worked soft-cap, reached block by block."""
    t = sa.attend(sa.Problem(Q=[[1, 1]], K=[[0, 0], [1, 1]], V=[[1], [0]], scale=1, softcap=1, tiles=1))
    assert t.running_max[0, 1] == sympy.tanh(2)
    assert [str(d) for d in t.rescale.decimals(sa.Rounding(places=4))[0]] == ["1.0000", "0.3814"]
    assert str(t.running_sum.decimal(0, 1, sa.Rounding(places=4))) == "1.3814"
    assert [str(d) for d in t.weights.decimals(4)[0]] == ["0.2761", "0.7239"]
    assert E(-math.tanh(2)) + 1 == pytest.approx(1.3814, abs=5e-5)


def test_online_fact_with_a_sink_refutes_a_claim_without_the_sink():
    """Claiming the plain softmax's output (no sink) for the sink problem fails the fact."""
    p = sa.Problem(Q=[[1]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, tiles=[2], sink=0)
    assert sa.facts.prove("online-softmax-equals-softmax", p, Claims.from_mapping({"output": [["1.5247"]]})).holds
    plain = (E(-1) + 2) / (1 + E(-1) + E(-2))           # 1.5752 without the sink
    proof = sa.facts.prove("online-softmax-equals-softmax", p,
                           Claims.from_mapping({"output": [[f"{plain:.4f}"]]}))
    assert proof.holds is False and proof.counterexample["claimed"] == "1.5752"
    assert sa.facts.online_softmax_equals_softmax(sa.attend(p), rescaled=False).holds is False


def test_online_mistakes_on_a_sink_problem():
    """online-no-rescale with a sink: every α taken as 1, l1 = 1 + 1 + e^(−1) (block 0 against its
    maximum 2, sink start unrescaled) + 1 = 3.3679 instead of 1.5530."""
    checker = Checker(sa.Problem(Q=[[1]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, tiles=[2],
                                 sink=0, tokens=["q"], key_tokens=["a", "b", "c"]))
    assert 1 + 1 + E(-1) + 1 == pytest.approx(3.3679, abs=5e-5)
    verdict = checker.check("running_sum[q, 1]", "3.3679")
    assert verdict.code == "mistake" and verdict.mistake == "online-no-rescale"
    assert checker.check("running_sum[q, 1]", "1.5530").right


# ---------------------------------------------------------------- 2 and 3: decode with the variants
def rolling_cache64(X, Wq, Wk, Wv, prefill: int, window: int | None, sink, slope, cap):
    """Prefill, then decode token by token with a KV cache that keeps the last W entries (a
    deque of maxlen W: appending evicts the oldest), ALiBi by absolute positions, in float64."""
    size = window or len(X)
    K_cache, V_cache, pos = deque(maxlen=size), deque(maxlen=size), deque(maxlen=size)
    for j in range(prefill):
        K_cache.append(X[j] @ Wk), V_cache.append(X[j] @ Wv), pos.append(j)
    steps = {}
    for t in range(prefill, len(X)):
        q = X[t] @ Wq
        K_cache.append(X[t] @ Wk), V_cache.append(X[t] @ Wv), pos.append(t)
        K, V, at = np.array(K_cache), np.array(V_cache), np.array(pos)
        scores = K @ q
        z = scores / math.sqrt(Wq.shape[1])
        if slope is not None:
            z = z - slope * (t - at)
        if cap is not None:
            z = cap * np.tanh(z / cap)
        e = np.exp(z - z.max())
        total = e.sum() + (0.0 if sink is None else E(sink - z.max()))
        w = e / total
        steps[t] = {"K_cache": K, "V_cache": V, "scores": scores, "logits": z, "weights": w,
                    "output": w @ V, "positions": at}
    return steps


DECODE_CONFIGS = {
    "window": ({"mask": {"window": 2}}, 2),
    "window 3 + sink": ({"mask": {"window": 3}, "sink": "1/2"}, 3),
    "sink": ({"sink": 0}, None),
    "alibi": ({"alibi": {"slope": "1/4"}}, None),
    "softcap": ({"softcap": 1}, None),
    "window + alibi + softcap + sink": ({"mask": {"window": 2}, "alibi": {"slope": "1/2"},
                                        "softcap": 2, "sink": -1}, 2),
}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("config", DECODE_CONFIGS)
@pytest.mark.parametrize("prefill", [1, 3])
def test_decode_with_variants_matches_a_rolling_cache(seed, config, prefill):
    rng = np.random.default_rng(seed)
    n, d_model, d_k, d_v = 5, 3, 2, 2
    X = rng.integers(-2, 3, size=(n, d_model))
    Wq, Wk, Wv = (rng.integers(-2, 3, size=(d_model, d)) for d in (d_k, d_k, d_v))
    keys, window = DECODE_CONFIGS[config]
    p = sa.Problem(X=X.tolist(), W_q=Wq.tolist(), W_k=Wk.tolist(), W_v=Wv.tolist(),
                   decode={"prefill": prefill}, **keys)
    t = sa.attend(p)
    sink, slope, cap = _float_keys(keys)
    ref = rolling_cache64(*(a.astype(float) for a in (X, Wq, Wk, Wv)), prefill, window, sink, slope, cap)
    # the no-cache reference, computed here: full attention with the window (or causal) mask
    i, j = np.indices((n, n))
    allowed = (j <= i) & (i - j < (window or n))
    full = sink_softmax64(logits64((X @ Wq @ (X @ Wk).T).astype(float), 1 / math.sqrt(d_k), slope, cap),
                          allowed, sink)
    for pos, want in ref.items():
        assert t.step(f"decode_{pos}_K_cache").row_labels == tuple(p.tokens[k] for k in want["positions"])
        for part in ("K_cache", "V_cache", "scores", "logits", "weights", "output"):
            name = f"decode_{pos}_{part}"
            if part == "logits" and name not in t.step_names:
                assert slope is None and cap is None
                continue
            assert floats(t.step(name)) == pytest.approx(np.atleast_2d(want[part]), rel=1e-9, abs=1e-12), name
        assert want["weights"] == pytest.approx(full[pos][want["positions"]], rel=1e-9, abs=1e-12)
        assert floats(t.output)[pos] == pytest.approx(want["output"], rel=1e-9, abs=1e-12)
    assert floats(t.weights) == pytest.approx(full, rel=1e-9, abs=1e-12)
    assert sa.facts.prove("kv-cache-equals-causal-row", t).holds


def kv_inputs() -> dict:
    base = sa.load_example("kv-cache")
    return {k: getattr(base, k) for k in ("X", "W_q", "W_k", "W_v")} | {"tokens": list(base.tokens)}


def test_rolling_buffer_hand_worked():
    """kv-cache example, W = 2: at step 3 ('and') the buffer holds cats, and (I, love evicted);
    q_3 = [1, −1], k_cats = [1, 2], k_and = [1, 0]: scores −1, 1; weights 1/(1 + e^√2) = 0.1956
    and 0.8044; output 0.1956·[2, 2] + 0.8044·[0, −2] = [0.3911, −1.2177]."""
    t = sa.attend(sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask={"window": 2}))
    assert t.step("decode_3_K_cache").row_labels == ("cats", "and")
    assert t.step("decode_3_K_cache").matrix.tolist() == [[1, 2], [1, 0]]
    assert t.step("decode_3_scores").matrix.tolist() == [[-1, 1]]
    assert [str(d) for d in t.step("decode_3_weights").decimals(sa.Rounding(places=4))[0]] == ["0.1956", "0.8044"]
    assert [str(d) for d in t.step("decode_3_output").decimals(sa.Rounding(places=4))[0]] == ["0.3911", "-1.2177"]
    a = 1 / (1 + E(math.sqrt(2)))
    assert (a, 2 * a - 2 * (1 - a)) == pytest.approx((0.1956, -1.2177), abs=5e-5)
    assert t.step("decode_5_K_cache").row_labels == ("dogs", "too")


@pytest.mark.parametrize("window, with_cache, elements, per_step", [
    (2, 2 + 2 + 2, 2 * 4, (8, 8, 8)),
    (4, 4 + 4 + 4, 4 * 4, (16, 16, 16)),
    (5, 4 + 5 + 5, 5 * 4, (16, 20, 20)),
    (6, 4 + 5 + 6, 6 * 4, (16, 20, 24)),     # W = n: the causal cache
])
def test_work_counts_with_a_rolling_buffer(window, with_cache, elements, per_step):
    """After a 3-token prompt, 3 steps: each meets min(t + 1, W) keys; the cache holds
    min(L, W)·(d_k + d_v); recomputing without a cache still costs 4² + 5² + 6² = 77."""
    w = work_counts(sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask={"window": window}))
    assert w.score_interactions_with_cache == with_cache
    assert w.score_interactions_without_cache == 77 and w.projection_rows_with_cache == 9
    assert w.cache_elements == elements and w.cache_elements_per_step == per_step
    assert w.window == (None if window >= 6 else window)


def test_decode_with_a_sink_hand_worked():
    """kv-cache example, sink 0: step 3's scores 0, −1, −1, 1 over √2; against the maximum 1/√2
    the exponentials are e^(−1/√2) = 0.4931, e^(−√2) = 0.2431 (twice) and 1, sum 1.9793, plus the
    sink's e^(0 − 1/√2) = 0.4931: 2.4724; weights 0.1994, 0.0983, 0.0983, 0.4045 (sum 0.8006)."""
    t = sa.attend(sa.Problem(**kv_inputs(), decode={"prefill": 3}, sink=0))
    z = np.array([0, -1, -1, 1]) / math.sqrt(2)
    e = np.exp(z - z.max())
    w = e / (e.sum() + E(-z.max()))
    assert [str(d) for d in t.step("decode_3_weights").decimals(sa.Rounding(places=4))[0]] == \
        [f"{x:.4f}" for x in w] == ["0.1994", "0.0983", "0.0983", "0.4045"]
    assert sum(w) < 1


def test_decode_with_alibi_uses_absolute_positions():
    """Step 4 ('dogs') with slope 1/2 and W = 2: the cache holds and (3), dogs (4); the bias is
    −1/2·(4 − 3) = −1/2 and 0, not −1/2·(1 − 0) by buffer slot."""
    t = sa.attend(sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask={"window": 2},
                             alibi={"slope": "1/2"}))
    s2 = sympy.sqrt(2)
    logits = t.step("decode_4_logits")
    scores = t.step("decode_4_scores").matrix.tolist()[0]
    assert scores == [2, 4]
    assert same(logits[0, 0], 2 / s2 - sympy.Rational(1, 2)) and same(logits[0, 1], 4 / s2)
    assert same(logits[0, 0], t.biased[4, 3]) and same(logits[0, 1], t.biased[4, 4])


@pytest.mark.parametrize("keys, words", [
    ({"mask": {"window": 2, "causal": False}}, "remove causal = false"),
    ({"mask": [[1, 1, 0, 0, 0, 0]] * 6}, "or a sliding window mask = { window = W }"),
])
def test_decode_refuses_a_mask_that_is_not_causal(keys, words):
    with pytest.raises(ProblemError) as err:
        sa.Problem(**kv_inputs(), decode={"prefill": 3}, **keys)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_decode_accepts_a_window_given_as_rows_and_keeps_it():
    """A rebuilt problem passes its mask as rows: a causal band stays a window, the causal
    mask stays causal."""
    band = [[1 if i - 2 < j <= i else 0 for j in range(6)] for i in range(6)]
    p = sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask=band)
    assert p.mask_kind == "matrix" and work_counts(p).window == 2
    causal = [[1 if j <= i else 0 for j in range(6)] for i in range(6)]
    assert sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask=causal).mask_kind == "causal"
    q = sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask={"window": 2}, sink=0)
    assert q.subs({}).window == (2, True) and q.subs({}).sink == 0


def test_kv_cache_fact_with_a_window_and_a_wrong_claim():
    problem = sa.Problem(**kv_inputs(), decode={"prefill": 3}, mask={"window": 2})
    proof = sa.facts.prove("kv-cache-equals-causal-row", problem)
    assert proof.holds and "rolling buffer" in proof.general[2].text
    assert "rolling cache of 2: cats, and" in proof.checks[0].text and "(exactly)" in proof.checks[0].text
    trace = sa.attend(problem)
    rows = [[str(d) for d in r] for r in trace.output.decimals(sa.Rounding(places=3))]
    assert sa.facts.prove("kv-cache-equals-causal-row", trace, Claims.from_mapping({"output": rows})).holds
    # the causal answer (a cache that never evicts) for step 3 is refuted
    causal = sa.attend(sa.Problem(**kv_inputs(), decode={"prefill": 3}))
    rows[3] = [str(d) for d in causal.output.decimals(sa.Rounding(places=3))[3]]
    bad = sa.facts.prove("kv-cache-equals-causal-row", trace, Claims.from_mapping({"output": rows}))
    assert bad.holds is False and bad.counterexample["row"] == "and"


# ---------------------------------------------------------------- views of the combinations
def _write(tmp_path, text: str):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return str(path)


ROLLING = ('X = [[1, 0], [0, 1], [1, 1], [1, -1], [2, 0], [0, 2]]\nW_q = [[1, 0], [0, 1]]\n'
           'W_k = [[1, 1], [0, 1]]\nW_v = [[1, 0], [1, 2]]\ntokens = ["I", "love", "cats", "and", "dogs", "too"]\n'
           'decode = { prefill = 3 }\nmask = { window = 2 }\nsink = 0\nalibi = { slope = "1/2" }\n')
TILED = ('Q = [[1]]\nK = [[2], [1], [3]]\nV = [[1], [0], [2]]\nscale = 1\ntiles = [2]\nsink = 0\n'
         'tokens = ["q"]\nkey_tokens = ["a", "b", "c"]\n')


def test_text_explains_the_rolling_buffer_and_the_sink_start(tmp_path, capsys):
    assert main(["explain", _write(tmp_path, ROLLING)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the cache is a rolling buffer (Mistral): it keeps only the last 2 keys" in out
    assert "Decode step 3, token 'and': the cache now holds 2 keys (cats, and); I, love evicted." in out
    assert "ALiBi's bias uses absolute positions" in out and "decode_3_logits" in out
    assert "min(L, W)·(d_k + d_v) = 2·(2 + 2)" in out
    assert main(["explain", _write(tmp_path, TILED)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "The sink logit s starts every row's state before block 0" in out
    assert "The sink started the state: m[-1] = 0, l[-1] = 1, O[-1] = 0." in out
    assert "l[0] = e^(−2) + 1 + e^(−1) ≈ 1.50" in out
    assert "the largest scaled score seen so far (the sink included) is key 'a', m[0] = 2" in out


def test_json_and_check_cli_of_the_combinations(tmp_path, capsys):
    assert main(["explain", _write(tmp_path, ROLLING), "--format", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps["decode_3_K_cache"]["rows"] == ["cats", "and"]
    assert steps["decode_3_weights"]["shape"] == [1, 2] and "decode_3_logits" in steps
    _write(tmp_path, TILED)
    figures = tmp_path / "figures.toml"
    figures.write_text('problem = "p.toml"\n[[figure]]\ntarget = "running_sum[q, 0]"\ntext = "1.5032"\n')
    assert main(["check", str(figures)]) == 0
    capsys.readouterr()
    figures.write_text('problem = "p.toml"\n[[figure]]\ntarget = "running_sum[q, 0]"\ntext = "1.3679"\n')
    assert main(["check", str(figures)]) == 1       # 1 + e^(−1): the sink's term left out


def test_latex_of_the_combinations_compiles(tmp_path):
    if shutil.which("pdflatex") is None or shutil.which("pdftotext") is None:
        pytest.skip("pdflatex and pdftotext are needed")
    pdf = tmp_path / "rolling.pdf"
    assert main(["explain", _write(tmp_path, ROLLING), "--pdf", "-o", str(pdf)]) == 0
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                                   check=True).stdout.split())
    assert "rolling buffer" in text and "KV-cache decoding" in text


# ---------------------------------------------------------------- 4: the mistakes
def _row(values) -> str:
    return ", ".join(f"{x:.3f}" for x in values)


ALIBI_Q, ALIBI_K, ALIBI_V = [[1], [2], [1]], [[2], [1], [3]], [[1], [0], [2]]


def _alibi_problem(**extra) -> sa.Problem:
    return sa.Problem(Q=ALIBI_Q, K=ALIBI_K, V=ALIBI_V, scale="1/2", alibi={"slope": "1/2"},
                      mask="causal", tokens=["q", "r", "s"], key_tokens=["a", "b", "c"], **extra)


def _causal_softmax(L: np.ndarray) -> np.ndarray:
    return sink_softmax64(L, np.tril(np.ones(L.shape, bool)), None)


S = (np.array(ALIBI_Q) @ np.array(ALIBI_K).T).astype(float)
I, J = np.indices(S.shape)


@pytest.mark.parametrize("code, logits", [
    ("alibi-sign", S / 2 + 0.5 * (I - J)),          # +slope·(i − j)
    ("alibi-scaled", (S - 0.5 * (I - J)) / 2),       # (scores + bias)·scale
])
def test_alibi_mistakes_are_named(code, logits):
    checker = Checker(_alibi_problem())
    right = _causal_softmax(S / 2 - 0.5 * (I - J))[2]
    assert _row(right) == "0.154, 0.154, 0.691"       # e^(1 − 1), e^(1/2 − 1/2), e^(3/2) normalised
    assert checker.check("weights[s]", _row(right)).right
    wrong = _causal_softmax(logits)[2]
    verdict = checker.check("weights[s]", _row(wrong))
    assert verdict.code == "mistake" and verdict.mistake == code, verdict.message
    # the mistake's own trace, through the same engine, against the float64 values
    from symattn.check.mistakes.logits import logit_variants
    from symattn.trace.trace import attend

    variants = {c: tr for c, _, _, tr in logit_variants(sa.attend(_alibi_problem()), lambda b: attend(b()))}
    assert floats(variants[code].weights) == pytest.approx(_causal_softmax(logits), rel=1e-9, abs=1e-12)


def test_alibi_sign_hand_worked():
    """Row s (position 2) with the sign flipped: logits 1 + 1, 1/2 + 1/2, 3/2 + 0 = 2, 1, 3/2;
    weights e^(1/2), e^(−1/2), 1 over their sum 1.6487 + 0.6065 + 1 = 3.2552: 0.506, 0.186, 0.307."""
    verdict = Checker(_alibi_problem()).check("weights[s]", "0.506, 0.186, 0.307")
    assert verdict.mistake == "alibi-sign"
    assert [E(0.5) / 3.2552, E(-0.5) / 3.2552, 1 / 3.2552] == pytest.approx([0.506, 0.186, 0.307], abs=6e-4)


def test_softcap_missing_is_named():
    """Scores [0, 2] at scale 1 with c = 1: capped 0, tanh 2 → weights 0.276, 0.724; without
    the cap 1/(1 + e²) = 0.119 and 0.881."""
    checker = Checker(sa.Problem(Q=[[1, 1]], K=[[0, 0], [1, 1]], V=[[1], [0]], scale=1, softcap=1))
    assert checker.check("weights[0]", "0.276, 0.724").right
    plain = 1 / (1 + E(2))
    verdict = checker.check("weights[0]", _row([plain, 1 - plain]))
    assert _row([plain, 1 - plain]) == "0.119, 0.881"
    assert verdict.code == "mistake" and verdict.mistake == "softcap-missing"
    assert checker.check("output[0]", f"{plain:.3f}").mistake == "softcap-missing"


SINK_PROBLEM = dict(Q=[[1], [2]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, sink=0,
                    tokens=["q", "r"], key_tokens=["a", "b", "c"])


def test_sink_renormalized_is_named():
    """Row q with sink 0: logits 2, 1, 3; the sink softmax 0.237, 0.087, 0.644 (with e^(−3) in
    the denominator); dropped and renormalised it is the plain 0.245, 0.090, 0.665."""
    checker = Checker(sa.Problem(**SINK_PROBLEM))
    x = np.array([2.0, 1.0, 3.0])
    right = np.exp(x) / (np.exp(x).sum() + 1)
    plain = np.exp(x) / np.exp(x).sum()
    assert (_row(right), _row(plain)) == ("0.237, 0.087, 0.644", "0.245, 0.090, 0.665")
    assert checker.check("weights[q]", _row(right)).right
    verdict = checker.check("weights[q]", _row(plain))
    assert verdict.code == "mistake" and verdict.mistake == "sink-renormalized"
    assert checker.check("output[q]", f"{plain @ [1, 0, 2]:.3f}").mistake == "sink-renormalized"


def test_sink_kept_is_named():
    """The sink's weight left in the row: four weights summing to 1, the last e^0/(Σ + 1) = 0.032."""
    checker = Checker(sa.Problem(**SINK_PROBLEM))
    x = np.array([2.0, 1.0, 3.0, 0.0])
    kept = np.exp(x) / np.exp(x).sum()
    assert _row(kept) == "0.237, 0.087, 0.644, 0.032"
    verdict = checker.check("weights[q]", _row(kept))
    assert verdict.code == "mistake" and verdict.mistake == "sink-kept"
    assert "the last is the sink's weight" in verdict.message
    # the whole matrix, both rows kept; a wrong extra entry is still a shape error
    both = np.exp(np.array([[2.0, 1, 3, 0], [4, 2, 6, 0]]))
    both = both / both.sum(axis=1, keepdims=True)
    assert checker.check("weights", "; ".join(_row(r) for r in both)).mistake == "sink-kept"
    assert checker.check("weights[q]", "0.237, 0.087, 0.644, 0.050").code == "invalid"
    # without a sink a fourth entry is just the shape error
    plain = Checker(sa.Problem(**{**SINK_PROBLEM, "sink": None}))
    assert plain.check("weights[q]", _row(kept)).code == "invalid"


def test_sink_kept_through_the_check_cli(tmp_path, capsys):
    _write(tmp_path, 'Q = [[1], [2]]\nK = [[2], [1], [3]]\nV = [[1], [0], [2]]\nscale = 1\n'
                            'sink = 0\ntokens = ["q", "r"]\nkey_tokens = ["a", "b", "c"]\n')
    figures = tmp_path / "figures.toml"
    figures.write_text('problem = "p.toml"\n[[figure]]\ntarget = "weights[q]"\n'
                       'text = "0.237, 0.087, 0.644, 0.032"\n')
    assert main(["check", str(figures)]) == 1
    assert "sink-kept" in capsys.readouterr().out


def test_no_variant_no_variant_mistakes():
    from symattn.check.mistakes.logits import logit_variants
    from symattn.trace.trace import attend

    assert logit_variants(sa.attend(sa.load_example("i-love-cats")), lambda b: attend(b())) == []


def test_html_page_of_the_rolling_buffer_in_chromium(tmp_path):
    from browser import shared_browser

    path = tmp_path / "rolling.html"
    assert main(["explain", _write(tmp_path, ROLLING), "--format", "html", "-o", str(path)]) == 0
    browser = shared_browser()
    page = browser.open(path)
    text = " ".join(page.page.inner_text("body").split())
    page.page.screenshot(path=str(tmp_path / "rolling.png"), full_page=True)
    page.assert_clean()
    page.close()
    assert "the cache is a rolling buffer (Mistral)" in text
    assert "the cache now holds 2 keys (cats, and); I, love evicted" in text
