"""The bulk reader of decimal matrices (symattn.problem.matrix._decimal_numerals): numerals with
one number of decimals are checked by one search over the joined text and read by C loops;
anything else goes to the entry-by-entry reader.  Every value is checked against Python's
Fraction of the same text, and every hostile entry must give what the entry-by-entry reader
gives (the same value, or the same error)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from symattn.errors import SymattnError
from symattn.problem import matrix as matrix_module
from symattn.problem.matrix import _decimal_numerals, exact_matrix


def _fractions(m) -> list[list[Fraction]]:
    return [[Fraction(int(m[i, j].p), int(m[i, j].q)) for j in range(m.ncols())] for i in range(m.nrows())]


def _numeral(rng: random.Random, places: int) -> str:
    sign = rng.choice(["", "", "-", "+"])
    whole = str(rng.randint(0, 10 ** rng.randint(0, 6) - 1)).zfill(rng.choice([1, 1, 2]))[-6:]
    return sign + whole + ("" if places == 0 else "." + "".join(rng.choice("0123456789") for _ in range(places)))


@pytest.mark.parametrize("places", [0, 1, 2, 5, 12, 60])
def test_uniform_numerals_are_their_fractions(places):
    rng = random.Random(places)
    rows = [[_numeral(rng, places) for _ in range(7)] for _ in range(5)]
    if places == 0:
        rows[1][2] = "12."                        # a bare point: still no decimals
    read = _decimal_numerals(rows)
    assert read is not None
    values, largest = read
    expected = [[Fraction(x) for x in row] for row in rows]
    assert _fractions(values) == expected
    assert Fraction(int(largest.p), int(largest.q)) == max(abs(x) for row in expected for x in row)
    # the uniform reader took them (not the entry-by-entry one)
    assert matrix_module._uniform_numerals([x for row in rows for x in row]) is not None


def test_mixed_places_are_read_one_by_one_with_the_same_values():
    rows = [["1", "-0.25", "+3.5"], ["0.125", "-7", "2.0"]]
    flat = [x for row in rows for x in row]
    assert matrix_module._uniform_numerals(flat) is None
    values, largest = _decimal_numerals(rows)
    assert _fractions(values) == [[Fraction(x) for x in row] for row in rows]
    assert largest == 7
    assert exact_matrix("Q", rows).max_abs().contains(7)


def _entry_by_entry(rows):
    """What the reader gives without the bulk path (the reference for hostile entries)."""
    saved = matrix_module._decimal_numerals
    matrix_module._decimal_numerals = lambda rows: None
    try:
        return _outcome(rows)
    finally:
        matrix_module._decimal_numerals = saved


def _outcome(rows):
    try:
        m = exact_matrix("Q", rows)
    except SymattnError as e:
        return type(e).__name__, str(e)
    return "ok", str(m.rational if m.rational is not None else m.general)


@pytest.mark.parametrize("bad", ["1.5\n2.5", "1.5\n", "\n1.5", "1.5 ", " 1.5", "١.5", "1_0.5", "1.5e3",
                                 "1234567.5", "", ".5", "1.50", "--1.5", "1.5\r", "2"])
def test_an_entry_unlike_the_others_gives_what_the_entry_by_entry_reader_gives(bad):
    rows = [["1.5", "-2.5"], ["0.5", bad]]
    flat = [x for row in rows for x in row]
    assert matrix_module._uniform_numerals(flat) is None      # the bulk path leaves them all
    assert _outcome(rows) == _entry_by_entry(rows)


def test_entries_that_are_not_strings_take_the_general_path():
    rows = [["1.5", 2], ["0.5", "1.0"]]
    assert _decimal_numerals(rows) is None
    assert _outcome(rows) == ("ok", "[3/2, 2]\n[1/2, 1]")


def test_a_large_matrix_is_read_like_fractions():
    rng = random.Random(5)
    rows = [[f"{rng.randint(-30, 30) / 10:.1f}" for _ in range(64)] for _ in range(512)]
    values, largest = _decimal_numerals(rows)
    assert _fractions(values) == [[Fraction(x) for x in row] for row in rows]
    assert largest == 3
