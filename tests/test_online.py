"""Online softmax (tiles = B or split points): FlashAttention's running maximum, rescale factors,
running sums and outputs as steps of the one Trace.

Cross-checks: an independent float64 online loop written here (FlashAttention's recurrence,
masks included) on small random problems; exact equality of the last block with the plain
weights and output; the hand-worked 1.5032 of e^(2−3) + e^(1−3) + e^0.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess

import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.check import Checker
from symattn.cli import main
from symattn.errors import ProblemError
from symattn.facts.claims import Claims
from symattn.facts.softmax_facts import same

DIGITS = sa.Rounding(digits=12)


def online_float64(logits: np.ndarray, V: np.ndarray, blocks: list[tuple[int, int]]):
    """FlashAttention's loop on one row of scaled scores (−inf where masked), in float64."""
    m, l, O = -math.inf, 0.0, np.zeros(V.shape[1])
    out = {"running_max": [], "rescale": [], "running_sum": [], "running_output": []}
    for b, (start, end) in enumerate(blocks):
        xs = logits[start:end]
        m_new = max(m, xs.max())
        if b == 0:
            alpha = 1.0
        elif m == -math.inf:
            alpha = 0.0                    # FlashAttention's e^(−∞): nothing seen before
        else:
            alpha = math.exp(m - m_new)
        p = np.where(np.isinf(xs), 0.0, np.exp(xs - (m_new if m_new > -math.inf else 0.0)))
        l = alpha * l + p.sum()
        O = alpha * O + p @ V[start:end]
        m = m_new
        for key, value in (("running_max", m), ("rescale", alpha), ("running_sum", l),
                           ("running_output", O.copy())):
            out[key].append(value)
    return out


def blocks_of(tiles, m: int) -> list[tuple[int, int]]:
    if isinstance(tiles, int):
        return [(s, min(s + tiles, m)) for s in range(0, m, tiles)]
    edges = [0, *tiles, m]
    return list(zip(edges[:-1], edges[1:]))


def as_float(d) -> float:
    return -math.inf if d is sa.NEG_INF else float(d.as_fraction())


