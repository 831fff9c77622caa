"""KV-cache decoding (decode = { prefill = P }): decode steps beside full causal attention.

Cross-checks: an independent float64 KV-cache loop written here (project the new row, append
to the caches, attend over them) on small random problems; exact equality with the causal
rows; the work counts of the issue (4² + 5² + 6² against 4 + 5 + 6).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

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


def kv_cache_loop(X: np.ndarray, Wq: np.ndarray, Wk: np.ndarray, Wv: np.ndarray, prefill: int):
    """Prefill the cache with the prompt, then decode token by token, in float64."""
    K_cache, V_cache = list(X[:prefill] @ Wk), list(X[:prefill] @ Wv)
    steps = {}
    for t in range(prefill, len(X)):
        q, k, v = X[t] @ Wq, X[t] @ Wk, X[t] @ Wv
        K_cache.append(k)
        V_cache.append(v)
        K, V = np.array(K_cache), np.array(V_cache)
        scores = K @ q
        z = scores / math.sqrt(Wq.shape[1])
        w = np.exp(z - z.max())
        w /= w.sum()
        steps[t] = {"q": q, "K_cache": K, "V_cache": V, "scores": scores, "weights": w, "output": w @ V}
    return steps


def floats(step) -> np.ndarray:
    return np.array([[float(d.as_fraction()) for d in row] for row in step.decimals(DIGITS)])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("prefill", [1, 2, 4])
def test_decode_steps_match_an_independent_float64_loop(seed, prefill):
    rng = np.random.default_rng(seed)
    n, d_model, d_k, d_v = 5, 3, 2, 3
    X = rng.integers(-2, 3, size=(n, d_model))
    Wq, Wk, Wv = (rng.integers(-2, 3, size=(d_model, d)) for d in (d_k, d_k, d_v))
    p = sa.Problem(X=X.tolist(), W_q=Wq.tolist(), W_k=Wk.tolist(), W_v=Wv.tolist(),
                   decode={"prefill": prefill})
    t = sa.attend(p)
    ref = kv_cache_loop(X.astype(float), Wq.astype(float), Wk.astype(float), Wv.astype(float), prefill)
    assert p.mask_kind == "causal"
    for pos, want in ref.items():
        for part, value in want.items():
            got = floats(t.step(f"decode_{pos}_{part}"))
            assert got == pytest.approx(np.atleast_2d(value), rel=1e-9, abs=1e-12), (pos, part)
        # the no-cache reference: row pos of full causal attention, exactly
        for j in range(n):
            expected = t.step(f"decode_{pos}_weights")[0, j] if j <= pos else 0
            assert same(t.weights[pos, j], expected)
        for c in range(d_v):
            assert same(t.step(f"decode_{pos}_output")[0, c], t.output[pos, c])


def test_work_counts_after_a_three_token_prompt():
    p = sa.load_example("kv-cache")
    w = work_counts(p)
    assert (w.prefill, w.tokens, w.steps) == (3, 6, 3)
    assert w.score_interactions_with_cache == 4 + 5 + 6 == 15
    assert w.score_interactions_without_cache == 4 ** 2 + 5 ** 2 + 6 ** 2 == 77
    assert w.projection_rows_with_cache == 9 and w.projection_rows_without_cache == 3 * 15
    assert w.cache_elements == 6 * (2 + 2) and w.cache_elements_per_step == (16, 20, 24)


def test_decode_step_shapes_and_names():
    t = sa.attend(sa.load_example("kv-cache"))
    assert t.step("decode_3_K_cache").shape == (4, 2) and t.step("decode_5_V_cache").shape == (6, 2)
    assert t.step("decode_4_scores").col_labels == ("I", "love", "cats", "and", "dogs")
    assert t.step("decode_4_q").row_labels == ("dogs",)
    assert [n for n in t.step_names if n.startswith("decode_3")] == [
        "decode_3_q", "decode_3_k", "decode_3_v", "decode_3_K_cache", "decode_3_V_cache",
        "decode_3_scores", "decode_3_weights", "decode_3_output"]
    # hand-worked: x_3 = [1, −1], W_q = I so q_3 = [1, −1]; K rows [1,1], [0,1], [1,2], [1,0]
    assert t.step("decode_3_scores").matrix.tolist() == [[0, -1, -1, 1]]
    # weights ∝ e^(s/√2): 1, e^(−1/√2), e^(−1/√2), e^(1/√2)
    e = [1.0, math.exp(-1 / math.sqrt(2)), math.exp(-1 / math.sqrt(2)), math.exp(1 / math.sqrt(2))]
    shown = [str(d) for d in t.step("decode_3_weights").decimals(sa.Rounding(places=3))[0]]
    assert shown == [f"{x / sum(e):.3f}" for x in e] == ["0.249", "0.123", "0.123", "0.505"]


@pytest.mark.parametrize("keys, words", [
    ({"decode": {"prefill": 6}}, "nothing is left to decode"),
    ({"decode": {"prefill": 9}}, "nothing is left to decode"),
    ({"decode": {"prefill": 0}}, "P ≥ 1"),
    ({"decode": {"prefill": True}}, "P ≥ 1"),
    ({"decode": {"prompt": 2}}, "unknown key 'prompt'"),
    ({"decode": 2}, "decode = { prefill = P }"),
    ({"decode": {"prefill": 2}, "mask": {"window": 2, "causal": False}}, "remove causal = false"),
    ({"decode": {"prefill": 2}, "mask": [[1] * 6] * 6}, "remove the mask"),
    ({"decode": {"prefill": 2}, "mask": "none"}, "remove the mask"),
])
def test_bad_decode_keys_are_one_line_errors(keys, words):
    base = sa.load_example("kv-cache")
    inputs = {k: getattr(base, k) for k in ("X", "W_q", "W_k", "W_v")}
    with pytest.raises(ProblemError) as err:
        sa.Problem(**inputs, **keys)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_decode_needs_x_and_self_attention():
    with pytest.raises(ProblemError, match="decode needs self-attention from X"):
        sa.Problem(Q=[[1], [2]], K=[[1], [2]], V=[[1], [2]], decode={"prefill": 1})
    with pytest.raises(ProblemError, match="remove X_kv"):
        sa.Problem(X=[[1], [2]], X_kv=[[1], [2]], W_q=[[1]], W_k=[[1]], W_v=[[1]], decode={"prefill": 1})
    # the causal mask, given or implied, is accepted; a rebuilt problem passes it as a matrix
    p = sa.Problem(X=[[1], [2], [3]], W_q=[[1]], W_k=[[1]], W_v=[[1]], decode={"prefill": 1}, mask="causal")
    again = sa.Problem(X=[[1], [2], [3]], W_q=[[1]], W_k=[[1]], W_v=[[1]], decode={"prefill": 1},
                       mask=p.mask.tolist())
    assert again.prefill == 1 and p.subs({}).decode_value == {"prefill": 1}


def test_bad_decode_in_a_file_exits_2(tmp_path, capsys):
    path = tmp_path / "d.toml"
    path.write_text('Q = [[1], [2]]\nK = [[1], [2]]\nV = [[1], [2]]\ndecode = { prefill = 1 }\n')
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "decode needs self-attention from X" in err
    path.write_text('X = [[1], [2]]\nW_q = [[1]]\nW_k = [[1]]\nW_v = [[1]]\ndecode = { prefill = 2 }\n')
    assert main(["explain", str(path)]) == 2
    assert "nothing is left to decode" in capsys.readouterr().err


# -- the fact -------------------------------------------------------------------------------
def test_kv_cache_fact_holds_and_a_false_claim_fails():
    problem = sa.load_example("kv-cache")
    proof = sa.facts.prove("kv-cache-equals-causal-row", problem)
    assert proof.holds and "verified" in proof.general[0].text
    assert len(proof.checks) == 3 and all("(exactly)" in line.text for line in proof.checks)
    trace = sa.attend(problem)
    rows = [[str(d) for d in row] for row in trace.output.decimals(sa.Rounding(places=3))]
    assert sa.facts.prove("kv-cache-equals-causal-row", trace, Claims.from_mapping({"output": rows})).holds
    # claim step 3 attended over the whole sequence (no causal mask): its output differs
    full = sa.attend(sa.Problem(**{k: getattr(problem, k) for k in ("X", "W_q", "W_k", "W_v")}))
    wrong = [list(r) for r in rows]
    wrong[3] = [str(d) for d in full.output.decimals(sa.Rounding(places=3))[3]]
    bad = sa.facts.prove("kv-cache-equals-causal-row", trace, Claims.from_mapping({"output": wrong}))
    assert bad.holds is False
    assert bad.counterexample["row"] == "and" and bad.counterexample["step"] == "output"
    nothing = sa.facts.prove("kv-cache-equals-causal-row", sa.load_example("i-love-cats"))
    assert nothing.holds and "no decode key" in nothing.checks[0].text


def test_check_targets_name_decode_steps():
    checker = Checker(sa.load_example("kv-cache"))
    assert checker.check("decode_3_weights", "0.249, 0.123, 0.123, 0.505").code == "rounded"
    assert checker.check("decode_3_weights[and, cats]", "0.123").code == "rounded"
    assert checker.check("decode_3_output", "0.618, -0.519").code == "rounded"
    assert checker.check("decode_3_scores", "0, -1, -1, 1").right
    assert not checker.check("decode_3_weights[and, I]", "0.30").right


# -- every view -----------------------------------------------------------------------------
def test_text_shows_steps_and_work_counts(capsys):
    assert main(["explain", "--example", "kv-cache"]) == 0
    out = capsys.readouterr().out
    assert "KV-cache decoding" in out
    assert "Decode step 3, token 'and': the cache now holds 4 keys (I, love, cats, and)." in out
    flat = " ".join(out.split())
    assert "score dot products 15 with the cache (4 + 5 + 6) against 77 without (4² + 5² + 6²" in flat
    assert "the cache ends with 24 numbers per layer and head" in flat


def test_json_has_the_decode_steps(capsys):
    assert main(["explain", "--example", "kv-cache", "--format", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps["decode_3_weights"]["decimal"] == [["0.249", "0.123", "0.123", "0.505"]]
    assert steps["decode_5_K_cache"]["shape"] == [6, 2]
    assert steps["weights"]["decimal"][3][:4] == steps["decode_3_weights"]["decimal"][0]
    assert sympy.sympify(steps["decode_3_scores"]["exact"][0][3]) == 1


def test_latex_compiles_and_reads_back(tmp_path):
    if shutil.which("pdflatex") is None or shutil.which("pdftotext") is None:
        pytest.skip("pdflatex and pdftotext are needed")
    pdf = tmp_path / "kv.pdf"
    assert main(["explain", "--example", "kv-cache", "--pdf", "-o", str(pdf)]) == 0
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "KV-cache decoding" in text
    assert "Decode step 5, token" in text
    assert "0.505" in text


def test_html_page_in_chromium(tmp_path):
    from browser import shared_browser

    path = tmp_path / "kv.html"
    assert main(["explain", "--example", "kv-cache", "--format", "html", "-o", str(path)]) == 0
    browser = shared_browser()
    page = browser.open(path)
    text = page.page.inner_text("body")
    page.assert_clean()
    page.close()
    assert "KV-cache decoding" in text
    assert "the cache ends with 24 numbers per layer and head" in " ".join(text.split())


def test_examples_list_kv_cache(capsys):
    assert main(["examples"]) == 0
    assert "kv-cache" in capsys.readouterr().out
