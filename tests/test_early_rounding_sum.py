"""Issue 25: a running sum worked from exponentials rounded to the places written is early
rounding, not a slip in the last digit; an early rounding to other places stays last-digit."""

import math

import symattn as sa
from symattn.check.checker import Checker


def test_a_running_sum_from_rounded_terms_is_early_rounding():
    # e^(2−3) + e^(1−3) + e^0 = 1.5032…, but 0.37 + 0.14 + 1 = 1.51 (each term to 2 places)
    assert round(math.exp(-1), 2) + round(math.exp(-2), 2) + 1 == 1.51
    assert round(math.exp(-1) + math.exp(-2) + 1, 2) == 1.50
    checker = Checker(sa.load_example("online-softmax"))
    verdict = checker.check("running_sum[q2, 1]", "1.51")
    assert verdict.code == "mistake" and verdict.mistake == "early-rounding"
    assert "rounded to 2 places" in (verdict.mistake_detail or "")
    assert checker.check("running_sum[q2, 1]", "1.50").code == "rounded"


def test_early_rounding_to_other_places_does_not_outrank_a_slip():
    checker = Checker(sa.load_example("i-love-cats"))
    verdict = checker.check("weights[I, I]", "0.137")      # right: 0.136; shifted at 2 places gives 0.137
    assert verdict.code == "last-digit" and verdict.mistake is None
