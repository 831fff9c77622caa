"""Variant keys per head in multi-head files (issue 11): each head's variant against an
independent float64 implementation written here, ALiBi's default slopes against the
paper's formula and its reference code, one-line errors naming the head and the key,
the budgets' edges, the views and the per-head check targets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy

from symattn.numbers.certify import Rounding
from symattn.cli import main
from symattn.limits import MAX_ALGEBRAIC_DEGREE, MAX_HEADS
from symattn.heads.heads import MultiHeadProblem, attend_heads, heads_example_names, load_heads_example
from symattn.heads.check import HeadsChecker
from symattn.heads.keys import alibi_default_slopes, alibi_slope_exponents

FINE = Rounding(digits=15)


# ------------------------------------------------------------ the float64 reference

def rope_rotate(M, positions, theta, layout):
    """Row vectors turned pair by pair: (x, y) ↦ (x cos φ − y sin φ, x sin φ + y cos φ), φ = p·θ_i."""
    M = np.array(M, dtype=float)
    d = M.shape[1]
    pairs = ([(2 * i, 2 * i + 1) for i in range(d // 2)] if layout == "interleaved"
             else [(i, i + d // 2) for i in range(d // 2)])
    out = M.copy()
    for r, p in enumerate(positions):
        for i, (a, b) in enumerate(pairs):
            phi = p * theta[i]
            x, y = M[r, a], M[r, b]
            out[r, a], out[r, b] = x * math.cos(phi) - y * math.sin(phi), x * math.sin(phi) + y * math.cos(phi)
    return out


def reference_head(Q, K, V, *, scale, mask=None, window=None, alibi=None, symmetric=False,
                   softcap=None, sink=None, rope=None):
    """One head of attention in float64, every variant written out from its definition."""
    Q, K, V = (np.array(m, dtype=float) for m in (Q, K, V))
    n, m = Q.shape[0], K.shape[0]
    if rope is not None:
        theta, layout = rope
        Q, K = rope_rotate(Q, range(n), theta, layout), rope_rotate(K, range(m), theta, layout)
    logits = scale * (Q @ K.T)
    i, j = np.indices((n, m))
    if alibi is not None:
        logits = logits - alibi * (np.abs(i - j) if symmetric else (i - j))
    if softcap is not None:
        logits = softcap * np.tanh(logits / softcap)
    allowed = np.ones((n, m), dtype=bool)
    if mask == "causal":
        allowed = j <= i
    if window is not None:
        allowed = (i - window < j) & (j <= i)
    logits = np.where(allowed, logits, -np.inf)
    if sink is not None:                       # the sink column, softmaxed with the row, then dropped
        logits = np.concatenate([logits, np.full((n, 1), float(sink))], axis=1)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights = (e / e.sum(axis=1, keepdims=True))[:, :m]
    return weights, weights @ V


def as_float(step):
    return np.array([[float(str(d)) for d in row] for row in step.decimals(FINE)])


MIXED_DIRECT = """
title = "every variant per head"
tokens = ["a", "b", "c", "d"]
scale = "1/2"
mask = "causal"
alibi = "default"
K = [[1, 0, 2, 1], [0, 1, -1, 1], [1, 1, 0, 0], [2, -1, 1, 0]]
V = [[1, 0], [0, 1], [2, 2], [-1, 3]]
[[head]]                       # ALiBi, the default slope of head 0 of H = 5: 2^(-8/4) = 1/4 (P = 4)
Q = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1], [2, 0, -1, 1]]
[[head]]                       # its own slope, symmetric, no mask
Q = [[0, 1, 0, 1], [1, 1, 0, 0], [1, -1, 1, 0], [0, 0, 2, 1]]
alibi = { slope = "1/3", symmetric = true }
mask = false
[[head]]                       # soft-cap after the default bias
Q = [[2, 0, 1, 0], [0, 2, 0, 1], [1, 0, 2, 0], [1, 1, 1, 1]]
softcap = 2
[[head]]                       # a sliding window and a sink, no ALiBi
Q = [[1, 2, 0, 0], [0, 1, 2, 0], [0, 0, 1, 2], [2, 0, 0, 1]]
mask = { window = 2 }
sink = "-1/2"
alibi = false
[[head]]                       # RoPE, half layout, θ = π/2, π/3 (ALiBi kept)
Q = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
rope = { layout = "half", theta = ["pi/2", "pi/3"] }
"""


def test_every_variant_per_head_equals_an_independent_float64_computation():
    problem = MultiHeadProblem.from_toml_text(MIXED_DIRECT)
    result = attend_heads(problem)
    K = [[1, 0, 2, 1], [0, 1, -1, 1], [1, 1, 0, 0], [2, -1, 1, 0]]
    V = [[1, 0], [0, 1], [2, 2], [-1, 3]]
    Qs = [[[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1], [2, 0, -1, 1]],
          [[0, 1, 0, 1], [1, 1, 0, 0], [1, -1, 1, 0], [0, 0, 2, 1]],
          [[2, 0, 1, 0], [0, 2, 0, 1], [1, 0, 2, 0], [1, 1, 1, 1]],
          [[1, 2, 0, 0], [0, 1, 2, 0], [0, 0, 1, 2], [2, 0, 0, 1]],
          [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]]]
    # H = 5 is not a power of two: the reference code's slopes are 2^-2, 2^-4, 2^-6, 2^-8 (P = 4),
    # then every other slope of 8 heads: 2^-1
    settings = [dict(mask="causal", alibi=1 / 4),
                dict(alibi=1 / 3, symmetric=True),
                dict(mask="causal", alibi=1 / 64, softcap=2.0),
                dict(window=2, sink=-0.5),
                dict(mask="causal", alibi=2 ** -1, rope=([math.pi / 2, math.pi / 3], "half"))]
    for h, kw in enumerate(settings):
        weights, output = reference_head(Qs[h], K, V, scale=0.5, **kw)
        trace = result.head(h)
        assert np.allclose(as_float(trace.weights), weights, rtol=1e-12, atol=1e-14), h
        assert np.allclose(as_float(trace.output), output, rtol=1e-12, atol=1e-14), h
    assert [t.step_names[3:6] for t in result.traces][4] == ("Q_rot", "K_rot", "scores")
    assert "capped" in result.head(2).step_names and "bias" in result.head(2).step_names
    assert "bias" not in result.head(3).step_names
    sums = as_float(result.head(3).weights).sum(axis=1)
    assert np.all(sums < 1)                      # the sink takes the rest


MIXED_PROJECTED = """
tokens = ["the", "cat", "sat", "down", "now"]
X = [[1, 0, 1], [0, 1, 1], [1, 1, 0], [1, -1, 2], [0, 2, -1]]
heads = 3
kv_heads = 3
W_q = [[1, 0,  0, 1,  1, 1], [0, 1,  1, 0,  0, 1], [1, 1,  0, 0,  1, -1]]
W_k = [[1, 0,  0, 1,  1, 0], [0, 1,  1, 1,  0, 1], [1, 0,  0, 1,  1, 1]]
W_v = [[1, 0,  2, 0,  1, 1], [0, 1,  0, 2,  1, 0], [1, 1,  1, 0,  0, 1]]
[[head]]
tiles = [2, 3]
[[head]]
decode = { prefill = 2 }
[[head]]
tiles = 2
mask = "causal"
"""


def test_tiles_and_decode_per_head_equal_float64():
    problem = MultiHeadProblem.from_toml_text(MIXED_PROJECTED)
    result = attend_heads(problem)
    X = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [1, -1, 2], [0, 2, -1]], dtype=float)
    Wq = np.array([[1, 0, 0, 1, 1, 1], [0, 1, 1, 0, 0, 1], [1, 1, 0, 0, 1, -1]], dtype=float)
    Wk = np.array([[1, 0, 0, 1, 1, 0], [0, 1, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1]], dtype=float)
    Wv = np.array([[1, 0, 2, 0, 1, 1], [0, 1, 0, 2, 1, 0], [1, 1, 1, 0, 0, 1]], dtype=float)
    masks = [None, "causal", "causal"]
    blocks = [[(0, 2), (2, 3), (3, 5)], None, [(0, 2), (2, 4), (4, 5)]]
    for h in range(3):
        cols = slice(2 * h, 2 * h + 2)
        Q, K, V = X @ Wq[:, cols], X @ Wk[:, cols], X @ Wv[:, cols]
        weights, output = reference_head(Q, K, V, scale=1 / math.sqrt(2), mask=masks[h])
        trace = result.head(h)
        assert np.allclose(as_float(trace.weights), weights, rtol=1e-12, atol=1e-14)
        assert np.allclose(as_float(trace.output), output, rtol=1e-12, atol=1e-14)
        if blocks[h] is not None:                 # the running maxima and sums, block by block
            logits = np.where(np.tril(np.ones((5, 5))) > 0, Q @ K.T / math.sqrt(2), -np.inf) \
                if masks[h] else Q @ K.T / math.sqrt(2)
            running_max = np.array([[logits[i, :b].max() for _, b in blocks[h]] for i in range(5)])
            running_sum = np.array([[np.exp(logits[i, :b] - running_max[i, k]).sum()
                                     for k, (_, b) in enumerate(blocks[h])] for i in range(5)])
            assert np.allclose(as_float(trace.running_max), running_max, rtol=1e-12)
            assert np.allclose(as_float(trace.running_sum), running_sum, rtol=1e-12)
    decode = result.head(1)
    for t in (2, 3, 4):                           # each decode step is the causal row t
        w = as_float(decode.step(f"decode_{t}_weights"))[0]
        assert np.allclose(w, as_float(decode.weights)[t, :t + 1], rtol=1e-12)
    assert "decode_1_q" not in decode.step_names and "running_max" not in decode.step_names


# ------------------------------------------------------------ ALiBi's default slopes

def paper_slopes(H):
    """Press et al.: head h = 1..H gets 2^(−8h/H) (the paper's rule, for H a power of two)."""
    return [2 ** (-8 * h / H) for h in range(1, H + 1)]


def reference_code_slopes(n):
    """ofirpress/attention_with_linear_biases get_slopes, re-typed: the rule for any H."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_code_slopes(2 * closest)[0::2][:n - closest]


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16])
def test_default_slopes_are_the_papers_for_powers_of_two(H):
    exact = [sympy.Integer(2) ** sympy.Rational(e.numerator, e.denominator) for e in alibi_slope_exponents(H)]
    assert [sympy.Integer(2) ** sympy.Rational(-8 * h, H) for h in range(1, H + 1)] == exact
    assert np.allclose([float(x) for x in exact], paper_slopes(H), rtol=1e-15)


@pytest.mark.parametrize("H", [3, 5, 6, 7, 12, 24])
def test_default_slopes_follow_the_reference_code_for_other_H(H):
    ours = [2.0 ** float(e) for e in alibi_slope_exponents(H)]
    assert np.allclose(ours, reference_code_slopes(H), rtol=1e-15)


def test_six_heads_by_hand():
    assert alibi_default_slopes(6) == ["1/4", "1/16", "1/64", "1/256", "1/2", "1/8"]
    assert alibi_default_slopes(1) == ["1/256"]
    assert alibi_default_slopes(16)[:2] == ["2^(-1/2)", "1/2"]


@pytest.mark.parametrize("H", [1, 2, 3, 4, 8])
def test_alibi_default_gives_each_head_its_slope(H):
    heads = "".join("[[head]]\nQ = [[1, 0], [0, 1]]\n" for _ in range(H))
    problem = MultiHeadProblem.from_toml_text(
        f'alibi = "default"\nmask = "causal"\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n{heads}')
    slopes = [p.alibi.slope for p in problem.head_problems]
    assert np.allclose([float(s) for s in slopes], reference_code_slopes(H), rtol=1e-15)
    if H & (H - 1) == 0:
        assert slopes == [sympy.Integer(2) ** sympy.Rational(-8 * h, H) for h in range(1, H + 1)]


def test_alibi_default_spellings_and_overrides():
    problem = MultiHeadProblem.from_toml_text("""
alibi = { slope = "default", symmetric = true }
K = [[1, 0], [0, 1]]
V = [[1], [2]]
[[head]]
Q = [[1, 0], [0, 1]]
[[head]]
Q = [[1, 0], [0, 1]]
alibi = { slope = "1/3" }
""")
    first, second = (p.alibi for p in problem.head_problems)
    assert (first.slope, first.symmetric) == (sympy.Rational(1, 16), True)
    assert (second.slope, second.symmetric) == (sympy.Rational(1, 3), False)


def test_alibi_heads_example_by_hand():
    result = attend_heads(load_heads_example("alibi-heads"))
    # head 0, row 'down': scores [2, 0, 0, 0], bias −1/4·[3, 2, 1, 0] → logits [5/4, −1/2, −1/4, 0];
    # e^1.25 = 3.49034, e^−0.5 = 0.60653, e^−0.25 = 0.77880, 1: sum 5.87567
    assert [str(d) for d in result.head(0).weights.decimals(3)[3]] == ["0.594", "0.103", "0.133", "0.170"]
    # head 3 (slope 1/256) is almost plain attention: [e², 1, 1, 1]/(e² + 3) = 0.711 without ALiBi
    assert str(result.head(3).weights.decimal(3, 0, 3)) == "0.710"


# ------------------------------------------------------------ one-line errors, exit 2

BAD = [
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\nalibi = { slop = 1 }\n",
     ["head 1", "alibi", "slop"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\nalibii = 1\n",
     ["head 1", "alibii", "variant keys"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\nsoftcap = -1\n", ["head 0", "softcap", "> 0"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\n"
     "alibi = \"defualt\"\n", ["head 2", "alibi slope", "defualt"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\ndecode = { prefill = 1 }\n", ["head 0", "decode"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\nrope = {}\n", ["head 0", "rope", "even d_k"]),
    ("K = [[1], [2]]\nV = [[1], [2]]\n[[head]]\nQ = [[1], [2]]\n[[head]]\nQ = [[1], [2]]\n"
     "mask = { window = 0 }\n", ["head 1", "window"]),
    ("K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\ntiles = 0\n", ["head 0", "tiles"]),
    ("X = [[1, 0]]\nheads = 2\nW_q = [[1, 0], [0, 1]]\nW_k = [[1, 0], [0, 1]]\nW_v = [[1, 0], [0, 1]]\n"
     "[[head]]\nsink = 0\n", ["1 [[head]] tables", "2 query heads"]),
    ("X = [[1, 0]]\nheads = 2\nW_q = [[1, 0], [0, 1]]\nW_k = [[1, 0], [0, 1]]\nW_v = [[1, 0], [0, 1]]\n"
     "[[head]]\nsink = 0\n[[head]]\nW_q = [[1], [0]]\n", ["head 1", "'W_q'", "only the variant keys"]),
    ("X = [[1, 0]]\n[[head]]\nW_q = [[1], [0]]\nW_k = [[1], [0]]\nW_v = [[1], [0]]\nsinkk = 0\n",
     ["head 0", "'sinkk'"]),
]


@pytest.mark.parametrize("text,words", BAD, ids=[w[0] + " " + w[1] for _, w in BAD])
def test_bad_per_head_keys_are_one_line_errors_with_exit_2(tmp_path, capsys, text, words):
    path = tmp_path / "heads.toml"
    path.write_text(text)
    assert main(["heads", str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err and captured.out == ""
    for word in words:
        assert word in err, (word, err)


# ------------------------------------------------------------ budgets

def _tiny(H: int, extra: str = "") -> str:
    return f"K = [[1]]\nV = [[1]]\n{extra}" + "[[head]]\nQ = [[1]]\n" * H


def test_heads_budget_edges():
    assert MultiHeadProblem.from_toml_text(_tiny(MAX_HEADS)).heads == MAX_HEADS
    with pytest.raises(Exception, match=rf"{MAX_HEADS + 1} query heads is over the cap of {MAX_HEADS} \(MAX_HEADS\)"):
        MultiHeadProblem.from_toml_text(_tiny(MAX_HEADS + 1))


def test_default_slope_root_budget_edges():
    """64 heads: slopes 2^(−h/8), roots of index 8 = MAX_ALGEBRAIC_DEGREE; 65 heads add
    2^(−1/16) for head 64, which is refused with the fix named."""
    assert MAX_ALGEBRAIC_DEGREE == 8
    problem = MultiHeadProblem.from_toml_text(_tiny(64, 'alibi = "default"\n'))
    assert problem.head_problems[0].alibi.slope == sympy.Integer(2) ** sympy.Rational(-1, 8)
    with pytest.raises(Exception) as caught:
        MultiHeadProblem.from_toml_text(_tiny(65, 'alibi = "default"\n'))
    message = str(caught.value)
    assert "head 64" in message and "2^(-1/16)" in message and "MAX_ALGEBRAIC_DEGREE" in message
    # an explicit slope for that head is the fix
    fixed = _tiny(64, 'alibi = "default"\n') + "[[head]]\nQ = [[1]]\nalibi = { slope = \"1/2\" }\n"
    assert MultiHeadProblem.from_toml_text(fixed).head_problems[64].alibi.slope == sympy.Rational(1, 2)


def test_python_variants_are_checked_like_the_files():
    with pytest.raises(Exception, match=r"head 1: 'alibii' is not a variant key"):
        MultiHeadProblem(q_weights=[[[1]], [[1]]], kv_weights=[([[1]], [[1]])], direct=True,
                         variants=[{}, {"alibii": 1}])
    problem = MultiHeadProblem(q_weights=[[[1], [1]], [[1], [1]]], kv_weights=[([[1], [0]], [[1], [2]])],
                               direct=True, mask="causal", variants=[{}, {"mask": False, "sink": 0}])
    assert problem.head_keys == [{"mask": "causal"}, {"sink": 0}]


def test_each_heads_own_caps_apply_and_name_the_head():
    text = "K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\nalibi = { slope = \"10^7\" }\n"
    with pytest.raises(Exception, match=r"head 1: alibi slope .*magnitude"):
        MultiHeadProblem.from_toml_text(text)


# ------------------------------------------------------------ views and check targets

def test_views_show_each_heads_variant_steps(capsys):
    assert main(["heads", "--example", "mixed-variants"]) == 0
    text = capsys.readouterr().out
    for title in ("1a. Head 0: Rotated queries (RoPE)", "1c. Head 0: Online softmax, block by block",
                  "2a. Head 1: ALiBi bias: bias = −1/16·(i − j)", "3a. Head 2: Masking",
                  "4a. Head 3: KV-cache decoding"):
        assert title in text, title
    assert "the paper's default 2^(−4) for query head 1 of 4" in text
    assert main(["heads", "--example", "mixed-variants", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    per = data["per_head"]
    assert per[1]["variants"]["alibi"] == {"slope": "1/16", "symmetric": False}
    assert per[1]["steps"]["bias"]["exact"][3] == ["-3/16", "-1/8", "-1/16", "0"]
    assert per[2]["variants"] == {"mask": {"window": 2, "causal": True}, "sink": "0"}
    assert per[2]["steps"]["masked"]["decimal"][0][1] == "-inf"
    assert set(per[0]["steps"]) >= {"Q_rot", "K_rot", "running_max", "running_sum"}
    assert "decode_3_weights" in per[3]["steps"] and per[3]["variants"]["decode"] == {"prefill": 2}
    # the decode step's weights are the causal row (exact strings equal)
    assert per[3]["steps"]["decode_3_weights"]["exact"][0] == per[3]["weights"]["exact"][3]
    for fmt, needle in (("latex", "Head 1: ALiBi bias"), ("html", "Head 1: ALiBi bias")):
        assert main(["heads", "--example", "mixed-variants", "--format", fmt]) == 0
        assert needle in capsys.readouterr().out


def test_a_mask_matrix_per_head_in_json(tmp_path, capsys):
    path = tmp_path / "heads.toml"
    path.write_text("K = [[1], [0]]\nV = [[1], [2]]\nscale = 1\n[[head]]\nQ = [[1], [1]]\n"
                    "[[head]]\nQ = [[1], [1]]\nmask = [[1, 0], [0, 1]]\n")
    assert main(["heads", str(path), "--format", "json"]) == 0
    per = json.loads(capsys.readouterr().out)["per_head"]
    assert per[0]["variants"] == {} and per[1]["variants"] == {"mask": [[1, 0], [0, 1]]}
    # head 0: e/(e + 1) = 0.731 on key 0; head 1 sees only its own key
    assert per[0]["weights"]["decimal"][1] == ["0.731", "0.269"]
    assert per[1]["weights"]["decimal"] == [["1", "0"], ["0", "1"]]


def test_check_targets_per_head_use_the_variant_step_names():
    problem = load_heads_example("mixed-variants")
    checker = HeadsChecker(problem)
    trace = attend_heads(problem).head(1)
    row = ", ".join(str(d) for d in trace.step("biased").decimals(3)[1])
    assert checker.check("head 1: biased[cat]", row).right
    assert not checker.check("head 1: biased[cat]", "0, 0, 0, 0").right
    assert checker.check("head 0: Q_rot[cat]", ", ".join(
        str(d) for d in attend_heads(problem).head(0).step("Q_rot").decimals(3)[1])).right
    missing = checker.check("head 2: bias[cat]", "1, 2, 3, 4")
    assert missing.code == "invalid"


def test_gqa_tiled_keeps_each_query_heads_variants():
    problem = load_heads_example("mixed-variants")
    tiled = problem.tiled()
    assert tiled.head_keys == problem.head_keys
    assert tiled.head_problems[1].alibi == problem.head_problems[1].alibi
    # head 1 reads key/value head 0 but the tiled mapping gives it head 1: its output is named gqa-tiled
    wrong = attend_heads(problem.with_kv_heads([0, 1, 0, 1], "tiled")).head(1)
    figure = ", ".join(str(d) for d in wrong.output.decimals(3)[3])
    verdict = HeadsChecker(problem).check("head 1: output[down]", figure)
    assert verdict.mistake == "gqa-tiled"


def test_examples_list_and_run_the_multihead_examples(capsys):
    assert main(["examples"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert set(heads_example_names()) <= set(listed)
    assert {"alibi-heads", "mixed-variants", "gqa-exercise"} <= set(heads_example_names())
    assert main(["examples", "--show", "alibi-heads"]) == 0
    assert 'alibi = "default"' in capsys.readouterr().out
    for name in heads_example_names():
        assert main(["heads", "--example", name, "--format", "json"]) == 0
        capsys.readouterr()
    assert main(["explain", "--example", "alibi-heads"]) == 2
    assert "symattn heads --example alibi-heads" in capsys.readouterr().err
