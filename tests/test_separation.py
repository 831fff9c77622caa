"""The shortcuts that make worksheet separation fast give check's own answers.

``Checker.named_mistake`` (the verdict without messages) must name what ``check`` names, and
``Checker.right_or_slip`` (decided without any mistake) must be True only where ``check`` names
no mistake; both over every modelled mistake's answer to every question of the lesson and of
the causal lesson, at significant digits and at places, plus right answers, one-digit slips
and unreadable text.  ``separates`` must keep the versions it kept before the speed-up (the
first three of seed 2026, by their problem files' numbers).
"""

from __future__ import annotations

import hashlib

import pytest

import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.check.checker import Checker
from symattn.classroom.worksheets.sheets import QUESTIONS, seeded_versions
from symattn.classroom.worksheets.wrong_answers import answer_texts, figure, wrong_answers
from symattn.classroom.worksheets.versions import spec_from_problem


def _slip(values):
    """The right answer with its first entry one unit off in its last place."""
    first = values[0][0]
    digits = first.lstrip("-")
    places = len(digits.split(".")[1]) if "." in digits else 0
    unit = 10 ** -places
    bumped = f"{float(first) + unit:.{places}f}"
    return ((bumped, *values[0][1:]), *values[1:])


@pytest.mark.parametrize("example, rounding", [
    ("i-love-cats", Rounding(digits=3)), ("i-love-cats", Rounding(places=2)),
    ("i-love-cats-causal", Rounding(places=2)), ("i-love-cats-causal", Rounding(digits=2)),
])
def test_named_mistake_and_right_or_slip_agree_with_check(example, rounding):
    trace = sa.Trace(sa.load_example(example))
    checker, fresh = Checker(trace), Checker(trace)
    tried = 0
    for step in QUESTIONS:
        right = answer_texts(trace, step, rounding)
        texts = [figure(right), figure(_slip(right)), "not a number"]
        texts += [figure(w.values) for w in wrong_answers(trace, step, rounding, checker=checker)]
        for text in texts:
            verdict = fresh.check(step, text)
            assert checker.named_mistake(step, text) == verdict.mistake, (step, text)
            if checker.right_or_slip(step, text):   # or early rounding to the places written (a slip's cause)
                assert verdict.mistake in (None, "early-rounding") and \
                    verdict.code in ("exact", "rounded", "last-digit", "mistake")
            tried += 1
    assert tried >= 30


def test_right_and_slip_are_decided_without_mistakes():
    trace = sa.Trace(sa.load_example("i-love-cats"))
    checker = Checker(trace)
    right = answer_texts(trace, "weights", Rounding(places=3))
    assert checker.right_or_slip("weights", figure(right))
    assert checker.right_or_slip("weights", figure(_slip(right)))
    assert not checker.right_or_slip("weights", "0.5, 0.5, 0; 0, 1, 0; 0, 0, 1")
    assert not checker._mistake_cells          # no mistake was built for these answers


@pytest.mark.parametrize("example, rounding, digest", [
    ("i-love-cats", Rounding(digits=3),
     "89688f70bfb3977af26657d0207fb4368bd6de0ca623837bd445837d5b5aaccd"),
    ("i-love-cats-causal", Rounding(places=2),
     "f81c4d57963dab0363dddaeb88c82196b3d1c56e472f036715b55f0cffb3c559"),
])
def test_the_versions_are_the_ones_kept_before(example, rounding, digest):
    """Seed 2026, 3 versions: the problem files are byte for byte those the code before the
    speed-up wrote (their SHA-256, computed with that code; 30 versions of both shapes were
    compared in full when it landed)."""
    spec = spec_from_problem(sa.load_example(example))
    versions = seeded_versions(spec, 2026, 3, separate=(QUESTIONS, rounding))
    assert hashlib.sha256("".join(v.toml for v in versions).encode()).hexdigest() == digest
