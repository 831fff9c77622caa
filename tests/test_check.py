"""Verdicts on figures, with the lesson's own numbers."""

import mpmath
import pytest

import symattn as sa
from symattn.check import Checker, example_figures, read_figures
from symattn.check.figfile import FiguresError


@pytest.fixture(scope="module")
def lesson():
    return Checker(sa.load_example("i-love-cats"))


def test_weights_row_I_is_rounded(lesson):
    v = lesson.check("weights[I]", "0.136, 0.432, 0.432")
    assert v.code == "rounded" and v.right
    assert [e.expected for e in v.entries] == ["0.136", "0.432", "0.432"]
    assert [e.code for e in v.entries] == ["rounded"] * 3


def test_exact_expression(lesson):
    v = lesson.check("scaled[I, I]", "2/√3")
    assert v.code == "exact"
    assert v.entries[0].exact == "2*sqrt(3)/3"
    assert lesson.check("scaled[I, I]", "2/sqrt(3)").code == "exact"
    assert lesson.check("exp(scaled[I, I])", "e^(2/√3)").code == "exact"
    assert lesson.check("scaled[I, I]", "1/√3").code == "wrong"


def test_exact_integers_and_terminating_decimals(lesson):
    assert lesson.check("scores", "[[2, 4, 4], [4, 16, 12], [4, 12, 10]]").code == "exact"
    assert lesson.check("exp[cats, love]", "1").code == "exact"
    assert lesson.check("exp[cats, love]", "1.00").code == "exact"


def test_sqrt_d_k(lesson):
    v = lesson.check("sqrt(d_k)", "≈ 1.73")
    assert v.code == "rounded"
    assert v.entries[0].expected == "1.73"
    assert lesson.check("sqrt(d_k)", "1.7").code == "rounded"
    assert lesson.check("sqrt(d_k)", "1.74").code == "last-digit"


def test_percentages(lesson):
    assert lesson.check("weights[I, I]", "13.6%").code == "rounded"
    assert lesson.check("weights[I, love]", "43%").code == "rounded"
    assert lesson.check("weights[I, I]", "14%").code == "rounded"
    assert lesson.check("weights[I, I]", "13.7%").code != "rounded"


def test_last_digit_says_whether_it_is_a_truncation(lesson):
    up = lesson.check("weights[I, I]", "0.137")
    assert up.code in ("last-digit", "mistake")    # early rounding of shifted also gives 0.137
    cut = lesson.check("scaled[love, love]", "9.23")        # 16/√3 = 9.2376…: cut, not rounded
    assert cut.code == "last-digit"
    assert cut.entries[0].truncation is True
    assert "truncation" in cut.message and cut.entries[0].expected == "9.24"
    over = lesson.check("scaled[love, love]", "9.25")
    assert over.code == "last-digit" and over.entries[0].truncation is False
    assert "not a truncation" in over.message


def test_wrong_shows_the_exact_value_and_its_rounding(lesson):
    v = lesson.check("scaled[love, love]", "9.42")
    assert v.code == "wrong"
    assert v.entries[0].expected == "9.24"
    assert "16/√3" in v.message and "9.24" in v.message      # the lesson's hand form, as explain writes it
    assert v.entries[0].exact == "16*sqrt(3)/3"              # the JSON keeps SymPy's text


def test_unscaled_love_row_is_the_unscaled_mistake(lesson):
    v = lesson.check("weights[love]", "0.00 / 0.98 / 0.02")
    assert v.code == "mistake" and v.mistake == "unscaled"
    assert [e.expected for e in v.entries] == ["0.00", "0.91", "0.09"]


def test_the_unscaled_variant_makes_the_same_row_right():
    unscaled = Checker(sa.load_example("i-love-cats-unscaled"))
    assert unscaled.check("weights[love]", "0.00 / 0.98 / 0.02").code == "rounded"


def _softmax_rows(scores: list[list[float]], scale: float) -> list[list[float]]:
    import math
    out = []
    for row in scores:
        top = max(row)
        exps = [math.exp((x - top) * scale) for x in row]
        out.append([e / sum(exps) for e in exps])
    return out