MASKS = {
    "none": None,
    "causal": "causal",
    "window": {"window": 2},
    # row 3's first block (keys 0, 1) is fully masked: running max −∞, running sum 0
    "matrix": [[1, 0, 1, 0, 1], [1, 1, 0, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]],
}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("tiles", [1, 2, 3, [1, 3], [3]])
def test_online_steps_match_an_independent_float64_loop(seed, mask, tiles):
    rng = np.random.default_rng(seed)
    n, m = 4, 5
    Q, K = rng.integers(-2, 3, size=(n, 2)), rng.integers(-2, 3, size=(m, 2))
    V = rng.integers(-3, 4, size=(m, 2))
    mask_value = MASKS[mask]
    if mask == "causal" or mask == "window":
        n = m = 4
        Q, K, V = Q[:4], K[:4], V[:4]
    p = sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(), mask=mask_value, tiles=tiles)
    t = sa.attend(p)
    allowed = np.array(p.mask.tolist(), dtype=bool) if p.mask is not None else np.ones((n, m), bool)
    logits = np.where(allowed, (Q @ K.T) / math.sqrt(2), -math.inf)
    blocks = blocks_of(tiles, m)
    steps = {name: t.step(name).decimals(DIGITS) for name in ("running_max", "rescale", "running_sum")}
    outs = [t.step(f"running_output_{b}").decimals(DIGITS) for b in range(len(blocks))]
    for i in range(n):
        ref = online_float64(logits[i], V.astype(float), blocks)
        for name, got in steps.items():
            for b in range(len(blocks)):
                want = ref[name][b]
                if want == -math.inf:
                    assert got[i][b] is sa.NEG_INF
                else:
                    assert as_float(got[i][b]) == pytest.approx(want, rel=1e-9, abs=1e-12), (name, i, b)
        for b in range(len(blocks)):
            assert [as_float(d) for d in outs[b][i]] == pytest.approx(ref["running_output"][b].tolist(),
                                                                      rel=1e-9, abs=1e-12)
        # FlashAttention's last step, O / l, is the plain output
        out = t.output.decimals(DIGITS)[i]
        assert [as_float(d) for d in out] == pytest.approx((ref["running_output"][-1] / ref["running_sum"][-1]).tolist(),
                                                           rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("tiles", [1, 2, [2, 3]])
def test_last_block_is_exactly_the_plain_weights_and_output(tiles):
    p = sa.Problem(Q=[[1, 2], [0, -1], [2, 1]], K=[[1, 0], [2, 1], [-1, 1], [0, 2]],
                   V=[[1, 0], [0, 1], [2, 2], [3, -1]], mask=[[1, 1, 0, 1], [0, 1, 1, 1], [1, 1, 1, 1]],
                   tiles=tiles)
    t = sa.attend(p)
    last = len(p.tiles) - 1
    O, l = t.step(f"running_output_{last}"), t.running_sum
    for i in range(p.n):
        for c in range(p.d_v):
            assert same(O[i, c] / l[i, last], t.output[i, c])
        _, _, coeffs = t.online.run(i)
        for j in range(p.m):
            assert same(coeffs.get(j, sympy.S.Zero) / l[i, last], t.weights[i, j])


def test_hand_worked_logits_2_1_3():
    """e^(2−3) + e^(1−3) + e^0 = 1.5032…: block 0 (2, 1) then block 1 (3), the maximum grows."""
    p = sa.Problem(Q=[[1]], K=[[2], [1], [3]], V=[[1], [0], [2]], scale=1, tiles=[2],
                   tokens=["q"], key_tokens=["a", "b", "c"])
    t = sa.attend(p)
    e = sympy.E
    assert t.running_max.matrix.tolist() == [[2, 3]]
    assert t.rescale.matrix.tolist() == [[1, sympy.exp(-1)]]
    assert same(t.running_sum[0, 0], 1 + 1 / e) and same(t.running_sum[0, 1], 1 + 1 / e + e ** -2)
    assert [str(d) for d in t.running_sum.decimals(sa.Rounding(places=4))[0]] == ["1.3679", "1.5032"]
    rescale = t.rescale.decimals(sa.Rounding(places=3))[0]
    assert [str(d) for d in rescale] == ["1.000", "0.368"] and rescale[0].exact and not rescale[1].exact
    # O_0 = 1·1 + e^(−1)·0 = 1, O_1 = e^(−1)·1 + 1·2; output = O_1 / l_1 = (e^-1 + 2)/(1.5032…) ≈ 1.5752
    assert t.step("running_output_0")[0, 0] == 1
    assert str(t.step("running_output_1").decimal(0, 0, sa.Rounding(places=4))) == "2.3679"
    assert str(t.output.decimal(0, 0, sa.Rounding(places=4))) == "1.5752"
    # the rounded decimals of a tie are exact: 1 and 3 in the tied row of the example
    ex = sa.attend(sa.load_example("online-softmax"))
    assert ex.running_sum.matrix.tolist()[0] == [2, 3]
    assert all(d.exact for d in ex.running_sum.decimals(3)[0])


def test_a_row_whose_first_block_is_masked():
    """Window W = 1: row 2 sees only key 2, so block 0 (keys 0, 1) holds nothing: m = −∞,
    l = 0, O = 0, and the next rescale is e^(−∞) = 0 (FlashAttention's start)."""
    p = sa.Problem(Q=[[1], [2], [1]], K=[[1], [0], [3]], V=[[1], [2], [3]], scale=1,
                   mask={"window": 1}, tiles=2)
    t = sa.attend(p)
    assert t.running_max[2, 0] == sympy.S.NegativeInfinity and t.running_sum[2, 0] == 0
    assert t.rescale[2, 1] == 0 and t.running_max[2, 1] == 3 and t.running_sum[2, 1] == 1
    assert t.running_max.decimals(3)[2][0] is sa.NEG_INF
    assert t.step("running_output_0")[2, 0] == 0 and t.step("running_output_1")[2, 0] == 3
    text = sa.render_text(t) if hasattr(sa, "render_text") else str(t)
    assert "Block 0 (t0, t1): every key is masked for 't2'" in text


@pytest.mark.parametrize("tiles, words", [
    (0, "at least one key"), (-1, "at least one key"), (True, "tiles is True"), ("2", "tiles is '2'"),
    ([2, 1], "must increase"), ([1, 1], "must increase"), ([0], "outside 1..2"), ([3], "outside 1..2"),
    ([1.5], "whole numbers"),
])
def test_bad_tiles_are_one_line_errors(tiles, words):
    with pytest.raises(ProblemError) as err:
        sa.Problem(Q=[[1]], K=[[1], [2], [3]], V=[[1], [2], [3]], tiles=tiles)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_online_fact_is_checked_on_a_sink_problem_too():
    """tiles with a sink are supported (tests/test_combos.py): the fact checks the instance."""
    proof = sa.facts.prove("online-softmax-equals-softmax", sa.load_example("off-by-one-softmax"))
    assert proof.holds and "(exactly)" in proof.checks[0].text
    assert "sink logit σ" in proof.general[1].text and "SymPy: verified" in proof.general[1].text


def test_tiles_need_numbers_and_are_capped():
    with pytest.raises(ProblemError, match="tiles needs numbers"):
        sa.Problem(Q=[["a"]], K=[[1], [2]], V=[[1], [2]], tiles=1, symbols=["a"])
    big = np.ones((64, 1), dtype=int).tolist()
    with pytest.raises(ProblemError, match="MAX_ONLINE_TERMS"):
        sa.Problem(Q=big, K=big, V=big, tiles=1)


def test_bad_tiles_in_a_file_exit_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "t.toml"
    path.write_text("Q = [[1]]\nK = [[1], [2], [3]]\nV = [[1], [2], [3]]\ntiles = [2, 1]\n")
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split points must increase" in err and "Traceback" not in err
    path.write_text("Q = [[1]]\nK = [[1], [2], [3]]\nV = [[1], [2], [3]]\ntiles = 0\n")
    assert main(["explain", str(path)]) == 2
    assert "tiles is 0" in capsys.readouterr().err


def test_tiles_from_toml_and_subs(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("Q = [[1]]\nK = [[1], [2], [3]]\nV = [[1], [2], [3]]\ntiles = [1]\n")
    p = sa.Problem.from_toml(path)
    assert p.tiles == ((0, 1), (1, 3))
    assert p.subs({}).tiles == p.tiles
    assert sa.Problem(Q=[[1]], K=[[1], [2], [3]], V=[[1], [2], [3]], tiles=2).tiles == ((0, 2), (2, 3))


# -- the fact ---------------------------------------------------------------------------
def test_online_fact_holds_for_every_split():
    proof = sa.facts.prove("online-softmax-equals-softmax", sa.load_example("online-softmax"))
    assert proof.holds and "SymPy: verified" in proof.general[0].text
    assert "every one of the 4 splits of the 3 keys" in proof.checks[0].text and "(exactly)" in proof.checks[0].text
    assert "(exactly)" in proof.checks[1].text


def test_online_fact_without_rescaling_fails_with_a_counterexample():
    trace = sa.attend(sa.load_example("online-softmax"))
    bad = sa.facts.online_softmax_equals_softmax(trace, rescaled=False)
    assert bad.holds is False
    assert bad.counterexample == {"row": "q2", "blocks": "k1 | k2, k3", "step": "weights"}


def test_online_fact_refutes_a_claimed_output_computed_without_rescaling():
    """The no-rescale output of row q2 is (2, 1 + e^-1)/(2 + e^-1) ≈ 0.845, 0.578; the true
    one 0.910, 0.755."""
    problem = sa.load_example("online-softmax")
    good = Claims.from_mapping({"output": [["0.667", "0.667"], ["0.910", "0.755"]]})
    assert sa.facts.prove("online-softmax-equals-softmax", problem, good).holds
    wrong = Claims.from_mapping({"output": [["0.667", "0.667"], ["0.845", "0.578"]]})
    proof = sa.facts.prove("online-softmax-equals-softmax", problem, wrong)
    assert proof.holds is False
    assert proof.counterexample == {"row": "q2", "step": "output", "column": 0, "claimed": "0.845",
                                    "exact": "0.909969"}
    assert (1 + math.exp(-1)) / (1 + math.exp(-1) + math.exp(-2)) == pytest.approx(0.909969, abs=5e-7)


# -- the mistakes -----------------------------------------------------------------------
def test_online_no_rescale_is_named():
    checker = Checker(sa.load_example("online-softmax"))
    for target, figure in (("running_sum[q2, 1]", "2.37"), ("output[q2]", "0.845, 0.578"),
                           ("running_output_1[q2]", "2, 1.37")):
        verdict = checker.check(target, figure)
        assert verdict.code == "mistake" and verdict.mistake == "online-no-rescale", (target, verdict.message)


def test_early_rounding_of_the_running_sum_1_51():
    """A walkthrough prints 1.51 for e^(2−3) + e^(1−3) + e^0 = 1.5032…: 0.37 + 0.14 + 1."""
    checker = Checker(sa.load_example("online-softmax"))
    verdict = checker.check("running_sum[q2, 1]", "1.51")
    assert verdict.code != "rounded"
    assert "early-rounding (exponentials of the running sums rounded to 2 places first)" in verdict.message
    assert checker.check("running_sum[q2, 1]", "1.50").code == "rounded"
    # the rounded recurrence itself: (1 + 0.37)·0.37 + 1 = 1.5069 and 0.37 + 0.14 + 1 = 1.51
    from symattn.check.mistakes.online import OnlineMistakeSource

    source = OnlineMistakeSource(sa.attend(sa.load_example("online-softmax")), places=2)
    assert source.exact("running_sum", 1, 1) == sympy.Rational(15069, 10000)
    assert str(source.decimal("running_sum", 1, 1, sa.Rounding(places=2))) == "1.51"


# -- every view ---------------------------------------------------------------------------
def test_text_works_the_row_block_by_block(capsys):
    assert main(["explain", "--example", "online-softmax", "--digits", "4"]) == 0
    out = capsys.readouterr().out
    assert "Online softmax, block by block" in out
    assert "Row 'q2', block by block:" in out
    assert "The maximum grew, so the earlier sums shrink by e^(m[0] − m[1]) = e^(−1) ≈ 0.3679." in out
    assert "l[1] = e^(−1)·l[0] + 1 ≈ 1.503" in out


def test_lesson_row_cats_with_blocks_of_two(capsys):
    """The lesson's 'cats' row with B = 2: keys I, love then cats; the maximum (love) is in
    block 0, so the rescale factor is 1 and l_1 = l_0 + e^(−2/√3)."""
    lesson = sa.load_example("i-love-cats")
    p = sa.Problem(**{k: getattr(lesson, k) for k in ("X", "W_q", "W_k", "W_v")}, tokens=lesson.tokens,
                   tiles=2)
    t = sa.attend(p)
    assert [str(d) for d in t.running_sum.decimals(sa.Rounding(places=3))[2]] == ["1.010", "1.325"]
    text = str(t)
    assert "Block 0 (I, love): the largest scaled score seen so far is key 'love', m[0] = 12/√3 ≈ 6.93." in text
    assert "The maximum did not grow: the rescale factor is e^(m[0] − m[1]) = 1." in text
    assert "l[1] = 1·l[0] + e^(−2/√3) ≈ 1.33" in text


def test_json_has_the_online_steps(capsys):
    assert main(["explain", "--example", "online-softmax", "--format", "json", "--digits", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    steps = data["steps"]
    assert steps["running_sum"]["decimal"][1] == ["1.3679", "1.5032"]
    assert steps["rescale"]["exact"][1] == ["1", "exp(-1)"]
    assert sympy.sympify(steps["running_sum"]["exact"][1][1]) == 1 + sympy.exp(-1) + sympy.exp(-2)
    assert steps["running_output_1"]["shape"] == [2, 2]


def need_tex() -> None:
    if shutil.which("pdflatex") is None or shutil.which("pdftotext") is None:
        pytest.skip("pdflatex and pdftotext are needed")


def test_latex_compiles_and_reads_back(tmp_path):
    need_tex()
    pdf = tmp_path / "online.pdf"
    assert main(["explain", "--example", "online-softmax", "--pdf", "-o", str(pdf)]) == 0
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Online softmax, block by block" in text
    assert "The maximum grew, so the earlier sums shrink by" in text
    assert "[1.37, 1.14]" in text


def test_html_page_in_chromium(tmp_path):
    from browser import shared_browser

    path = tmp_path / "online.html"
    assert main(["explain", "--example", "online-softmax", "--format", "html", "-o", str(path)]) == 0
    browser = shared_browser()
    page = browser.open(path)
    text = page.page.inner_text("body")
    page.assert_clean()
    page.page.screenshot(path=str(tmp_path / "online.png"), full_page=True)
    page.close()
    assert "Online softmax, block by block" in text
    assert "Row 'q2', block by block:" in text
    assert re.search(r"0\.368", text)


def test_examples_list_online_softmax(capsys):
    assert main(["examples"]) == 0
    assert "online-softmax" in capsys.readouterr().out


@pytest.mark.parametrize("example, section", [("online-softmax", "Online softmax, block by block"),
                                              ("kv-cache", "KV-cache decoding")])
def test_every_format_lists_the_same_sections(example, section):
    """Text, LaTeX, JSON and HTML print the same outline, the variant's section before the checks."""
    from symattn.document.build.trace import build_document
    from symattn.document.printers.html import print_html
    from symattn.document.printers.json import document_json_text
    from symattn.document.trace_latex import render_latex
    from symattn.document.trace_text import render_text
    from outlines import html_outline, latex_outline, text_outline

    trace = sa.attend(sa.load_example(example))
    data = json.loads(document_json_text(build_document(trace)))
    outline = [(s["number"], s["title"]) for s in data["sections"]]
    assert text_outline(render_text(trace)) == outline
    assert latex_outline(render_latex(trace)) == outline
    assert html_outline(print_html(build_document(trace))) == outline
    assert [title for _, title in outline][-2:] == [section, "Checks, proved for this instance"]
