"""Versions of problems with five or more keys (issue 25): the defaults make them.

On main before this, ``symattn worksheet --versions 3`` on a 5-token causal problem gave up
("found only 0 of 3 hand-friendly versions"): every row had to have all its scores distinct,
and with d_k = 2 and entries −1..1 a row of five keys has only five possible scores."""

from __future__ import annotations

from fractions import Fraction

import symattn as sa
from symattn.classroom.worksheets.sheets import seeded_versions
from symattn.classroom.worksheets.versions import LONG_ROWS, RandomSpec, spec_from_problem
from symattn.classroom.worksheets.wrong_answers import separates
from symattn.classroom.worksheets.questions import asked_steps, default_questions
from symattn.numbers.certify import Rounding
from clirun import cli

CAUSAL5 = """tokens = ["the", "cat", "sat", "on", "mat"]
mask = "causal"
Q = [[1, 0], [0, 1], [1, 1], [1, 0], [0, 1]]
K = [[1, 0], [0, 1], [1, 1], [0, 1], [1, 0]]
V = [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]]
"""


def test_a_five_token_causal_problem_makes_versions_with_the_defaults(tmp_path):
    (tmp_path / "five.toml").write_text(CAUSAL5)
    done = cli("worksheet", "five.toml", "--versions", "3", "--seed", "1", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote ") and "versions A, B, C" in done.stdout
    for vid in "ABC":
        problem = sa.Problem.from_toml(tmp_path / "out" / f"version-{vid}.toml")
        assert tuple(problem.tokens) == ("the", "cat", "sat", "on", "mat") and problem.mask_kind == "causal"
        trace = sa.Trace(problem)
        scores = trace.step("scores")
        weights = trace.step("weights").decimals(Rounding(digits=3))
        for i in range(5):
            row = [scores[i, j] for j in trace.allowed(i)]
            assert len(row) == i + 1
            assert row.count(max(row)) == 1, (vid, i, row)          # one key gets the most weight
            assert all(weights[i][j].as_fraction() >= Fraction(1, 100) for j in trace.allowed(i))
        rounding = Rounding(digits=3)
        assert separates(trace, asked_steps(trace, default_questions(trace)), rounding)


def test_long_rows_relax_only_the_ties_and_the_range_of_x():
    """Five keys or more: only the largest score must be unique, and X is drawn from 0 to 1.
    Fewer keys keep every rule (and so the same versions as before, byte for byte)."""
    lesson = spec_from_problem(sa.load_example("i-love-cats"))
    assert (lesson.unique_max_only, lesson.x_range) == (False, (0, 2))
    five = spec_from_problem(sa.Problem.from_toml_text(CAUSAL5))
    assert LONG_ROWS == 5 and (five.unique_max_only, five.x_range) == (True, (0, 1))
    assert spec_from_problem(sa.Problem.from_toml_text(CAUSAL5), x_range=(0, 2)).x_range == (0, 2)
    assert spec_from_problem(sa.Problem.from_toml_text(CAUSAL5), allow_ties=True).allow_ties
    assert RandomSpec().unique_max_only is False


def test_a_five_token_projected_causal_problem_keeps_its_shape():
    data = {"tokens": ["the", "cat", "sat", "on", "mat"], "mask": "causal",
            "X": [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1], [2, 0, 1, 0], [0, 1, 2, 1]],
            "W_q": [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
            "W_k": [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
            "W_v": [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]}
    problem = sa.Problem.from_dict(data)
    spec = spec_from_problem(problem)
    versions = seeded_versions(spec, 7, 2, separate=(default_questions(sa.Trace(problem)),
                                                      Rounding(digits=3)))
    for v in versions:
        X = v.trace.problem.inputs["X"].to_sympy()
        assert X.shape == (5, 4) and set(X) <= {0, 1}
