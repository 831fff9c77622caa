"""ALiBi and soft-capping on the one engine: the steps bias, biased and capped.

Every expected number comes from an independent computation written here
(numpy float64 on small random problems, mpmath, or worked by hand: the
hand-worked values are in the comments), never from symattn's own values.
"""

import json

import mpmath
import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.check import Checker
from symattn.cli import main
from symattn.errors import SymattnError
from symattn.limits import MAX_SCORE_MAGNITUDE


# -- the independent float64 reference --------------------------------------------
def alibi_bias(n: int, m: int, slope: float, symmetric: bool) -> np.ndarray:
    """ALiBi from its definition: query i at position i, key j at position j (both from 0)."""
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    return -slope * (np.abs(i - j) if symmetric else (i - j))


def reference(Q, K, V, scale, allowed, slope=None, symmetric=False, cap=None):
    logits = scale * (Q @ K.T)
    if slope is not None:
        logits = logits + alibi_bias(Q.shape[0], K.shape[0], slope, symmetric)
    if cap is not None:
        logits = cap * np.tanh(logits / cap)
    z = np.where(allowed, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    w = e / e.sum(axis=1, keepdims=True)
    return logits, w, w @ V


def decimals(step, places=12):
    return np.array([[float("-inf") if d is sa.NEG_INF else float(str(d)) for d in row]
                     for row in step.decimals(sa.Rounding(places=places))])


CONFIGS = {
    # name: (problem keys, slope, symmetric, cap, mask)
    "alibi-causal": ({"alibi": {"slope": "1/4"}, "mask": "causal"}, 0.25, False, None, "causal"),
    "alibi-symmetric": ({"alibi": {"slope": "1/2", "symmetric": True}}, 0.5, True, None, None),
    "alibi-no-mask": ({"alibi": {"slope": "3/4"}}, 0.75, False, None, None),
    "softcap": ({"softcap": 2}, None, False, 2.0, None),
    "both-causal": ({"alibi": {"slope": "1/2"}, "softcap": "3/2", "mask": "causal"}, 0.5, False, 1.5,
                    "causal"),
    "both-window": ({"alibi": {"slope": "1/8", "symmetric": True}, "softcap": 5,
                     "mask": {"window": 2, "causal": False}}, 0.125, True, 5.0, "window"),
}


def allowed_of(kind, n, m):
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    if kind == "causal":
        return j <= i
    if kind == "window":
        return np.abs(i - j) < 2
    return np.ones((n, m), dtype=bool)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("seed", range(3))
def test_logits_match_float64(config, seed):
    keys, slope, symmetric, cap, mask = CONFIGS[config]
    rng = np.random.default_rng(100 + seed)
    n, d = 5, 3
    Q, K, V = (rng.integers(-3, 4, size=(n, d)) for _ in range(3))
    t = sa.attend(sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(), **keys))
    allowed = allowed_of(mask, n, n)
    logits, w, o = reference(Q.astype(float), K.astype(float), V.astype(float), 1 / np.sqrt(d),
                             allowed, slope, symmetric, cap)
    assert t.logit_step == ("capped" if cap is not None else "biased")
    assert np.allclose(decimals(t.step(t.logit_step)), logits, atol=1e-11)
    if slope is not None:
        assert np.allclose(decimals(t.bias), alibi_bias(n, n, slope, symmetric), atol=0)
    assert np.allclose(decimals(t.weights), w, atol=1e-11)
    assert np.allclose(decimals(t.output), o, atol=1e-11)
    for i in range(n):
        assert abs(float(sum(decimals(t.weights)[i])) - 1) < 1e-10
        assert [j for j in range(n) if not allowed[i, j]] == \
            [j for j in range(n) if t.weights[i, j] == 0]


