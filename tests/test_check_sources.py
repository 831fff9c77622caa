"""Mistake sources and version look-ups that the type checker showed were fragile (issue 19)."""

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import pytest
import sympy

import symattn as sa
from symattn.check.grading.grade import GradeError, Versions
from symattn.check.mistakes.catalog import _RoundedWeightsSource
from symattn.numbers.certify import Rounding


def _hand_output(trace, i: int, j: int, places: int) -> Fraction:
    """Σ_k round(w_ik, places)·V_kj, the weights rounded from 40 digits with Python's Decimal."""
    total = Fraction(0)
    for k in range(trace.problem.m):
        w = Decimal(str(sympy.N(trace.weights[i, k], 40))).quantize(Decimal(1).scaleb(-places),
                                                                     rounding=ROUND_HALF_EVEN)
        total += Fraction(w) * Fraction(str(trace.V[k, j]))
    return total


def test_rounded_weights_after_a_certified_row_of_another_step():
    # the source once kept its rounded weights in Source's own row cache (the same
    # attribute): a step certified first filled it, and the output then found no weights
    trace = sa.attend(sa.load_example("i-love-cats"))
    source = _RoundedWeightsSource(trace, 2)
    assert source.decimal("weights", 0, 0, Rounding(digits=3)).text == "0.136"
    got = source.exact("output", 0, 0)
    assert Fraction(int(got.p), int(got.q)) == _hand_output(trace, 0, 0, 2)


def test_a_version_asked_of_no_folder_is_a_grade_error():
    with pytest.raises(GradeError, match="no version 'A'"):
        Versions().resolve("A")
