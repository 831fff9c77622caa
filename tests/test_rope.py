"""RoPE (rope = {...}): the rotation, the scores from it, exact ties, budgets, views, checks, facts.

Every expected number comes from an independent computation written here:
the two reference codebases' formulas in numpy float64 (Meta Llama's complex
form for the interleaved layout, Hugging Face's rotate_half for the half
layout), mpmath, or numbers worked by hand — never from symattn's own values.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.cli import main
from symattn.errors import ProblemError
from symattn.numbers.compare import trig_is_zero
from symattn.problem.keys.rope import MAX_ROPE_ANGLE


# -- the reference codebases' formulas, in float64 ----------------------------------------
def llama_rotate(x: np.ndarray, positions: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Meta's Llama reference (apply_rotary_emb): pairs (0, 1), (2, 3), … as complex numbers
    x0 + i·x1, multiplied by polar(1, p·θ) = e^{i·p·θ}."""
    n, d = x.shape
    xc = x[:, 0::2] + 1j * x[:, 1::2]
    freqs_cis = np.exp(1j * np.outer(positions, theta))
    out = xc * freqs_cis
    return np.stack([out.real, out.imag], axis=-1).reshape(n, d)


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def hf_rotate(x: np.ndarray, positions: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Hugging Face's apply_rotary_pos_emb: q·cos + rotate_half(q)·sin, with
    emb = cat(freqs, freqs)."""
    freqs = np.outer(positions, theta)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return x * np.cos(emb) + rotate_half(x) * np.sin(emb)


def inv_freq(d: int, base: float = 10000.0) -> np.ndarray:
    return 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))


def attention(Q, K, V, scale):
    s = scale * (Q @ K.T)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return w, w @ V


def as_float(step, places: int = 12) -> np.ndarray:
    return np.array([[float(str(d)) for d in row] for row in step.decimals(sa.Rounding(places=places))])


def random_problem(rng: np.random.Generator, d: int, layout: str):
    n, m = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    Q = rng.integers(-3, 4, size=(n, d))
    K = rng.integers(-3, 4, size=(m, d))
    V = rng.integers(-3, 4, size=(m, 2))
    pos = rng.integers(0, 30, size=n)
    kpos = rng.integers(0, 30, size=m)
    problem = sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V.tolist(),
                         rope={"layout": layout, "positions": pos.tolist(),
                               "key_positions": kpos.tolist()})
    return problem, Q.astype(float), K.astype(float), V.astype(float), pos, kpos


# -- both layouts against the reference codebases -------------------------------------------
@pytest.mark.parametrize("layout,reference", [("interleaved", llama_rotate), ("half", hf_rotate)])
@pytest.mark.parametrize("d", [2, 4, 6])
def test_layouts_match_the_reference_codebases(layout, reference, d) -> None:
    rng = np.random.default_rng(1000 * d + len(layout))
    for _ in range(3):
        problem, Q, K, V, pos, kpos = random_problem(rng, d, layout)
        trace = sa.attend(problem)
        theta = inv_freq(d)
        Qr, Kr = reference(Q, pos, theta), reference(K, kpos, theta)
        assert np.allclose(as_float(trace.Q_rot), Qr, atol=1e-11)
        assert np.allclose(as_float(trace.K_rot), Kr, atol=1e-11)
        assert np.allclose(as_float(trace.scores), Qr @ Kr.T, atol=1e-10)
        w, out = attention(Qr, Kr, V, 1 / np.sqrt(d))
        assert np.allclose(as_float(trace.weights), w, atol=1e-10)
        assert np.allclose(as_float(trace.output), out, atol=1e-10)


def test_the_two_layouts_differ_and_agree_after_the_checkpoint_permutation() -> None:
    """Converting a checkpoint between layouts permutes q/k columns (transformers#25199):
    interleaved on Q equals half on Q with columns (0, 2, 4, 1, 3, 5), column-permuted back."""
    rng = np.random.default_rng(7)
    Q = rng.integers(-3, 4, size=(3, 6))
    K = rng.integers(-3, 4, size=(3, 6))
    V = [[1, 0], [0, 1], [1, 1]]
    perm = [0, 2, 4, 1, 3, 5]
    inter = sa.attend(sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V, rope={"layout": "interleaved"}))
    half = sa.attend(sa.Problem(Q=Q[:, perm].tolist(), K=K[:, perm].tolist(), V=V,
                                rope={"layout": "half"}))
    assert not np.allclose(as_float(inter.scores),
                           as_float(sa.attend(sa.Problem(Q=Q.tolist(), K=K.tolist(), V=V,
                                                         rope={"layout": "half"})).scores))
    for i in range(3):
        for j in range(3):
            assert sympy.expand(inter.scores[i, j] - half.scores[i, j]) == 0
    assert np.allclose(as_float(inter.Q_rot)[:, perm], as_float(half.Q_rot), atol=1e-12)


def test_default_frequencies_are_exact_powers_of_the_base() -> None:
    p = sa.Problem(Q=[[1] * 8], K=[[1] * 8], V=[[1]], rope={})
    assert p.rope.theta == (1, sympy.Rational(1, 10), sympy.Rational(1, 100), sympy.Rational(1, 1000))
    p6 = sa.Problem(Q=[[1] * 6], K=[[1] * 6], V=[[1]], rope={"base": 100})
    assert p6.rope.theta[1] == sympy.Pow(100, sympy.Rational(-1, 3))
    t = sa.attend(sa.Problem(Q=[[1, 0, 0, 0], [1, 0, 0, 0]], K=[[1, 0, 0, 0]], V=[[1]], rope={}))
    assert t.Q_rot[1, 0] == sympy.cos(1) and t.Q_rot[1, 1] == sympy.sin(1)


# -- hand-worked numbers: θ = π/2 -------------------------------------------------------------
HAND = dict(tokens=["I", "love", "cats"], Q=[[1, 0], [0, 1], [1, 1]], K=[[1, 0], [0, 1], [1, 1]],
            V=[[1, 2], [3, 4], [5, 6]], rope={"theta": ["pi/2"]})


def test_hand_worked_quarter_turns() -> None:
    """Worked by hand: position 1 turns by π/2 ((x, y) ↦ (−y, x)), position 2 by π ((x, y) ↦ (−x, −y)).
    Q_rot = [[1, 0], [−1, 0], [−1, −1]] (K_rot the same), scores = Q_rot·K_rotᵀ =
    [[1, −1, −1], [−1, 1, 1], [−1, 1, 2]]; row 'I' scaled by 1/√2: weights
    1/(1 + 2e^(−√2)) and e^(−√2)/(1 + 2e^(−√2)) twice, 0.673 and 0.164 at 3 places."""
    t = sa.attend(sa.Problem(**HAND))
    assert t.Q_rot.matrix == sympy.Matrix([[1, 0], [-1, 0], [-1, -1]])
    assert t.K_rot.matrix == t.Q_rot.matrix
    assert t.scores.matrix == sympy.Matrix([[1, -1, -1], [-1, 1, 1], [-1, 1, 2]])
    w = t.weights.decimals(sa.Rounding(places=3))
    assert [str(d) for d in w[0]] == ["0.673", "0.164", "0.164"]
    e = mpmath.exp(-mpmath.sqrt(2))
    assert abs(float(str(t.weights.decimal(0, 0, 20))) - float(1 / (1 + 2 * e))) < 1e-15
    # the two keys tie in row 'I' exactly: the same weight, decided exactly
    assert t.tie_groups(0) == ((0,), (1, 2))
    out = t.output.decimals(sa.Rounding(places=3))
    o0 = (1 * 1 + e * 3 + e * 5) / (1 + 2 * e)
    assert str(out[0][0]) == mpmath.nstr(o0, 4) == "1.981"      # 3 places


def test_hand_worked_thirds_of_a_half_turn() -> None:
    """θ = π/3: cos and sin are 1/2 and √3/2, so Q_rot is exact surds. q = [2, 0] at
    position 1 becomes [1, √3]; against k = [2, 0] and [0, 2] at position 0 the scores are
    2 and 2√3; with [0, 2] at position 1 (turned to [−√3, 1]) the score is 0."""
    t = sa.attend(sa.Problem(Q=[[2, 0]], K=[[2, 0], [0, 2]], V=[[1], [0]],
                             rope={"theta": ["pi/3"], "positions": [1], "key_positions": [0, 0]}))
    assert t.Q_rot.matrix == sympy.Matrix([[1, sympy.sqrt(3)]])
    assert t.scores.matrix == sympy.Matrix([[2, 2 * sympy.sqrt(3)]])
    t1 = sa.attend(sa.Problem(Q=[[2, 0]], K=[[2, 0], [0, 2]], V=[[1], [0]],
                              rope={"theta": ["pi/3"], "positions": [1]}))
    assert t1.K_rot.matrix == sympy.Matrix([[2, 0], [-sympy.sqrt(3), 1]])
    assert t1.scores.matrix == sympy.Matrix([[2, 0]])


# -- ties and the row maximum, decided exactly ---------------------------------------------------
def test_a_query_against_itself_at_equal_positions_is_its_squared_norm() -> None:
    Q = [[1, 2, 3, -1], [0, 1, -2, 2]]
    t = sa.attend(sa.Problem(Q=Q, K=Q, V=[[1], [2]], rope={"positions": [5, 9], "key_positions": [5, 9]}))
    assert t.scores[0, 0] == 15 and t.scores[1, 1] == 9          # rotations keep norms
    assert t.scores[0, 1] == t.scores[1, 0]


def test_exact_tie_between_equal_keys_at_equal_offsets() -> None:
    """Two keys at the same offset from the query tie exactly: weights 1/2, 1/2 and a
    rational output, printed as exact decimals (no endless precision loop)."""
    t = sa.attend(sa.Problem(Q=[[1, 2]], K=[[3, 1], [3, 1]], V=[[1], [2]],
                             rope={"positions": [2], "key_positions": [7, 7]}))
    w = t.weights.decimals(5)[0]
    assert all(d.exact and str(d) == "0.5" for d in w)
    assert str(t.output.decimal(0, 0, 5)) == "1.5"


def test_a_tie_that_is_not_structural_is_decided_by_lindemann_weierstrass() -> None:
    """k₂ = (cos 1, sin 1) at position 0 is k₁ = (1, 0) turned by 1: at position 1 k₁ is the same
    vector, so the two scores tie although they are written differently."""
    t = sa.attend(sa.Problem(Q=[[2, 1]], K=[[1, 0], ["cos(1)", "sin(1)"]], V=[[1], [3]],
                             rope={"positions": [4], "key_positions": [1, 0]}))
    assert t.tie_groups(0) == ((0, 1),)
    assert str(t.weights.decimal(0, 1, 4)) == "0.5"
    assert str(t.output.decimal(0, 0, 4)) == "2"


def test_trig_is_zero() -> None:
    c, s = sympy.cos, sympy.sin
    assert trig_is_zero(c(1) ** 2 + s(1) ** 2 - 1) is True
    assert trig_is_zero(c(1) * c(3) + s(1) * s(3) - c(2)) is True
    assert trig_is_zero(c(1) - c(sympy.Rational(1, 100))) is False
    assert trig_is_zero(c(sympy.sqrt(2)) - c(-sympy.sqrt(2))) is True
    assert trig_is_zero(3 * c(2) + s(2) - 3 * c(2)) is False
    assert trig_is_zero(c(sympy.pi * sympy.E)) is None              # the angle is not algebraic


# -- the relative-position property ---------------------------------------------------------------
def test_shifting_every_position_leaves_the_scores_unchanged() -> None:
    rng = np.random.default_rng(3)
    Q, K = rng.integers(-3, 4, size=(3, 4)).tolist(), rng.integers(-3, 4, size=(4, 4)).tolist()
    V = [[1], [2], [3], [4]]
    base = sa.attend(sa.Problem(Q=Q, K=K, V=V, rope={"positions": [0, 3, 5], "key_positions": [1, 2, 3, 7]}))
    moved = sa.attend(sa.Problem(Q=Q, K=K, V=V, rope={"positions": [10, 13, 15],
                                                      "key_positions": [11, 12, 13, 17]}))
    assert base.scores.matrix == moved.scores.matrix                  # exactly
    assert base.Q_rot.matrix != moved.Q_rot.matrix
    # numerically, from the reference formula
    theta = inv_freq(4)
    Qf, Kf = np.array(Q, float), np.array(K, float)
    a = llama_rotate(Qf, np.array([0, 3, 5]), theta) @ llama_rotate(Kf, np.array([1, 2, 3, 7]), theta).T
    b = llama_rotate(Qf, np.array([10, 13, 15]), theta) @ llama_rotate(Kf, np.array([11, 12, 13, 17]), theta).T
    assert np.allclose(a, b) and np.allclose(as_float(base.scores), a, atol=1e-10)


# -- the key, read from TOML and checked -------------------------------------------------------------
def test_toml_key_and_positions(tmp_path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n'
                    'rope = { layout = "half", positions = [3, 4], theta = ["pi/2"] }\n', encoding="utf-8")
    p = sa.Problem.from_toml(path)
    assert p.rope.layout == "half" and p.rope.positions == (3, 4) and p.rope.key_positions == (0, 1)
    assert p.rope.theta == (sympy.pi / 2,)


BAD = [
    ({"Q": [[1, 2, 3]], "K": [[1, 2, 3]], "V": [[1]], "rope": {}}, "even d_k"),
    ({"rope": {"layout": "zigzag"}}, "rope layout is 'zigzag'"),
    ({"rope": {"positions": [0, 1, 2]}}, "rope positions has 3 entries but there are 2 querys"),
    ({"rope": {"key_positions": [0]}}, "rope key_positions has 1 entries"),
    ({"rope": {"positions": [0, 20000]}}, "MAX_ROPE_ANGLE"),
    ({"rope": {"positions": [0, 1.5]}}, "rope positions[1] is 1.5"),
    ({"rope": {"theta": ["1", "2"]}}, "rope theta has 2 entries"),
    ({"rope": {"theta": ["x"]}}, "rope theta[0]"),
    ({"rope": {"base": -3}}, "rope base is -3"),
    ({"rope": {"bass": 3}}, "unknown key 'bass'"),
    ({"rope": {"base": 3, "theta": [1]}}, "both base and theta"),
    ({"rope": "yes"}, "rope must be a table"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_bad_keys_are_one_line_errors(change, message) -> None:
    keys = {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1], [2]], **change}
    with pytest.raises(ProblemError) as err:
        sa.Problem(**keys)
    assert message.replace("querys", "query") in str(err.value).replace("querys", "query")
    assert "\n" not in str(err.value)


def test_bad_key_in_a_file_exits_2_with_one_line(tmp_path, capsys) -> None:
    path = tmp_path / "odd.toml"
    path.write_text('Q = [[1, 2, 3]]\nK = [[1, 2, 3]]\nV = [[1]]\nrope = { positions = [1] }\n',
                    encoding="utf-8")
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "even d_k" in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_the_angle_cap_edge() -> None:
    keys = {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1], [2]]}
    t = sa.attend(sa.Problem(**keys, rope={"positions": [0, MAX_ROPE_ANGLE]}))
    got = float(str(t.Q_rot.decimal(1, 0, 15)))
    assert abs(got - float(-mpmath.sin(MAX_ROPE_ANGLE))) < 1e-14     # (0, 1) ↦ (−sin φ, cos φ)
    with pytest.raises(ProblemError, match="MAX_ROPE_ANGLE"):
        sa.Problem(**keys, rope={"positions": [0, MAX_ROPE_ANGLE + 1]})


def test_irrational_rotations_are_capped_at_the_symbolic_side_but_quarter_turns_are_not() -> None:
    side = 17
    Q = [[1, 0]] * side
    with pytest.raises(ProblemError, match="MAX_SYMBOLIC_SIDE"):
        sa.Problem(Q=Q, K=Q, V=[[1]] * side, rope={})
    big = 40
    rng = np.random.default_rng(5)
    Qb = rng.integers(-2, 3, size=(big, 2))
    t = sa.attend(sa.Problem(Q=Qb.tolist(), K=Qb.tolist(), V=[[1]] * big, rope={"theta": ["pi/2"]}))
    assert t.scores.is_rational
    ref = llama_rotate(Qb.astype(float), np.arange(big), np.array([np.pi / 2]))
    assert np.allclose(as_float(t.scores), ref @ ref.T, atol=1e-9)


# -- the built-in example, worked by hand ------------------------------------------------------------
def test_rope_example_hand_worked() -> None:
    """Row 'love' (position 1): pair (0, 1) turns by π/2, [0, 1] ↦ [−1, 0]; pair (2, 3) by π/3,
    [0, 2] ↦ [0·½ − 2·(√3/2), 0·(√3/2) + 2·½] = [−√3, 1].  Row 'I' against keys 'I' and 'love'
    scores 1 and 1 (an exact tie: equal weights)."""
    t = sa.attend(sa.load_example("rope"))
    assert list(t.Q_rot[1]) == [-1, 0, -sympy.sqrt(3), 1]
    assert t.scores[0, 0] == 1 and t.scores[0, 1] == 1
    w = t.weights.decimals(sa.Rounding(places=3))[0]
    assert str(w[0]) == str(w[1])
    Q, K = (np.array(t.step(n).matrix.tolist(), dtype=float) for n in ("Q", "K"))
    theta = np.array([np.pi / 2, np.pi / 3])
    Qr, Kr = llama_rotate(Q, np.arange(3), theta), llama_rotate(K, np.arange(3), theta)
    weights, _ = attention(Qr, Kr, np.eye(3), 0.5)
    assert np.allclose(as_float(t.weights), weights, atol=1e-11)
    assert [str(d) for d in w] == [f"{x:.3f}" for x in weights[0]]


# -- every view shows the rotated steps ------------------------------------------------------------------
def test_text_json_latex_and_html_show_q_rot(tmp_path, capsys) -> None:
    assert main(["explain", "--example", "rope"]) == 0
    text = capsys.readouterr().out
    assert "Rotated queries (RoPE)" in text and "Q_rot" in text
    assert "pair (2, 3): φ = 1·(π/3) = π/3; [0, 2] → [0·(1/2) − 2·(√3/2), 0·(√3/2) + 2·(1/2)] = [−√3, 1]" in text
    assert main(["explain", "--example", "rope", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["steps"])[:5] == ["Q", "K", "V", "Q_rot", "K_rot"]
    assert data["steps"]["Q_rot"]["exact"][1] == ["-1", "0", "-sqrt(3)", "1"]
    assert data["steps"]["K_rot"]["decimal"][1] == ["0", "2", "0.5", "0.866"]


def test_latex_compiles_and_reads_back(tmp_path) -> None:
    import subprocess

    from test_pdf import need_tex

    need_tex()
    from symattn.document.pdf import compile_tex
    from symattn.document.trace_latex import render_latex

    pdf = tmp_path / "rope.pdf"
    pdf.write_bytes(compile_tex(render_latex(sa.attend(sa.load_example("rope"))), "rope"))
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Rotated queries (RoPE)" in text and "Rotated keys (RoPE)" in text
    assert "Row ’love’ is at position" in text or "Row 'love' is at position" in text


def test_html_page_shows_the_rotated_steps(tmp_path) -> None:
    from browser import shared_browser

    path = tmp_path / "rope.html"
    assert main(["explain", "--example", "rope", "--format", "html", "-o", str(path)]) == 0
    browser = shared_browser()
    shown = browser.open(path)
    shown.assert_clean()
    headings = shown.page.locator("h2").all_inner_texts()
    assert any("Rotated queries (RoPE)" in h for h in headings)
    assert any("Rotated keys (RoPE)" in h for h in headings)
    assert "Q_rot" in shown.page.inner_text("body") or "rot" in shown.page.inner_text("body")
    shown.page.screenshot(path=str(tmp_path / "rope.png"), full_page=True)
    shown.close()


# -- check: targets and the named mistakes ----------------------------------------------------------------
EXAMPLE_THETA = np.array([np.pi / 2, np.pi / 3])


def _example_arrays():
    p = sa.load_example("rope")
    return (np.array(p.Q_given.tolist(), dtype=float), np.array(p.K_given.tolist(), dtype=float),
            np.array(p.V_given.tolist(), dtype=float))


def _row(x: np.ndarray) -> str:
    return ", ".join(f"{v:.2f}" for v in x)


def test_check_targets_q_rot_and_k_rot() -> None:
    from symattn.check import Checker

    checker = Checker(sa.load_example("rope"))
    assert checker.check("Q_rot[love]", "-1, 0, -1.73, 1").right
    assert checker.check("K_rot[love, 3]", "0.866").right
    assert checker.check("Q_rot[love, 2]", "-sqrt(3)").right
    assert not checker.check("Q_rot[love, 2]", "1.73").right


V4 = [[1, 0, 2, 0], [0, 1, 0, 1], [1, 1, 0, 2]]     # d_v = d_k: RoPE could be (wrongly) applied to V


@pytest.mark.parametrize("code", ["rope-layout", "rope-degrees", "rope-on-values", "rope-query-only"])
def test_rope_mistakes_are_named(code) -> None:
    """Each mistake computed independently in float64 (the reference formulas with the change),
    written at 2 places, and diagnosed by the checker."""
    from symattn.check import Checker

    base = sa.load_example("rope")
    problem = sa.Problem(Q=base.Q_given, K=base.K_given, V=V4, tokens=base.tokens, rope=base.rope)
    Q, K, _ = _example_arrays()
    V = np.array(V4, dtype=float)
    pos = np.arange(3)
    same = lambda x, p, t: x  # noqa: E731
    theta, rot_q, rot_k, rot_v = EXAMPLE_THETA, llama_rotate, llama_rotate, same
    if code == "rope-layout":
        rot_q = rot_k = hf_rotate
    elif code == "rope-degrees":
        theta = EXAMPLE_THETA * np.pi / 180
    elif code == "rope-query-only":
        rot_k = same
    else:
        rot_v = llama_rotate
    w, out = attention(rot_q(Q, pos, theta), rot_k(K, pos, theta), rot_v(V, pos, theta), 0.5)
    target, text = ("output[cats]", _row(out[2])) if code == "rope-on-values" else ("weights[cats]", _row(w[2]))
    verdict = Checker(problem).check(target, text)
    assert not verdict.right
    assert verdict.code == "mistake" and verdict.mistake == code, (text, verdict)


def test_a_wrong_pairing_on_one_pair_is_not_a_mistake() -> None:
    """d_k = 2: interleaved and half are the same pairing, so rope-layout is never offered."""
    from symattn.check.mistakes.catalog import Mistakes

    codes = {m.code for m in Mistakes(sa.attend(sa.Problem(**HAND))).fixed}
    assert "rope-layout" not in codes and "rope-degrees" in codes


# -- the fact ----------------------------------------------------------------------------------------------
def test_rope_relative_position_fact() -> None:
    from symattn import facts

    general = facts.prove("rope-relative-position")
    assert general.holds and all("verified" in line.text for line in general.general)
    proof = facts.prove("rope-relative-position", sa.load_example("rope"))
    assert proof.holds and len(proof.checks) == 5
    assert all("(exactly)" in line.text for line in proof.checks)
    plain = facts.prove("rope-relative-position", sa.load_example("i-love-cats"))
    assert plain.holds and "no RoPE" in plain.checks[0].text


def test_rope_relative_position_claims_and_a_counterexample() -> None:
    """Claimed weights are read as the shifted problem's: the true weights (2 places) hold; the
    weights of the problem with only the queries moved (a real change of offsets) fail."""
    from symattn import facts

    problem = sa.load_example("rope")
    Q, K, V = _example_arrays()
    pos = np.arange(3)
    w, _ = attention(llama_rotate(Q, pos, EXAMPLE_THETA), llama_rotate(K, pos, EXAMPLE_THETA), V, 0.5)
    good = facts.Claims.from_mapping({"weights": [[f"{x:.2f}" for x in row] for row in w]})
    assert facts.prove("rope-relative-position", problem, good).holds
    w2, _ = attention(llama_rotate(Q, pos + 1, EXAMPLE_THETA), llama_rotate(K, pos, EXAMPLE_THETA), V, 0.5)
    bad = facts.Claims.from_mapping({"weights": [[f"{x:.2f}" for x in row] for row in w2]})
    proof = facts.prove("rope-relative-position", problem, bad)
    assert proof.holds is False and proof.counterexample["row"] == "I"
    assert proof.counterexample["shift"] == 7


def test_other_facts_hold_on_a_rope_problem() -> None:
    from symattn import facts

    proofs = facts.check_facts(sa.load_example("rope"))
    assert all(p.holds for p in proofs), [p.fact for p in proofs if not p.holds]


# -- worksheets keep the key --------------------------------------------------------------------------------
def test_worksheet_versions_keep_the_rope(tmp_path) -> None:
    out = tmp_path / "ws"
    assert main(["worksheet", "--example", "rope", "-o", str(out), "--versions", "2", "--seed", "4"]) == 0
    for v in ("A", "B"):
        p = sa.Problem.from_toml(out / f"version-{v}.toml")
        assert p.rope is not None and p.rope.theta == (sympy.pi / 2, sympy.pi / 3)
        sheet = (out / f"version-{v}-sheet.tex").read_text(encoding="utf-8")
        assert "RoPE (interleaved layout" in sheet and r"\theta = [\frac{\pi}{2}, \frac{\pi}{3}]" in sheet


def test_classroom_export_states_the_rope(tmp_path) -> None:
    out = tmp_path / "quiz.xml"
    assert main(["export", "--example", "rope", "--to", "moodle", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "RoPE, interleaved layout" in text and "θ = [π/2, π/3]" in text


def test_rope_with_decode_is_refused_in_one_line() -> None:
    with pytest.raises(ProblemError, match="rope and decode together"):
        sa.Problem(X=[[1, 0], [0, 1], [1, 1]], W_q=[[1, 0], [0, 1]], W_k=[[1, 0], [0, 1]],
                   W_v=[[1], [1]], rope={}, decode={"prefill": 2})


def test_rope_with_online_softmax_tiles() -> None:
    """tiles reads the trace's scores: with RoPE the running steps end in the same weights."""
    t = sa.attend(sa.Problem(**HAND, tiles=2))
    last = t.running_sum.shape[1] - 1
    for i in range(3):
        assert sympy.simplify(t.step(f"running_output_{last}")[i, 0] / t.running_sum[i, last]
                              - t.output[i, 0]) == 0