def test_cross_attention_positions_count_from_zero_on_both_sides():
    rng = np.random.default_rng(7)
    Q, K, V = rng.integers(-2, 3, size=(2, 2)), rng.integers(-2, 3, size=(4, 2)), rng.integers(-2, 3, size=(4, 2))
    t = sa.attend(sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(), alibi={"slope": "1/3"}))
    assert t.bias.matrix.tolist() == [[0, sympy.Rational(1, 3), sympy.Rational(2, 3), 1],
                                      [-sympy.Rational(1, 3), 0, sympy.Rational(1, 3), sympy.Rational(2, 3)]]
    _, w, o = reference(Q.astype(float), K.astype(float), V.astype(float), 1 / np.sqrt(2),
                        np.ones((2, 4), dtype=bool), 1 / 3)
    assert np.allclose(decimals(t.weights), w, atol=1e-11)
    assert np.allclose(decimals(t.output), o, atol=1e-11)


def test_alibi_with_a_log_scale_and_a_sink_match_float64():
    """Not algebraic (log 2 and a bias): the weights still come out right, the sink too."""
    Q, K, V = [[1, 0], [0, 1], [1, 1]], [[1, 1], [0, 2], [2, 0]], [[1, 0], [0, 1], [1, 1]]
    t = sa.attend(sa.Problem(Q=Q, K=K, V=V, scale="log(2)", alibi={"slope": "1/2"}, mask="causal",
                             sink=0))
    logits, _, _ = reference(np.array(Q, float), np.array(K, float), np.array(V, float), np.log(2),
                             np.ones((3, 3), bool), 0.5)
    z = np.where(np.tril(np.ones((3, 3), bool)), logits, -np.inf)
    e = np.exp(z)
    w = e / (e.sum(axis=1, keepdims=True) + 1.0)       # the sink logit 0 adds e^0
    assert np.allclose(decimals(t.weights), w, atol=1e-11)


# -- hand-worked numbers ----------------------------------------------------------
def test_lesson_with_alibi_slope_one_half_hand_worked(capsys):
    """By hand: scaled[love] = [4/√3, 16/√3, 12/√3], bias[love] = [−1/2, 0, 1/2] (causal:
    cats blocked), so weights[love, I] = 1/(1 + e^(12/√3 + 1/2)) = 1/(1 + e^7.428) = 0.000594.
    Row cats: biased = [4/√3 − 1, 12/√3 − 1/2, 10/√3] ≈ [1.309, 6.428, 5.774]; shifted =
    [−8/√3 − 1/2, 0, −2/√3 + 1/2] ≈ [−5.119, 0, −0.655]; e^ ≈ 0.00598, 1, 0.520; sum 1.526;
    weights 0.00392, 0.655, 0.341; output[cats] = 0.00392·[1,2,3] + 0.655·[2,8,0] + 0.341·[2,6,3]
    ≈ [2.00, 7.30, 1.03]."""
    t = sa.attend(sa.load_example("alibi"))
    s3 = sympy.sqrt(3)
    assert t.bias["love"] == sympy.Matrix([[-sympy.Rational(1, 2), 0, sympy.Rational(1, 2)]])
    assert sympy.simplify(t.biased["cats", "love"] - (12 / s3 - sympy.Rational(1, 2))) == 0
    assert sympy.simplify(t.shifted["cats", "I"] - (-8 / s3 - sympy.Rational(1, 2))) == 0
    assert [str(d) for d in t.weights.decimals(3)[1]] == ["0.000594", "0.999", "0"]
    assert [str(d) for d in t.weights.decimals(3)[2]] == ["0.00392", "0.655", "0.341"]
    assert [str(d) for d in t.output.decimals(3)[2]] == ["2.00", "7.30", "1.03"]
    assert [str(d) for d in t.biased.decimals(sa.Rounding(places=3))[2]] == ["1.309", "6.428", "5.774"]
    assert main(["explain", "--example", "alibi"]) == 0
    out = capsys.readouterr().out
    assert "6. ALiBi bias: bias = −1/2·(i − j)" in out
    assert "Row 'I': [−1/2·(0 − 0), −1/2·(0 − 1), −1/2·(0 − 2)] → [0, 1/2, 1]" in out
    assert "7. Biased scores: biased = scaled + bias" in out
    assert "masked = biased, −∞ where the mask blocks" in out
    assert "shifted = biased − max = [−8/√3 − 1/2, 0, −2/√3 + 1/2] ≈ [−5.12, 0, −0.655]" in out
    assert "e^(−8/√3 − 1/2) ≈ 0.00598" in out


