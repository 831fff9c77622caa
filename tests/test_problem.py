"""Problem: exact coercion of inputs and one-line errors for bad ones."""

from decimal import Decimal
from fractions import Fraction

import pytest
import sympy

import symattn as sa
from symattn.errors import ProblemError

LESSON = dict(
    X=[[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
    W_q=[[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
    W_k=[[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
    W_v=[[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]],
)


def test_entries_are_exact_whatever_their_type():
    p = sa.Problem(Q=[[0.1, "3/4"], [Fraction(1, 3), Decimal("0.30")]],
                   K=[["sqrt(2)", "-2.5e-3"], [sympy.Rational(1, 7), 2]], V=[[1], [2]])
    assert list(p.Q_given) == [sympy.Rational(1, 10), sympy.Rational(3, 4),
                               sympy.Rational(1, 3), sympy.Rational(3, 10)]
    assert list(p.K_given) == [sympy.sqrt(2), sympy.Rational(-1, 400), sympy.Rational(1, 7), 2]


def test_defaults_scale_tokens_and_dimensions():
    p = sa.Problem(**LESSON)
    assert (p.n, p.m, p.d_model, p.d_k, p.d_v) == (3, 3, 4, 3, 3)
    assert p.scale == 1 / sympy.sqrt(3)
    assert p.tokens == ("t0", "t1", "t2") and p.key_tokens == p.tokens
    assert p.default_scale


def test_toml_floats_are_read_by_their_text(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('Q = [[0.1, 1e-3]]\nK = [[0.3, 2]]\nV = [[1]]\nscale = "5/sqrt(2)"\n')
    p = sa.Problem.from_toml(path)
    assert list(p.Q_given) == [sympy.Rational(1, 10), sympy.Rational(1, 1000)]
    assert p.K_given[0, 0] == sympy.Rational(3, 10)
    assert p.scale == 5 / sympy.sqrt(2)


def test_causal_mask_is_top_left_like_pytorch():
    p = sa.Problem(Q=[[1], [2]], K=[[1], [1], [1]], V=[[1], [2], [3]], mask="causal")
    assert p.mask.tolist() == [[1, 0, 0], [1, 1, 0]]


@pytest.mark.parametrize("kwargs, message", [
    (dict(LESSON, W_q=[[1, 0, 1]] * 3), "W_q has 3 rows but X has 4 columns (d_model = 4)"),
    (dict(LESSON, W_k=[[1, 0]] * 4), "W_k has 2 columns but W_q has 3 (d_k = 3)"),
    (dict(LESSON, X=[[1, 0, 1, 0], [0, 2, 0]]), "X row 1 has 3 entries but row 0 has 4"),
    (dict(LESSON, X=[]), "X is empty"),
    (dict(LESSON, X=[[1, "cat", 1, 0]]), "X[0][1]"),
    (dict(LESSON, X_kv=[[1, 2]]), "X_kv has 2 columns but X has 4 (d_model = 4)"),
    (dict(Q=[[1, 2]], K=[[1, 2, 3]], V=[[1]]), "K is 1×3 but Q is 1×2 (d_k = 2)"),
    (dict(Q=[[1]], K=[[1], [2]], V=[[1]]), "V has 1 rows but K has 2"),
    (dict(Q=[[1]], K=[[1]]), "V is missing"),
    (dict(LESSON, Q=[[1]]), "not both"),
    (dict(LESSON, mask=[[1, 1, 1], [0, 0, 0], [1, 1, 1]]), "mask row 1 ('t1') blocks every key"),
    (dict(LESSON, mask=[[1, 1], [1, 1]]), "mask is 2×2 but the scores are 3×3"),
    (dict(LESSON, mask=[[1, 1, 2], [1, 1, 1], [1, 1, 1]]), "mask[0][2] is 2"),
    (dict(LESSON, mask="upper"), "use \"causal\""),
    (dict(LESSON, tokens=["I", "love"]), "tokens has 2 names but there are 3 rows"),
    (dict(LESSON, tokens=["I", "I", "cats"]), "names 'I' twice"),
    (dict(LESSON, tokens=["I", "2", "cats"]), "reads as an index"),
    (dict(LESSON, scale="sqrt(-1)"), "scale"),
])
def test_bad_inputs_name_the_input_and_the_fix(kwargs, message):
    with pytest.raises(sa.SymattnError) as info:
        sa.Problem(**kwargs)
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_unknown_toml_key_is_named():
    with pytest.raises(ProblemError, match="unknown key 'W_o'"):
        sa.Problem.from_toml_text('Q = [[1]]\nK = [[1]]\nV = [[1]]\nW_o = [[1]]\n', source="p.toml")


def test_invalid_toml_is_one_line():
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml_text("Q = [[1,\n", source="broken.toml")
    assert str(info.value).startswith("broken.toml is not valid TOML")
    assert "\n" not in str(info.value)


def test_problem_strings_never_reach_python_eval():
    with pytest.raises(sa.ParseError):
        sa.Problem(Q=[["__import__('os').system('echo pwned')"]], K=[[1]], V=[[1]])