def test_a_problem_that_leaves_the_scale_out_names_dividing_anyway():
    # the lesson's "without it": scale 1, so the slip is the usual 1/√3, or 1/3; there is no
    # "unscaled" mistake to make (float64 on the lesson's integer scores, written for the test)
    unscaled = Checker(sa.load_example("i-love-cats-unscaled"))
    scores = [[2, 4, 4], [4, 16, 12], [4, 12, 10]]
    by_root, by_d_k = _softmax_rows(scores, 3 ** -0.5), _softmax_rows(scores, 1 / 3)
    anyway = unscaled.check("weights[I]", ", ".join(f"{w:.3f}" for w in by_root[0]))
    assert (anyway.code, anyway.mistake) == ("mistake", "scaled-anyway")
    assert "√d_k = √3, which this problem leaves out" in anyway.mistake_detail
    assert [e.expected for e in anyway.entries] == [f"{w:.3f}" for w in _softmax_rows(scores, 1)[0]]
    by_three = unscaled.check("weights[love]", ", ".join(f"{w:.3f}" for w in by_d_k[1]))
    assert (by_three.code, by_three.mistake) == ("mistake", "scaled-by-d_k")
    after = unscaled.check("weights[I]", ", ".join(f"{w * 3 ** -0.5:.3f}" for w in _softmax_rows(scores, 1)[0]))
    assert (after.code, after.mistake) == ("mistake", "scaled-after-softmax")


def test_scaled_by_d_k(lesson):
    # scores / 3: row I is [2/3, 4/3, 4/3]
    v = lesson.check("scaled[I]", "0.67, 1.33, 1.33")
    assert v.code == "mistake" and v.mistake == "scaled-by-d_k"


def test_wrong_step_weights_given_for_output(lesson):
    v = lesson.check("output[I]", "0.14, 0.43, 0.43")
    assert v.code == "mistake" and v.mistake == "wrong-step"
    assert "weights" in v.mistake_detail