def test_softcap_hand_worked():
    """By hand: scores [0, 2], scale 1, c = 1: capped = [0, tanh 2] with tanh 2 = (e⁴ − 1)/(e⁴ + 1)
    = 53.598/55.598 = 0.96403; e^0.96403 = 2.6222, so the weights are 1/3.6222 = 0.2761 and 0.7239."""
    t = sa.attend(sa.Problem(Q=[[1, 1]], K=[[0, 0], [1, 1]], V=[[1], [0]], scale=1, softcap=1))
    assert t.capped[0, 0] == 0 and t.capped[0, 1] == sympy.tanh(2)
    assert [str(d) for d in t.capped.decimals(5)[0]] == ["0", "0.96403"]
    assert [str(d) for d in t.weights.decimals(4)[0]] == ["0.2761", "0.7239"]
    assert str(t.output.decimals(4)[0][0]) == "0.2761"
    assert t.step_names[4:7] == ("scaled", "capped", "shifted")


def test_softcap_example_matches_mpmath():
    t = sa.attend(sa.load_example("softcap"))
    mpmath.mp.dps = 30
    r3 = mpmath.sqrt(3)
    z = [5 * mpmath.tanh(x / r3 / 5) for x in (4, 16, 12)]
    total = sum(mpmath.exp(x) for x in z)
    for j, x in enumerate(z):
        assert abs(mpmath.mpf(str(t.weights.decimal("love", j, 20))) - mpmath.exp(x) / total) < 1e-19


# -- ties: equal logits give exact 1/k ---------------------------------------------
def test_softcap_ties_are_exact():
    # all scores 0: every capped logit is 0, the weights are exactly 1/3 and the output the mean
    t = sa.attend(sa.Problem(Q=[[0, 0]], K=[[1, 0], [0, 1], [1, 1]], V=[[0], [1], ["1/2"]],
                             softcap=3))
    assert all(t.weights[0, j] == sympy.Rational(1, 3) for j in range(3))
    assert [str(d) for d in t.weights.decimals(5)[0]] == ["0.33333"] * 3
    # the output is exactly 1/2, on the boundary of a rounding to 0 places: decided, no loop
    assert t.output.decimal(0, 0, sa.Rounding(places=0)).mantissa in (0, 1)
    half = t.output.decimal(0, 0, sa.Rounding(places=1))
    assert half.exact and str(half) == "0.5"
    # a tie below the cap: keys 0 and 1 share tanh(1), the maximum: exp is exactly 1 for both
    t = sa.attend(sa.Problem(Q=[[1, 1]], K=[[1, 0], [0, 1], [0, 0]], V=[[1], [2], [3]],
                             scale=1, softcap=1))
    assert t.ties(0) == frozenset({0, 1})
    assert t.exp[0, 0] == 1 and t.exp[0, 1] == 1
    assert t.weights[0, 0] == t.weights[0, 1]


def test_symmetric_alibi_ties_are_exact():
    # zero queries: row 1's logits are the bias [−s, 0, −s]: keys 0 and 2 tie exactly
    t = sa.attend(sa.Problem(Q=[[0], [0], [0]], K=[[1], [2], [3]], V=[[1], [5], [3]],
                             alibi={"slope": "1/2", "symmetric": True}))
    assert t.tie_groups(1) == ((0, 2), (1,))
    assert t.weights[1, 0] == t.weights[1, 2]
    # row 0 ties nothing; with slope 0 impossible (refused), a constant row is a full tie
    t = sa.attend(sa.Problem(Q=[[0], [0]], K=[[1], [1]], V=[[1], [2]], alibi={"slope": 1},
                             mask=[[1, 0], [1, 1]]))
    assert t.weights[0, 0] == 1 and str(t.weights.decimal(0, 0, 3)) == "1"


