"""A programming error surfaces; only a value that cannot be had is passed over (issue 19).

Where symattn passes over a failure on purpose (SymPy cannot give a minimal polynomial, a
mistake's variant cannot be certified, a carried-forward pair cannot be followed) it catches
:data:`symattn.errors.VALUE_FAILURES` (and SymPy's own errors in the exact tests), never
``Exception``.  Each test plants a bug (an AttributeError or KeyError from a monkeypatched
function) and sees it raised, then plants a real failure of the same call and sees it passed
over as before.
"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest
import sympy
from sympy.polys.polyerrors import NotAlgebraic

import symattn as sa
from symattn.check.checker import Checker
from symattn.check.grading import grade as grading
from symattn.check.grading.grade import Versions, grade
from symattn.check.verdict import MistakeCell, MistakeSet
from symattn.errors import CertificationError
from symattn.numbers import certify as certify_module
from symattn.numbers import compare as compare_module
from symattn.numbers.certify import Rounding, certify

#: 1/8 written so that SymPy keeps it unevaluated: (√2 + 1)² − 2√2 − 3 + 1/8
EIGHTH = (sympy.sqrt(2) + 1) ** 2 - 2 * sympy.sqrt(2) - 3 + sympy.Rational(1, 8)


def test_the_tie_is_decided_by_its_minimal_polynomial():
    assert not isinstance(EIGHTH, sympy.Rational)
    assert certify(EIGHTH, places=2).text == "0.13"       # 0.125 rounded half away from zero
    assert certify(EIGHTH, places=2).exact is False


@pytest.mark.parametrize("bug", [AttributeError, KeyError])
def test_a_bug_in_the_exact_rational_fallback_surfaces(monkeypatch, bug):
    def planted(*args, **kwargs):
        raise bug("planted")
    monkeypatch.setattr(certify_module, "minimal_polynomial", planted)
    with pytest.raises(bug):
        certify(EIGHTH, places=2)


@pytest.mark.parametrize("failure", [NotAlgebraic, NotImplementedError, OverflowError])
def test_sympy_failing_in_the_fallback_leaves_the_tie_undecided(monkeypatch, failure):
    def fails(*args, **kwargs):
        raise failure("SymPy could not")
    monkeypatch.setattr(certify_module, "minimal_polynomial", fails)
    with pytest.raises(CertificationError, match="rounding boundary"):
        certify(EIGHTH, places=2)


ZERO = (sympy.sqrt(2) + 1) ** 2 - 2 * sympy.sqrt(2) - 3     # exactly 0, unevaluated


def test_a_bug_in_the_exact_zero_test_surfaces(monkeypatch):
    assert compare_module.sign(ZERO) == 0

    def planted(*args, **kwargs):
        raise KeyError("planted")
    monkeypatch.setattr(compare_module, "minimal_polynomial", planted)
    with pytest.raises(KeyError):
        compare_module.sign(ZERO)


def test_sympy_failing_in_the_exact_zero_test_is_undecided(monkeypatch):
    def fails(*args, **kwargs):
        raise NotAlgebraic("SymPy could not")
    monkeypatch.setattr(compare_module, "minimal_polynomial", fails)
    with pytest.raises(CertificationError):
        compare_module.sign(ZERO)


class _Cell:
    """A mistake's cell whose rounding raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def rounded_value(self, rounding: Rounding) -> Fraction:
        raise self.error


def _written() -> SimpleNamespace:
    return SimpleNamespace(rounding=Rounding(digits=3), value=Fraction(136, 1000))


def test_a_bug_in_a_mistakes_value_surfaces():
    mistakes = MistakeSet([MistakeCell("early-rounding", "", _Cell(AttributeError("planted")))])
    with pytest.raises(AttributeError):
        mistakes.matching(_written())


def test_a_mistake_that_cannot_be_certified_explains_nothing():
    good = SimpleNamespace(rounded_value=lambda rounding: Fraction(136, 1000))
    mistakes = MistakeSet([MistakeCell("early-rounding", "", _Cell(CertificationError("no"))),
                           MistakeCell("no-scale", "", good)])
    assert [m.code for m in mistakes.matching(_written())] == ["no-scale"]


@pytest.fixture(scope="module")
def lesson():
    return Versions(single=sa.load_example("i-love-cats"))


CLASS = "student,weights[I, I]\nann,0.136\nbob,0.14\n"


def test_a_bug_in_carry_forward_stops_the_grading(lesson, monkeypatch):
    def planted(*args, **kwargs):
        raise KeyError("planted")
    monkeypatch.setattr(grading, "carry_forward", planted)
    with pytest.raises(KeyError):
        grade(lesson, CLASS)


def test_a_carry_forward_that_cannot_be_followed_leaves_the_verdicts(lesson, monkeypatch):
    expected = [r.verdicts[0].code for r in grade(lesson, CLASS).rows]
    assert expected == ["rounded", "rounded"]

    def fails(*args, **kwargs):
        raise CertificationError("not followable")
    monkeypatch.setattr(grading, "carry_forward", fails)
    assert [r.verdicts[0].code for r in grade(lesson, CLASS).rows] == expected


def test_a_bug_in_named_mistake_surfaces(monkeypatch):
    checker = Checker(sa.load_example("i-love-cats"))
    assert checker.named_mistake("weights[I, I]", "0.136") is None

    def planted(*args, **kwargs):
        raise AttributeError("planted")
    monkeypatch.setattr(checker, "target", planted)
    with pytest.raises(AttributeError):
        checker.named_mistake("weights[I, I]", "0.136")
    with pytest.raises(AttributeError):
        checker.right_or_slip("weights[I, I]", "0.136")