def test_a_right_answer_carries_no_indistinguishable_remark(lesson):
    """The lesson's scores are symmetric, so K·Qᵀ gives the same matrix; a right answer
    needs no remark about it (it changes no verdict)."""
    v = lesson.check("scores", "[[2, 4, 4], [4, 16, 12], [4, 12, 10]]")
    assert v.code == "exact"
    assert v.also == [] and all(e.also == [] for e in v.entries)
    assert "indistinguishable" not in v.message
    # ... although the mistake really does give the same values
    X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    W_q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    W_k = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    mul = lambda A, B: [[sum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]
    Q, K = mul(X, W_q), mul(X, W_k)
    assert mul(K, list(zip(*Q))) == [[2, 4, 4], [4, 16, 12], [4, 12, 10]]     # K·Qᵀ


def test_transposed_scores_on_a_non_symmetric_problem():
    p = sa.Problem(Q=[[1, 0], [0, 1]], K=[[1, 2], [0, 1]], V=[[1, 0], [0, 1]],
                   tokens=["a", "b"])
    c = Checker(p)
    # Q·Kᵀ = [[1, 0], [2, 1]];  K·Qᵀ = [[1, 2], [0, 1]]
    assert c.check("scores", "[[1, 0], [2, 1]]").code == "exact"
    v = c.check("scores", "[[1, 2], [0, 1]]")
    assert v.code == "mistake" and v.mistake == "transposed-scores"


def test_softmax_over_columns():
    p = sa.Problem(Q=[[1, 0], [0, 1]], K=[[1, 2], [0, 1]], V=[[1, 0], [0, 1]],
                   tokens=["a", "b"], scale=1)
    c = Checker(p)
    # scores [[1, 0], [2, 1]]; column a holds 1 and 2, so softmax down it gives
    # e/(e + e²) and e²/(e + e²): the weights of one query with scores [1, 2]
    down = sa.attend(sa.Problem(Q=[[1]], K=[[1], [2]], V=[[1], [1]], scale=1))
    w_aa, w_ba = (down.weights.decimal(0, j, sa.Rounding(places=3)).text for j in (0, 1))
    assert (w_aa, w_ba) == ("0.269", "0.731")
    right = sa.attend(p).weights.decimal("a", "a", sa.Rounding(places=3)).text
    assert right == "0.731"
    v = c.check("weights", "[[0.269, 0.269], [0.731, 0.731]]")      # each column sums to 1
    assert v.code == "mistake" and v.mistake == "softmax-over-columns"
    assert v.also == []
    # K·Qᵀ gives [[0.269, 0.731], [0.731, 0.269]]: the two mistakes share the entry (a, a)
    v = c.check("weights[a, a]", w_aa)
    assert v.code == "mistake"
    assert {v.mistake, *(a.split(" (")[0] for a in v.also)} == {"transposed-scores",
                                                               "softmax-over-columns"}


def test_e_taken_as_2_7(lesson):
    # 2.7^(2/√3) = 3.149, 2.7^(4/√3) = 9.913 (twice): weights 0.137, 0.431, 0.431
    v = lesson.check("weights[I]", "0.137, 0.431, 0.431")
    assert v.code == "mistake" and v.mistake == "e-as-2.7"


def test_keys_used_as_values(lesson):
    # 0.136·[0, 1, 1] + 0.432·[4, 4, 0] + 0.432·[2, 3, 1] = [2.59, 3.16, 0.57]
    v = lesson.check("output[I]", "2.59, 3.16, 0.57")
    assert v.code == "mistake" and v.mistake == "values-from-keys"


def test_scaled_after_softmax(lesson):
    # the unscaled weights of row I (0.0634, 0.468, 0.468) divided by √3
    v = lesson.check("weights[I]", "0.0366, 0.270, 0.270")
    assert v.code == "mistake" and v.mistake == "scaled-after-softmax"


def test_transposed_output(lesson):
    v = lesson.check("output", "[[1.86 2. 1.99] [6.32 7.81 7.48] [1.7 0.27 0.74]]")
    assert v.code == "mistake" and v.mistake == "transposed-output"


def test_early_rounding_is_named_with_its_step(lesson):
    # row 'cats' shifted = [−8/√3, 0, −2/√3] rounded to 2 places: [−4.62, 0, −1.15];
    # e^−4.62 = 0.0098528, e^−1.15 = 0.3166368 (the right values: 0.0098646, 0.3151519)
    mpmath.mp.dps = 30
    assert mpmath.nstr(mpmath.exp(mpmath.mpf("-4.62")), 5) == "0.0098528"
    assert mpmath.nstr(mpmath.exp(mpmath.mpf("-1.15")), 5) == "0.31664"
    assert mpmath.nstr(mpmath.exp(-2 / mpmath.sqrt(3)), 5) == "0.31515"
    v = lesson.check("exp[cats]", "0.00985, 1.00000, 0.31664")
    assert v.code == "mistake" and v.mistake == "early-rounding"
    assert v.mistake_detail == "shifted rounded to 2 places first"
    assert [e.expected for e in v.entries] == ["0.00986", "1.00000", "0.31515"]
    # rounding 'scaled' first instead gives −1.16 and e^−1.16 = 0.31349: not this answer
    assert mpmath.nstr(mpmath.exp(mpmath.mpf("-1.16")), 5) == "0.31349"
    assert v.also == []


def test_early_rounding_of_the_exponentials(lesson):
    # exp row 'cats' rounded to 2 places: [0.01, 1, 0.32], sum 1.33:
    # weights 0.01/1.33 = 0.0075, 1/1.33 = 0.7519, 0.32/1.33 = 0.2406
    v = lesson.check("weights[cats]", "0.008, 0.752, 0.241")
    assert v.code == "mistake" and v.mistake == "early-rounding"
    assert v.mistake_detail == "exp rounded to 2 places first"
    assert [e.expected for e in v.entries] == ["0.007", "0.755", "0.238"]


def test_early_rounding_with_surds_in_V_is_skipped_not_crashed():
    c = Checker(sa.Problem(Q=[[1, 0]], K=[[1, 0], [0, 1]], V=[["sqrt(2)"], [1]]))
    assert c.check("output[0, 0]", "1.1").code in ("wrong", "mistake", "last-digit", "rounded")


def test_the_lessons_e_minus_4_62_is_a_correct_rounding(lesson):
    """The lesson's 'e^(−4.62) ≈ 0.010' is computed from the rounded −4.62, but at the
    3 places written it is also the correct rounding of e^(−8/√3) = 0.00986…: rounded,
    and nothing more is said (the early rounding changes no verdict here)."""
    v = lesson.check("exp[cats, I]", "≈ 0.010")
    assert v.code == "rounded"
    assert v.entries[0].expected == "0.010"
    assert v.also == [] and "early" not in v.message


def test_invalid_figures_say_where_and_why(lesson):
    v = lesson.check("weights", "[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]")
    assert v.code == "invalid"
    assert "shape 3×2 but weights is 3×3" in v.message
    assert lesson.check("weights[dog]", "0.1").code == "invalid"
    assert "no row named 'dog'" in lesson.check("weights[dog]", "0.1").message
    assert lesson.check("weights[I, I]", "import os").code == "invalid"


def test_a_tie_accepts_either_neighbour():
    c = Checker(sa.Problem(Q=[[0, 0]], K=[[1, 0], [0, 1], [1, 1], [2, 2]],
                           V=[[1], [0], [0], [0]]))
    # all scores 0: every weight is exactly 1/4 = 0.25, a tie at 1 place
    assert c.check("weights[0, 0]", "0.3").code == "rounded"
    assert c.check("weights[0, 0]", "0.2").code == "rounded"
    assert c.check("weights[0, 0]", "0.25").code == "exact"
    assert c.check("weights[0, 0]", "1/4").code == "exact"


def test_the_lessons_shipped_figures_all_hold():
    figures = example_figures("i-love-cats")
    verdicts = figures.check()
    assert len(verdicts) >= 45
    assert [v for v in verdicts if not v.right] == []
    targets = {(v.target, v.variant) for v in verdicts}
    for needed in [("sqrt(d_k)", None), ("weights[love]", "unscaled"), ("weights", None),
                   ("sum(exp(scaled[I]))", None), ("weights[query]", "sharpness-25"),
                   ("shifted[cats]", None), ("output", None)]:
        assert needed in targets


def _lesson_text():
    from importlib import resources
    return resources.files("symattn.examples").joinpath("figures/i-love-cats.toml").read_text()


def test_a_copy_with_typos_fails_exactly_on_the_typos():
    text = _lesson_text()
    typo = text.replace('text = "[0.136, 0.432, 0.432]"', 'text = "[0.137, 0.432, 0.432]"')
    typo = typo.replace('text = "[2.31, 9.24, 6.93]"', 'text = "[2.31, 9.42, 6.93]"')
    assert typo.count("0.137") == 1 and typo.count("9.42") == 1
    verdicts = read_figures(typo, source="typos").check()
    bad = [(v.target, v.text) for v in verdicts if not v.right]
    assert bad == [("scaled[love]", "[2.31, 9.42, 6.93]"), ("weights[I]", "[0.137, 0.432, 0.432]")]
    by_target = {v.target: v for v in verdicts if not v.right}
    assert [e.code for e in by_target["scaled[love]"].entries] == ["rounded", "wrong", "rounded"]
    first = by_target["weights[I]"].entries[0]
    assert first.code in ("last-digit", "mistake") and first.expected == "0.136"


def test_figures_file_with_inline_problem_and_variants():
    text = '''
[problem]
tokens = ["a", "b"]
Q = [[1, 0], [0, 1]]
K = [[1, 0], [0, 1]]
V = [[1, 2], [3, 4]]
scale = "1"

[variant.sharp]
scale = "10"

[[figure]]
target = "weights[a, a]"
text = "0.73"

[[figure]]
target = "weights[a, a]"
variant = "sharp"
text = "1.00"

[[figure]]
target = "weights[a, a]"
variant = "nope"
text = "1"

[[figure]]
target = "weights[a]"
text = "0.7 0.3 0.1"
'''
    verdicts = read_figures(text).check()
    assert [v.code for v in verdicts] == ["rounded", "rounded", "invalid", "invalid"]
    assert "no variant named 'nope'" in verdicts[2].message
    assert "figure 4" in verdicts[3].message


@pytest.mark.parametrize("text, words", [
    ("example = 'i-love-cats'", "no figures"),
    ("example = 'nope'\n[[figure]]\ntarget='Q'\ntext='1'", "no example named 'nope'"),
    ("example = 'i-love-cats'\n[variant.v]\nW_q = [[1]]\n[[figure]]\ntarget='Q'\ntext='1'", "W_q"),
    ("[[figure]]\ntarget='Q'\ntext='1'", "name the problem"),
    ("example = 'i-love-cats'\ncolour = 1\n[[figure]]\ntarget='Q'\ntext='1'", "unknown key 'colour'"),
    ("example = ", "not valid TOML"),
])
def test_files_that_cannot_be_checked(text, words):
    with pytest.raises(FiguresError) as err:
        read_figures(text, source="f.toml")
    assert words in str(err.value)


def test_labelled_soft_dictionary_row_in_any_order():
    c = Checker(sa.load_example("soft-dictionary"))
    assert c.check("weights[query]", "red=0.41  green=0.22  orange=0.37").code == "rounded"
    assert c.check("weights[query]", "orange=0.37 red=0.41 green=0.22").code == "rounded"
    v = c.check("weights[query]", "red=0.41  blue=0.22  orange=0.37")
    assert v.code == "invalid" and "not the columns" in v.message