# -- every view shows the steps ---------------------------------------------------
def test_text_and_json_views(capsys):
    assert main(["explain", "--example", "softcap"]) == 0
    out = capsys.readouterr().out
    assert "6. Soft-capped logits: capped = 5·tanh(scaled / 5)" in out
    assert "Row 'I': [2/√3, 4/√3, 4/√3] → [5·tanh((2/√3)/5)" in out
    assert "capped[cats] = [5·tanh((4/√3)/5)" in out
    assert "shifted = capped − max" in out
    assert main(["explain", "--example", "alibi", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["steps"])[8:12] == ["scaled", "bias", "biased", "masked"]
    assert data["steps"]["bias"]["exact"][2] == ["-1", "-1/2", "0"]
    assert data["steps"]["bias"]["formula"] == "bias = −1/2·(i − j)"
    got = sympy.sympify(data["steps"]["weights"]["exact"][2][1])
    assert abs(float(got) - 0.655488) < 1e-6


def test_document_json_has_the_sections():
    from symattn.document.build.trace import build_document
    from symattn.document.printers.json import JsonPrinter

    doc = JsonPrinter().print(build_document(sa.attend(sa.Problem(
        Q=[[1, 0]], K=[[1, 0], [0, 1]], V=[[1], [2]], alibi={"slope": "1/4"}, softcap=4))))
    keys = [s["key"] for s in doc["sections"]]
    assert keys[keys.index("scaled") + 1:keys.index("scaled") + 4] == ["bias", "biased", "capped"]
    softmax = next(s for s in doc["sections"] if s["key"] == "softmax")
    assert softmax["blocks"][-1]["logit"] == "capped"


def test_latex_compiles_with_the_steps(tmp_path):
    from test_pdf import need_tex, pdf_text

    need_tex()
    from symattn.document.pdf import compile_tex
    from symattn.document.trace_latex import render_latex

    problem = sa.Problem(Q=[[1, 0], [0, 1], [1, 1]], K=[[1, 0], [0, 1], [1, 1]], V=[[1], [2], [3]],
                         alibi={"slope": "1/4", "symmetric": True}, softcap=3, mask="causal",
                         title="ALiBi and a cap")
    tex = render_latex(sa.attend(problem))
    assert r"5 \tanh" not in tex and r"3 \tanh\left(" in tex and r"\left|0 - 1\right|" in tex
    pdf = tmp_path / "logits.pdf"
    pdf.write_bytes(compile_tex(tex, "logits"))
    text = pdf_text(pdf)
    for words in ("ALiBi bias", "Biased scores", "Soft-capped logits", "tanh"):
        assert words in text


@pytest.fixture(scope="module")
def browser():
    from browser import shared_browser

    yield shared_browser()


def test_html_page_shows_the_steps(tmp_path, browser):
    page = tmp_path / "alibi.html"
    assert main(["explain", "--example", "alibi", "--format", "html", "-o", str(page)]) == 0
    rendered = browser.open(page)
    rendered.assert_clean()
    text = rendered.page.inner_text("body")
    assert "ALiBi bias" in text and "Biased scores" in text
    assert "shifted = biased − max" in text
    page = tmp_path / "softcap.html"
    assert main(["explain", "--example", "softcap", "--format", "html", "-o", str(page)]) == 0
    rendered = browser.open(page)
    rendered.assert_clean()
    assert "Soft-capped logits" in rendered.page.inner_text("body")
    assert rendered.page.locator("mi", has_text="tanh").count() > 0


# -- check ------------------------------------------------------------------------
def test_check_figures_of_the_new_steps():
    alibi = Checker(sa.load_example("alibi"))
    assert alibi.check("biased[love]", "1.81, 9.24, 7.43").code == "rounded"
    assert alibi.check("bias[cats]", "-1, -1/2, 0").code == "exact"
    wrong = alibi.check("biased[cats, I]", "1.81")       # 4/√3 − 1 ≈ 1.31
    assert not wrong.right
    capped = Checker(sa.load_example("softcap"))
    assert capped.check("capped[love, love]", "4.76").code == "rounded"
    assert capped.check("capped[love, love]", "4.75").code == "last-digit"
    assert capped.check("weights[love]", "0.0417, 0.561, 0.397").code == "rounded"


def test_check_cli_exit_codes(tmp_path, capsys):
    figures = tmp_path / "figures.toml"
    figures.write_text('example = "alibi"\n[[figure]]\ntarget = "biased[love, love]"\ntext = "9.24"\n'
                       '[[figure]]\ntarget = "weights[cats]"\ntext = "0.00392, 0.655, 0.341"\n')
    code = main(["check", str(figures)])
    out = capsys.readouterr().out
    assert code == 0, out


# -- bad inputs: one line, exit 2 --------------------------------------------------
@pytest.mark.parametrize("extra, words", [
    ("softcap = -1", "softcap is -1: give a cap c > 0"),
    ("softcap = 0", "softcap is 0: give a cap c > 0"),
    ("softcap = true", "softcap is True"),
    ('softcap = "c"', "unknown name 'c' in softcap"),
    ('alibi = { slope = "1/4+" }', "in alibi slope"),
    ('alibi = { slope = "__import__(1)" }', "unknown function '__import__' in alibi slope"),
    ('alibi = { slope = "1/4", causal = true }', "alibi has the unknown key 'causal'"),
    ("alibi = { symmetric = true }", "alibi has no slope"),
    ("alibi = { slope = -1 }", "alibi slope is -1: give a slope > 0"),
    ('alibi = { slope = "1/4", symmetric = "yes" }', "alibi symmetric is 'yes'"),
    ('alibi = { slope = "10^7" }', "magnitude cap"),
])
def test_bad_keys_are_one_line_errors(tmp_path, capsys, extra, words):
    path = tmp_path / "bad.toml"
    path.write_text(f"Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n{extra}\n")
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_bias_counts_in_the_magnitude_budget():
    big = 10 ** 6          # d_k·max|Q|·max|K|·|scale| = 10^12: exactly at the cap
    sa.Problem(Q=[[big], [0]], K=[[big], [0]], V=[[1], [1]], scale=1)
    with pytest.raises(SymattnError) as err:
        sa.Problem(Q=[[big], [0]], K=[[big], [0]], V=[[1], [1]], scale=1, alibi={"slope": 1})
    assert "slope·(max(n, m) − 1)" in str(err.value) and str(MAX_SCORE_MAGNITUDE)[:1] in str(err.value)


def test_python_keywords_symbols_and_subs():
    p = sa.Problem(Q=[[1], [2]], K=[[1], [0]], V=[[1], [2]], alibi={"slope": "a"}, symbols=["a"],
                   softcap=2)
    t = sa.attend(p)
    a = sympy.Symbol("a")
    assert {str(x) for x in t.symbols_of("bias")} == {"a"}
    assert {str(x) for x in t.bias[1, 0].free_symbols} == {"a"}
    with pytest.raises(SymattnError):
        t.weights.decimals(3)
    numeric = sa.attend(p.subs({"a": "1/4"}))
    direct = sa.attend(sa.Problem(Q=[[1], [2]], K=[[1], [0]], V=[[1], [2]], alibi={"slope": "1/4"},
                                  softcap=2))
    assert numeric.weights.matrix == direct.weights.matrix
    assert p.subs({"a": 1}).softcap == 2 and p.subs({"a": 1}).alibi.slope == 1
    assert sa.Problem(Q=[[1]], K=[[1]], V=[[1]], alibi="1/4").alibi.slope == sympy.Rational(1, 4)


def test_plain_problems_keep_their_steps():
    t = sa.attend(sa.load_example("i-love-cats"))
    assert t.logit_step == "scaled" and "bias" not in t.step_names and "capped" not in t.step_names
    assert t.engine.plain


def test_examples_are_listed(capsys):
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert "alibi " in out and "softcap " in out
