"""Attention variants on the one engine: sliding windows, and the mask mistakes.

Every expected number comes from an independent computation written here
(numpy float64 on small mild problems, or mpmath at 40 digits rounded half
away from zero with the decimal module), never from symattn's own values.
"""

from decimal import ROUND_HALF_UP, Decimal, localcontext

import mpmath
import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.check import Checker
from symattn.check.mistakes.catalog import Mistakes
from symattn.cli import main
from symattn.errors import ProblemError

LESSON_X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=float)
LESSON_WQ = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=float)
LESSON_WK = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=float)
LESSON_WV = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=float)


# -- the independent float64 reference --------------------------------------------
def band(n: int, m: int, width: int, causal: bool) -> np.ndarray:
    """Mistral's window, written from its definition: W keys ending at the query itself."""
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    return ((j <= i) & (j > i - width)) if causal else (np.abs(i - j) < width)


def softmax_rows(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    z = np.where(allowed, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def reference(Q, K, V, scale, allowed):
    w = softmax_rows(scale * (Q @ K.T), allowed)
    return w, w @ V


def decimals(step, places=12):
    return np.array([[float(str(d)) for d in row]
                     for row in step.decimals(sa.Rounding(places=places))])


def rounded(x, places: int) -> str:
    """x (computed with at least places + 10 digits) rounded half away from zero."""
    d = Decimal(mpmath.nstr(x, places + 10, min_fixed=-50, max_fixed=50))
    with localcontext() as ctx:
        ctx.prec = 100
        return str(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


# -- sliding window ---------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_window_matches_float64(seed, causal):
    rng = np.random.default_rng(seed)
    n, d = 5, 3
    width = int(rng.integers(1, 4))
    Q, K, V = (rng.integers(-3, 4, size=(n, d)) for _ in range(3))
    p = sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(),
                   mask={"window": width, "causal": causal})
    t = sa.attend(p)
    allowed = band(n, n, width, causal)
    w, o = reference(Q.astype(float), K.astype(float), V.astype(float), 1 / np.sqrt(d), allowed)
    assert np.allclose(decimals(t.weights), w, atol=1e-11)
    assert np.allclose(decimals(t.output), o, atol=1e-11)
    # blocked weights are exactly 0, and each row sees the keys of its band only
    for i in range(n):
        assert [j for j in range(n) if t.is_allowed(i, j)] == list(np.flatnonzero(allowed[i]))
        for j in range(n):
            if not allowed[i, j]:
                assert t.weights[i, j] == 0


def test_window_counts_w_keys_including_itself():
    p = sa.Problem(Q=[[1]] * 6, K=[[1]] * 6, V=[[1]] * 6, mask={"window": 3})
    assert [sum(int(p.mask[i, j]) for j in range(6)) for i in range(6)] == [1, 2, 3, 3, 3, 3]
    assert [j for j in range(6) if p.mask[4, j]] == [2, 3, 4]      # 4 − 3 < j ≤ 4
    both = sa.Problem(Q=[[1]] * 6, K=[[1]] * 6, V=[[1]] * 6, mask={"window": 2, "causal": False})
    assert [j for j in range(6) if both.mask[3, j]] == [2, 3, 4]   # |3 − j| < 2


def test_window_is_a_mask():
    """window-is-a-mask: the window problem equals causal attention with the band mask."""
    rng = np.random.default_rng(7)
    Q, K, V = (rng.integers(-2, 3, size=(4, 2)).tolist() for _ in range(3))
    windowed = sa.attend(sa.Problem(Q=Q, K=K, V=V, mask={"window": 2}))
    banded = sa.attend(sa.Problem(Q=Q, K=K, V=V, mask=band(4, 4, 2, True).astype(int).tolist()))
    for step in ("weights", "output"):
        assert windowed.step(step).matrix == banded.step(step).matrix
    # and a window as wide as the sequence is the causal mask
    wide = sa.attend(sa.Problem(Q=Q, K=K, V=V, mask={"window": 4}))
    causal = sa.attend(sa.Problem(Q=Q, K=K, V=V, mask="causal"))
    assert wide.weights.matrix == causal.weights.matrix


def test_window_example_hand_worked():
    """Row 'sat' of the built-in example: scores with 'cat' and 'sat' are 2 and 1 at scale 1/2,
    so its weights are 1/(1 + e^(−1/2)) = 0.6225 and e^(−1/2)/(1 + e^(−1/2)) = 0.3775."""
    t = sa.attend(sa.load_example("sliding-window"))
    a = 1 / (1 + mpmath.exp(mpmath.mpf(-1) / 2))
    row = [str(d) for d in t.weights.decimals(sa.Rounding(places=4))[2]]
    assert row == ["0.0000", rounded(a, 4), rounded(1 - a, 4), "0.0000", "0.0000"]
    assert row[1:3] == ["0.6225", "0.3775"]
    assert t.problem.window == (2, True)


def test_window_from_toml_and_json(tmp_path, capsys):
    path = tmp_path / "w.toml"
    path.write_text('Q = [[1, 0], [0, 1], [1, 1]]\nK = [[1, 0], [0, 1], [1, 1]]\n'
                    'V = [[1], [2], [3]]\nmask = { window = 2, causal = false }\n')
    p = sa.Problem.from_toml(path)
    assert p.window == (2, False)
    assert p.mask.tolist() == [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
    assert p.subs({}).window == (2, False)         # a window stays a window
    assert main(["explain", str(path)]) == 0
    assert "sliding window W = 2, both sides (keys |i − j| < 2)" in capsys.readouterr().out


@pytest.mark.parametrize("mask, words", [
    ({"window": 0}, "W ≥ 1"), ({"window": True}, "W ≥ 1"), ({"window": "2"}, "W ≥ 1"),
    ({"width": 2}, "unknown key 'width'"), ({"window": 2, "causal": "yes"}, "true or false"),
])
def test_bad_windows_are_one_line_errors(mask, words):
    with pytest.raises(ProblemError) as err:
        sa.Problem(Q=[[1]], K=[[1]], V=[[1]], mask=mask)
    assert words in str(err.value) and "\n" not in str(err.value)


# -- the mask mistakes --------------------------------------------------------------
def lesson_logits() -> np.ndarray:
    Q, K = LESSON_X @ LESSON_WQ, LESSON_X @ LESSON_WK
    return (Q @ K.T) / np.sqrt(3)


def test_mask_after_softmax_the_lesson_row_love():
    """Softmax over all keys, then the blocked key zeroed, not renormalised: 0.00, 0.91, 0."""
    full = softmax_rows(lesson_logits(), np.ones((3, 3), bool))
    wrong = np.where(np.tril(np.ones((3, 3))) > 0, full, 0.0)
    assert [f"{x:.2f}" for x in wrong[1]] == ["0.00", "0.91", "0.00"]
    v = Checker(sa.load_example("i-love-cats-causal")).check("weights[love]", "0.00, 0.91, 0")
    assert v.code == "mistake" and v.mistake == "mask-after-softmax"
    # its output is that row times V, summing to less than the right one
    trace = sa.attend(sa.load_example("i-love-cats-causal"))
    source = next(m.source for m in Mistakes(trace).fixed if m.code == "mask-after-softmax")
    out = wrong @ (LESSON_X @ LESSON_WV)
    got = [float(str(source.decimal("output", 1, c, sa.Rounding(places=10)))) for c in range(3)]
    assert np.allclose(got, out[1], atol=1e-9)


def test_masked_by_zero_the_lesson_row_i():
    """Blocked scores set to 0 instead of −∞: row 'I' becomes 0.61, 0.19, 0.19."""
    logits = np.where(np.tril(np.ones((3, 3))) > 0, lesson_logits(), 0.0)
    wrong = softmax_rows(logits, np.ones((3, 3), bool))
    assert [f"{x:.2f}" for x in wrong[0]] == ["0.61", "0.19", "0.19"]
    v = Checker(sa.load_example("i-love-cats-causal")).check("weights[I]", "0.61, 0.19, 0.19")
    assert v.code == "mistake" and v.mistake == "masked-by-zero"


def test_window_off_by_one_is_named():
    """attention-gym's q − kv ≤ W counts W + 1 keys: row 'sat' with 3 keys instead of 2."""
    p = sa.load_example("sliding-window")
    Q, K, V = (np.array(m.tolist(), dtype=float) for m in (p.Q_given, p.K_given, p.V_given))
    wide = softmax_rows(0.5 * (Q @ K.T), band(5, 5, 3, True))
    text = ", ".join(f"{x:.2f}" for x in wide[2])
    assert text == "0.38, 0.38, 0.23, 0.00, 0.00"
    v = Checker(p).check("weights[sat]", text)
    assert v.code == "mistake" and v.mistake == "window-off-by-one"
    assert "3 keys instead of 2" in v.message
    assert Checker(p).check("weights[sat]", "0.00, 0.62, 0.38, 0, 0").right


def test_no_mask_no_mask_mistakes():
    codes = {m.code for m in Mistakes(sa.attend(sa.load_example("i-love-cats"))).fixed}
    assert not codes & {"mask-after-softmax", "masked-by-zero", "window-off-by-one"}


# -- tanh, cos, sin: read exactly, certified (soft-capping and RoPE need them) ------------
@pytest.mark.parametrize("text, reference", [
    ("tanh(1/2)", lambda: mpmath.tanh(mpmath.mpf(1) / 2)),
    ("2*tanh(3/2)", lambda: 2 * mpmath.tanh(mpmath.mpf(3) / 2)),
    ("cos(1)", lambda: mpmath.cos(1)),
    ("sin(2)*3/2", lambda: mpmath.sin(2) * 3 / 2),
    ("cos(10000^(-1/2))", lambda: mpmath.cos(mpmath.mpf(1) / 100)),
    ("-sin(-7/3)", lambda: mpmath.sin(mpmath.mpf(7) / 3)),
])
def test_tanh_cos_sin_are_read_and_certified(text, reference):
    from symattn.exact.parser import parse_expression

    value = parse_expression(text)
    with mpmath.workdps(60):
        expected = rounded(reference(), 30)
    assert str(sa.certify(value, sa.Rounding(places=30))) == expected


def test_cos_of_a_rational_multiple_of_pi_is_exact():
    from symattn.exact.parser import parse_expression

    assert parse_expression("cos(pi/3)") == sympy.Rational(1, 2)
    assert str(sa.certify(parse_expression("sin(pi/6)"), sa.Rounding(places=2))) == "0.50"


@pytest.mark.parametrize("text, words", [
    ("cos(20000)", "over 10,000"), ("tanh", "needs an argument"), ("sin(1, 2)", "takes 1 argument"),
])
def test_trig_caps_are_one_line_errors(text, words):
    from symattn.exact.parser import parse_expression

    with pytest.raises(sa.SymattnError) as err:
        parse_expression(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_problem_entries_may_be_cos_and_sin():
    """A query [cos 1, sin 1] against the identity keys, against float64."""
    p = sa.Problem(Q=[["cos(1)", "sin(1)"]], K=[[1, 0], [0, 1]], V=[[1], [2]])
    q = np.array([np.cos(1.0), np.sin(1.0)])
    w, o = reference(q[None, :], np.eye(2), np.array([[1.0], [2.0]]), 1 / np.sqrt(2),
                     np.ones((1, 2), bool))
    t = sa.attend(p)
    assert np.allclose(decimals(t.weights), w, atol=1e-11)
    assert np.allclose(decimals(t.output), o, atol=1e-11)
    assert Checker(p).check("weights[0, 0]", "cos(1)/(cos(1) + 1)").code == "wrong"


# -- sinks ---------------------------------------------------------------------------
def sink_reference(Q, K, V, scale, sink, allowed):
    """gpt-oss's form, written here: append the sink column, softmax, drop it."""
    logits = np.where(allowed, scale * (Q @ K.T), -np.inf)
    full = np.concatenate([logits, np.full((len(Q), 1), float(sink))], axis=1)
    full = full - full.max(axis=1, keepdims=True)
    e = np.exp(full)
    w = (e / e.sum(axis=1, keepdims=True))[:, :-1]
    return w, w @ V


@pytest.mark.parametrize("seed", range(4))
def test_sink_matches_float64(seed):
    rng = np.random.default_rng(100 + seed)
    n, m, d = 3, 4, 2
    Q, K, V = rng.integers(-3, 4, size=(n, d)), rng.integers(-3, 4, size=(m, d)), rng.integers(-3, 4, size=(m, 2))
    sink = [0, "1/2", -2, 3][seed]
    mask = [None, "causal", None, {"window": 2}][seed] if n == m else None
    p = sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(), sink=sink, mask=mask)
    allowed = np.ones((n, m), bool) if p.mask is None else np.array(p.mask.tolist(), dtype=int) > 0
    w, o = sink_reference(Q.astype(float), K.astype(float), V.astype(float), 1 / np.sqrt(d),
                          float(sympy.Rational(sink)), allowed)
    t = sa.attend(p)
    assert np.allclose(decimals(t.weights), w, atol=1e-11)
    assert np.allclose(decimals(t.output), o, atol=1e-11)
    assert all(sum(row) < 1 for row in w)


def test_off_by_one_softmax_hand_worked():
    """sink = 0, scale 1, scores [1, 0] for a row: weights e/(e + 1 + 1) and 1/(e + 2)."""
    p = sa.Problem(Q=[[1, 0], [0, 1]], K=[[1, 0], [0, 1]], V=[[1, 0], [0, 1]], scale=1, sink=0)
    t = sa.attend(p)
    e = mpmath.e
    with mpmath.workdps(40):
        big, small = rounded(e / (e + 2), 6), rounded(1 / (e + 2), 6)
    assert [str(d) for d in t.weights.decimals(sa.Rounding(places=6))[0]] == [big, small]
    assert [big, small] == ["0.576117", "0.211942"]
    assert t.row_sum[0, 0] == 2 * sympy.exp(-1) + 1        # e^(−1)·(e + 1 + 1)
    assert str(t.row_sum.decimal(0, 0, sa.Rounding(places=4))) == "1.7358"


def test_sink_ties_are_exact():
    """Every score equal and the sink tying them: weights exactly 1/(m + 1), an exact output."""
    t = sa.attend(sa.Problem(Q=[[0, 0]], K=[[1, 0], [0, 1], [1, 1]], V=[[1], [2], [4]], sink=0))
    assert t.weights[0, 0] == sympy.Rational(1, 4)
    assert [str(d) for d in t.weights.decimals(sa.Rounding(places=2))[0]] == ["0.25"] * 3
    assert str(t.output.decimal(0, 0, sa.Rounding(places=2))) == "1.75"     # 7/4 exactly
    # a sink that does not tie: the output is 0 exactly only when the values cancel
    t = sa.attend(sa.Problem(Q=[[0, 0]], K=[[1, 0], [0, 1]], V=[[1], [-1]], sink=5))
    assert str(t.output.decimal(0, 0, sa.Rounding(places=2))) == "0.00"


def test_sink_forms_agree():
    """sink-forms-agree: concatenate-and-drop, + e^s in the denominator and the log-sum-exp
    renormalisation of the plain softmax give the same weights (exactly, then to 30 places)."""
    Q, K, V = [[1, 2], [0, -1]], [[1, 0], [2, 1], [-1, 1]], [[1, 0], [0, 1], [2, 2]]
    s = sympy.Rational(1, 3)
    with_sink = sa.attend(sa.Problem(Q=Q, K=K, V=V, sink=s))
    plain = sa.attend(sa.Problem(Q=Q, K=K, V=V))
    # concatenate-and-drop on the same engine: the scaled scores and the sink as one more key
    scaled = plain.step("scaled").matrix
    rows = [[*scaled.row(i), s] for i in range(2)]
    concat = sa.attend(sa.Problem(Q=rows, K=sympy.eye(4).tolist(), V=[*V, [0, 0]], scale=1))
    places = sa.Rounding(places=30)
    for i in range(2):
        lse = sympy.log(sympy.Add(*[sympy.exp(x) for x in scaled.row(i)]))
        for j in range(3):
            want = str(with_sink.weights.decimal(i, j, places))
            assert str(concat.weights.decimal(i, j, places)) == want
            renormalised = plain.weights[i, j] / (1 + sympy.exp(s - lse))
            assert str(sa.certify(renormalised, places)) == want
        assert with_sink.output.decimals(places)[i] == concat.output.decimals(places)[i]


def test_sink_in_toml_subs_and_errors(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('Q = [[1, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\nsink = "-1/2"\n')
    assert sa.Problem.from_toml(path).sink == sympy.Rational(-1, 2)
    a = sympy.Symbol("a", real=True)
    p = sa.Problem(Q=[[a, 0]], K=[[1, 0], [0, 1]], V=[[1], [2]], sink=0, scale=1)
    assert p.subs({"a": 1}).sink == 0
    for bad, words in (("x", "unknown name"), ("1e9", "magnitude")):
        with pytest.raises(sa.SymattnError) as err:
            sa.Problem(Q=[[1]], K=[[1]], V=[[1]], sink=bad)
        assert words in str(err.value) and "\n" not in str(err.value)


def test_sink_document_says_weights_sum_below_one(capsys):
    assert main(["explain", "--example", "off-by-one-softmax"]) == 0
    out = capsys.readouterr().out
    assert "each row sums to less than 1" in out
    assert "Each row of weights sums to less than 1: the sink takes the rest." in out
    assert "row_sum = e^(−8/√3) + 1 + e^(−2/√3) + e^(−4·√3) ≈ 1.33" in out


def test_sink_json_exact_strings_read_back():
    from symattn.document.trace_json import trace_to_json

    t = sa.attend(sa.load_example("off-by-one-softmax"))
    data = trace_to_json(t, 3)
    got = sympy.sympify(data["steps"]["row_sum"]["exact"][1][0])
    assert sympy.simplify(got - t.row_sum[1, 0]) == 0


# -- the two facts (symattn facts --fact NAME) -----------------------------------------
def test_window_is_a_mask_fact():
    from symattn import facts

    proof = facts.prove("window-is-a-mask", sa.load_example("sliding-window"))
    assert proof.holds and "verified" in proof.general[0].text
    assert len(proof.checks) == 5 and all("(exactly)" in line.text for line in proof.checks)
    assert "keys cat, sat, renormalised" in proof.checks[2].text


def test_sink_forms_agree_fact_and_a_wrong_claim_fails():
    from symattn import facts

    trace = sa.attend(sa.load_example("off-by-one-softmax"))
    proof = facts.prove("sink-forms-agree", trace)
    assert proof.holds and len(proof.checks) == 3
    # claim the weights came from another sink: the renormalisation disagrees, row 'I' first
    wrong = sa.attend(sa.load_example("off-by-one-softmax"))
    wrong.problem.sink = sympy.Integer(1)
    bad = facts.prove("sink-forms-agree", wrong)
    assert bad.holds is False and bad.counterexample == {"row": "I"}
    assert "NOT equal" in bad.checks[0].text


def test_plain_softmax_facts_on_a_sink_problem_say_why_they_are_not_checked():
    """A sink makes the weights sum to less than 1: the plain-softmax facts keep their general
    proof and say why the instance is not checked, instead of reporting a false FAILS."""
    problem = sa.load_example("off-by-one-softmax")
    row_sums = [sum(sa.attend(problem).weights[i, j] for j in range(problem.m)) for i in range(problem.n)]
    assert all(sympy.N(s, 30) < 1 for s in row_sums)          # the instance really breaks Σ = 1
    proofs = sa.facts.check_facts(problem)
    assert all(p.holds for p in proofs), [p.fact for p in proofs if not p.holds]
    skipped = {p.fact for p in proofs if any("has a sink logit" in line.text for line in p.checks)}
    assert skipped == set(sa.facts.PLAIN_SOFTMAX)
    # facts that do hold with a sink are still checked on the instance
    perm = next(p for p in proofs if p.fact == "permutation-equivariance")
    assert perm.checks and not any("sink logit" in line.text for line in perm.checks)


def test_worksheets_state_the_window_and_the_sink(tmp_path):
    """A student's sheet must say what changes the arithmetic: the window's band and the sink."""
    assert main(["worksheet", "--example", "off-by-one-softmax", "-o", str(tmp_path / "sink")]) == 0
    sheet = (tmp_path / "sink" / "version-A-sheet.tex").read_text(encoding="utf-8")
    assert "Sink logit $s = 0$" in sheet and "less than 1" in sheet
    assert main(["worksheet", "--example", "sliding-window", "-o", str(tmp_path / "win")]) == 0
    sheet = (tmp_path / "win" / "version-A-sheet.tex").read_text(encoding="utf-8")
    assert "sliding window W = 2" in sheet
