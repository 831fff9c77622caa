"""Reading written figures: values are exact, precision comes from the text."""

from fractions import Fraction

import pytest
import sympy

from symattn.numbers.certify import Rounding
from symattn.check.figures import WrittenExact, WrittenNumber, read_figure
from symattn.errors import ParseError


def one(text):
    w = read_figure(text)
    assert w.shape == (1, 1)
    return w.entries[0]


@pytest.mark.parametrize("text, value, rounding", [
    ("0.136", Fraction(136, 1000), Rounding(places=3)),
    (".14", Fraction(14, 100), Rounding(places=2)),
    ("13.6%", Fraction(136, 1000), Rounding(places=3)),
    ("43%", Fraction(43, 100), Rounding(places=2)),
    ("−4.62", Fraction(-462, 100), Rounding(places=2)),
    ("≈ 0.010", Fraction(1, 100), Rounding(places=3)),
    ("~0.010", Fraction(1, 100), Rounding(places=3)),
    ("0.", Fraction(0), Rounding(places=0)),
    ("2.", Fraction(2), Rounding(places=0)),
    ("255", Fraction(255), Rounding(places=0)),
    ("1.14e-7", Fraction(114, 10**9), Rounding(digits=3)),
    ("1.0E3", Fraction(1000), Rounding(digits=2)),
])
def test_a_number_keeps_the_precision_of_its_text(text, value, rounding):
    e = one(text)
    assert isinstance(e, WrittenNumber)
    assert e.value == value
    assert e.rounding == rounding


def test_the_unit_is_one_in_the_last_written_place():
    assert one("0.010").unit == Fraction(1, 1000)
    assert one("13.6%").unit == Fraction(1, 1000)
    assert one("2.").unit == 1


@pytest.mark.parametrize("text, value", [
    ("2/√3", 2 / sympy.sqrt(3)),
    ("2 / √3", 2 / sympy.sqrt(3)),
    ("2/sqrt(3)", 2 * sympy.sqrt(3) / 3),
    ("e^(2/√3)", sympy.exp(2 / sympy.sqrt(3))),
    ("1/3", sympy.Rational(1, 3)),
])
def test_an_expression_is_read_exactly(text, value):
    e = one(text)
    assert isinstance(e, WrittenExact)
    assert sympy.simplify(e.value - value) == 0


@pytest.mark.parametrize("text", ["0.14, 0.43, 0.43", "[0.14 0.43 0.43]", "[0.14, 0.43, 0.43]",
                                  "0.14 0.43 0.43", "≈ [0.14, 0.43, 0.43]", "0.14 / 0.43 / 0.43"])
def test_rows(text):
    w = read_figure(text)
    assert w.shape == (1, 3) and w.vector
    assert [e.value for e in w.entries] == [Fraction(14, 100), Fraction(43, 100), Fraction(43, 100)]


def test_numpy_printed_matrix_pasted_verbatim():
    w = read_figure("[[0.14 0.43 0.43]\n [0.   0.91 0.09]\n [0.01 0.75 0.24]]")
    assert w.shape == (3, 3) and not w.vector
    zero = w.rows[1][0]
    assert zero.value == 0 and zero.rounding == Rounding(places=0)   # numpy's '0.' has 0 places
    assert w.rows[2][2].value == Fraction(24, 100)


def test_numpy_trailing_space_and_short_entries():
    w = read_figure("[[1.86 6.32 1.7 ]\n [2.   7.81 0.27]]")
    assert w.shape == (2, 3)
    assert w.rows[0][2].rounding == Rounding(places=1)
    assert w.rows[1][0].rounding == Rounding(places=0)


@pytest.mark.parametrize("text", ["[[1, 2], [3, 4]]", "1 2; 3 4", "1, 2\n3, 4", "[1 2; 3 4]",
                                  "array([[1., 2.], [3., 4.]])", "[1 2]\n[3 4]"])
def test_matrices(text):
    w = read_figure(text)
    assert w.shape == (2, 2)
    assert [e.value for e in w.entries] == [1, 2, 3, 4]


def test_an_expression_inside_a_row_keeps_its_parentheses():
    w = read_figure("[e^(2/√3), e^(4 / √3), 1]")
    assert w.shape == (1, 3)
    assert w.rows[0][1].value == sympy.exp(4 / sympy.sqrt(3))


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("[[1, 2], [3]]", "row 1 has 1 entries but row 0 has 2"),
    ("[[[1]]]", "deeper than a matrix"),
    ("[1, 2", "unbalanced"),
    ("1, , 2", "empty"),
    ("12%%", "percentage"),
    ("0.1\x00", "NUL"),
    ("__import__('os')", "cannot read"),
])
def test_bad_figures_say_what_is_wrong(text, words):
    with pytest.raises(ParseError) as err:
        read_figure(text)
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_labelled_entries_as_python_prints_them():
    w = read_figure("red=0.41  green=0.22  orange=0.37")
    assert w.labels == ("red", "green", "orange") and w.shape == (1, 3)
    assert w.entries[1].value == Fraction(22, 100)
    with pytest.raises(ParseError):
        read_figure("red=0.41 red=0.22")
