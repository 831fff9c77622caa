"""Checking and grading figures of the backward pass (issue 20, scope 3): every backward step is a
target like the forward ones (whole steps, rows, entries), judged at its written precision,
and a gradient right for the student's own earlier figure is carried forward when grading.

The expected figures are computed here independently, in numpy float64 (the problem is small and
well away from rounding ties: each is checked against the 60-digit decimals too)."""

from __future__ import annotations

import numpy as np
import pytest

import symattn as sa
from clirun import cli as run
from symattn.check.checker import Checker
from symattn.check.grading.grade import Versions, grade
from symattn.problem.problem import Problem

Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 2], [0, 1], [2, 0]]
V = [[1, 2], [3, -1], [0, 1]]
G = [[1, 0], [0, 2], [-1, 1]]
STEPS = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")


def problem() -> Problem:
    return Problem(Q=Q, K=K, V=V, backward={"grad_output": G})


def reference() -> dict[str, np.ndarray]:
    """The backward pass by hand, float64 (FlashAttention-2's Algorithm 2)."""
    q, k, v, dO = (np.array(x, dtype=float) for x in (Q, K, V, G))
    s = q @ k.T / np.sqrt(2)
    P = np.exp(s - s.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = dO @ v.T
    D = (P * dP).sum(axis=1, keepdims=True)
    dS = P * (dP - D)
    dSs = dS / np.sqrt(2)
    return {"weights": P, "d_output": dO, "d_V": P.T @ dO, "d_weights": dP, "row_dot": D,
            "d_logits": dS, "d_scores": dSs, "d_Q": dSs @ k, "d_K": dSs.T @ q}


def text(rows: np.ndarray, places: int = 3) -> str:
    return "; ".join(", ".join(f"{x:.{places}f}" for x in row) for row in np.atleast_2d(rows))


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(problem())


@pytest.mark.parametrize("step", STEPS)
def test_every_backward_step_is_a_target_whole_by_row_and_by_entry(checker, step):
    ref = reference()[step]
    assert checker.check(step, text(ref)).right
    assert checker.check(f"{step}[1]", text(ref[1])).right
    assert checker.check(f"{step}[2, 0]", f"{ref[2, 0]:.4f}").right
    assert checker.check(f"{step}[0, 0]", f"{ref[0, 0]:.1f}").right      # at its written precision
    wrong = ref.copy()
    wrong[0, 0] += 0.25
    verdict = checker.check(step, text(wrong))
    assert not verdict.right and verdict.entries[0].code == "wrong"
    assert all(e.right for e in verdict.entries[1:])                   # entry by entry


def test_a_last_digit_slip_in_a_gradient(checker):
    ref = reference()["d_Q"]
    slipped = [[f"{x:.3f}" for x in row] for row in ref]
    last = slipped[1][1]
    slipped[1][1] = f"{float(last) + 0.001:.3f}"
    verdict = checker.check("d_Q", "; ".join(", ".join(r) for r in slipped))
    assert verdict.code == "last-digit" and verdict.mistake is None


def test_the_cli_checks_a_figures_file_of_gradients(tmp_path):
    ref = reference()
    (tmp_path / "p.toml").write_text(
        f"Q = {Q}\nK = {K}\nV = {V}\nbackward = {{ grad_output = {G} }}\n")
    figures = 'problem = "p.toml"\n\n' + "".join(f'[[figure]]\ntarget = "{s}"\ntext = "{text(ref[s])}"\n\n' for s in STEPS)
    (tmp_path / "f.toml").write_text(figures)
    result = run("check", str(tmp_path / "f.toml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "d_K" in result.stdout


def _grade(columns: dict[str, str]) -> list[tuple[str, str | None]]:
    header = "student," + ",".join(columns)
    row = "ann," + ",".join(f'"{v}"' for v in columns.values())
    report = grade(Versions(single=problem()), f"{header}\n{row}\n")
    return [(v.code, v.mistake) for v in report.rows[0].verdicts]


def test_a_slip_in_dP_is_carried_into_D_and_dS():
    ref = reference()
    P = ref["weights"][1]
    dP = ref["d_weights"][1].copy()
    dP[0] += 1                                        # 3 + 1 for dO·Vᵀ at (1, 0)
    D = round((P * dP).sum(), 3)
    got = _grade({"d_weights[1]": text(dP), "row_dot[1]": f"{D:.3f}",
                  "d_logits[1]": text(P * (dP - D))})
    assert got == [("wrong", None), ("mistake", "carried-forward"), ("mistake", "carried-forward")]


def test_a_slip_in_P_is_carried_into_dV_and_a_slip_in_dS_into_dQ_and_dK():
    ref = reference()
    P = ref["weights"].copy()
    P[0] = [0.5, 0.25, 0.25]
    P = np.round(P, 3)                                # the student's own figure, as written
    got = _grade({"weights": text(P), "d_V": text(P.T @ ref["d_output"])})
    assert got == [("wrong", None), ("mistake", "carried-forward")]
    dS = ref["d_logits"].copy()
    dS[2, 1] += 0.5
    dS = np.round(dS, 3)
    dSs = np.round(dS / np.sqrt(2), 3)
    k, q = np.array(K, dtype=float), np.array(Q, dtype=float)
    got = _grade({"d_logits": text(dS), "d_scores": text(dSs), "d_Q": text(dSs @ k),
                  "d_K": text(dSs.T @ q)})
    assert got == [("wrong", None), *[("mistake", "carried-forward")] * 3]


def test_a_wrong_later_gradient_is_not_carried():
    ref = reference()
    dP = ref["d_weights"][1].copy()
    dP[0] += 1
    D = (ref["weights"][1] * dP).sum()
    got = _grade({"d_weights[1]": text(dP), "row_dot[1]": f"{D + 0.1:.3f}"})
    assert got == [("wrong", None), ("wrong", None)]


def test_the_reference_is_far_from_rounding_ties():
    """The float64 reference rounds as the exact values do (the test numbers are safe)."""
    trace = sa.attend(problem())
    ref = reference()
    for step in STEPS:
        exact = trace.step(step).decimals(sa.Rounding(places=4))
        assert text(ref[step], 4) == "; ".join(", ".join(d.text for d in row) for row in exact)
