"""The named mistakes of the backward pass (issue 20, scope 3): each wrong figure is computed
here independently, in numpy float64 on a small problem (never with the code under test), and
``check`` must name that mistake; the right figures are judged right, with no mistake named.

The problem has n = m = d_v = 3 (so dV = P·dO, dK = dS·Q and dP = dO·V have the right shapes) and
d_k = 2 (scale 1/√2, so the scale forgotten, doubled or left out of the forward all differ).  The
figures are written at 3 places; each mistake's figure differs from the right one and from every
other mistake's figure for the same target (asserted below, so a coincidence cannot pass)."""

from __future__ import annotations

import numpy as np
import pytest

from symattn.check.checker import Checker
from symattn.check.mistakes.backward import BACKWARD_CODES
from symattn.check.mistakes.catalog import MISTAKE_CODES
from symattn.problem.problem import Problem

Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 2], [0, 1], [2, 0]]
V = [[1, 2, 0], [3, -1, 1], [0, 1, 2]]
G = [[1, 0, 2], [0, 2, -1], [-1, 1, 0]]
T = [[1, 1, 0], [2, 0, 1], [0, 1, 1]]         # the target of the half-squared-error problem
STEPS = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")


def backward(*, scale: float = 1 / np.sqrt(2), target: bool = False, change: str = "",
             places: int | None = None) -> dict[str, np.ndarray]:
    """The backward pass by hand in float64, with one mistake (``change``)."""
    q, k, v = (np.array(x, dtype=float) for x in (Q, K, V))
    s = q @ k.T * scale
    P = np.exp(s - s.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dO = P @ v - np.array(T, dtype=float) if target else np.array(G, dtype=float)
    if change == "round-P":
        P = np.round(P, places)
    dP = dO @ v if change == "dp-not-transposed" else dO @ v.T
    if change == "round-dP":
        dP = np.round(dP, places)
    D = dP.sum(axis=1, keepdims=True) if change == "row-dot-as-row-sum" else \
        (P * dP).sum(axis=1, keepdims=True)
    dS = P * dP if change == "forgot-row-dot" else P * (dP - D)
    factor = {"backward-unscaled": 1.0, "backward-scaled-twice": scale ** 2}.get(change, scale)
    dSs = dS * factor
    out = {"d_output": dO, "d_V": P @ dO if change == "dv-not-transposed" else P.T @ dO,
           "d_weights": dP, "row_dot": D, "d_logits": dS, "d_scores": dSs, "d_Q": dSs @ k,
           "d_K": dSs @ q if change == "dk-not-transposed" else dSs.T @ q}
    if change == "gradient-ascent":
        out = {name: -value for name, value in out.items()}
    return out


def text(rows: np.ndarray) -> str:
    return "; ".join(", ".join(f"{x:.3f}" for x in row) for row in np.atleast_2d(rows))


def problem(target: bool = False) -> Problem:
    back = {"loss": "half-squared-error", "target": T} if target else {"grad_output": G}
    return Problem(Q=Q, K=K, V=V, backward=back)


@pytest.fixture(scope="module")
def checkers() -> dict[bool, Checker]:
    return {False: Checker(problem()), True: Checker(problem(target=True))}


#: (code, what check names, the step it shows in, the HSE problem?, hand change, its keywords)
CASES = [
    ("forgot-row-dot", "forgot-row-dot", "d_logits", False, {}),
    ("forgot-row-dot", "forgot-row-dot", "d_Q", False, {}),
    ("row-dot-as-row-sum", "row-dot-as-row-sum", "row_dot", False, {}),
    ("row-dot-as-row-sum", "row-dot-as-row-sum", "d_K", False, {}),
    ("dp-not-transposed", "dp-not-transposed", "d_weights", False, {}),
    ("dp-not-transposed", "dp-not-transposed", "d_logits", False, {}),
    ("dv-not-transposed", "dv-not-transposed", "d_V", False, {}),
    ("dk-not-transposed", "dk-not-transposed", "d_K", False, {}),
    ("backward-unscaled", "backward-unscaled", "d_scores", False, {}),
    ("backward-unscaled", "backward-unscaled", "d_Q", False, {}),
    ("backward-scaled-twice", "backward-scaled-twice", "d_Q", False, {}),
    ("backward-scaled-twice", "backward-scaled-twice", "d_K", False, {}),
    ("unscaled-forward", "unscaled-forward", "d_V", False, {"scale": 1.0}),
    ("unscaled-forward", "unscaled-forward", "d_Q", False, {"scale": 1.0}),
    ("unscaled-forward", "unscaled-forward", "d_output", True, {"scale": 1.0}),
    ("gradient-ascent", "gradient-ascent", "d_Q", False, {}),
    ("gradient-ascent", "gradient-ascent", "d_V", True, {}),
    ("round-P", "early-rounding", "d_V", False, {"places": 2}),
    ("round-P", "early-rounding", "d_logits", False, {"places": 2}),
    ("round-dP", "early-rounding", "d_logits", True, {"places": 2}),
    ("round-dP", "early-rounding", "row_dot", True, {"places": 2}),
]


@pytest.mark.parametrize("change, code, step, target, keywords", CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_mistake_is_named_from_its_figure(checkers, change, code, step, target, keywords):
    hand = change if change not in ("unscaled-forward",) else ""
    wrong = backward(target=target, change=hand, **keywords)[step]
    right = backward(target=target)[step]
    assert text(wrong) != text(right), "the test numbers must separate the mistake"
    verdict = checkers[target].check(step, text(wrong))
    assert verdict.code == "mistake" and verdict.mistake == code, verdict.message
    if code == "early-rounding":
        rounded = "weights" if change == "round-P" else "d_weights"
        assert verdict.mistake_detail.startswith(f"{rounded} rounded to 2 places")
    row = checkers[target].check(f"{step}[1]", text(wrong[1]))    # one row shows it too
    assert row.right or row.mistake == code or any(a.startswith(code) for a in row.also)  # a slip


def test_the_mistakes_figures_differ_from_each_other():
    """No two changes give the same figure for the steps the cases use (else the test could
    pass by the wrong name)."""
    for step in STEPS:
        seen: dict[str, str] = {}
        for change, _, _, target, keywords in CASES:
            if target:
                continue
            hand = change if change != "unscaled-forward" else ""
            figure = text(backward(change=hand, **keywords)[step])
            if figure == text(backward()[step]):
                continue           # the change does not reach this step
            assert seen.setdefault(figure, change) == change, (step, change, seen[figure])


@pytest.mark.parametrize("target", [False, True])
@pytest.mark.parametrize("step", STEPS)
def test_a_right_gradient_is_never_called_wrong(checkers, step, target):
    right = backward(target=target)[step]
    verdict = checkers[target].check(step, text(right))
    assert verdict.right and verdict.mistake is None, verdict.message
    for i in range(right.shape[0]):
        assert checkers[target].check(f"{step}[{i}]", text(right[i])).right


@pytest.mark.parametrize("step", STEPS)
def test_no_mistake_is_named_for_a_figure_that_shows_none(checkers, step):
    wrong = backward()[step].copy()
    wrong.flat[0] += 0.37
    wrong.flat[-1] -= 0.21
    verdict = checkers[False].check(step, text(wrong))
    assert not verdict.right and verdict.mistake is None, verdict.message


def test_the_codes_are_registered():
    assert set(BACKWARD_CODES) <= set(MISTAKE_CODES)


def test_a_forward_problem_has_no_backward_mistakes():
    checker = Checker(Problem(Q=Q, K=K, V=V))
    assert not {m.code for m in checker.mistakes.fixed} & set(BACKWARD_CODES)
