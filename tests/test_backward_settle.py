"""The backward steps are rounded from their balls, not from exact sums (the issue-20 speed).

An entry whose ball is undecided, or near its own decimal, at the first precision is tried
again at twice it before its exact entry (a sum over every row, seconds at n = 128) is built.
Counted through ``stepcert.EXACT_SETTLES``, never timed.  The decimals are checked against an
mpmath computation of the gradient at 60 digits written here.
"""

from __future__ import annotations

import random

import mpmath
import pytest

import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.problem.problem import Problem
from symattn.trace import stepcert
from symattn.trace.backward_balls import PARTIAL_STEPS

BACKWARD = ["lse", "d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K"]


def _problem(n: int, d: int) -> dict[str, list[list[str]]]:
    """The benchmark's seeded problem (benchmarks/bench_backward.py)."""
    rng = random.Random(1)

    def matrix() -> list[list[str]]:
        return [[f"{rng.randint(-99, 99) / 100}" for _ in range(d)] for _ in range(n)]
    return {"Q": matrix(), "K": matrix(), "V": matrix(), "G": matrix()}


def _settles(data: dict[str, list[list[str]]]) -> tuple[int, sa.Trace]:
    trace = sa.attend(Problem(Q=data["Q"], K=data["K"], V=data["V"], backward={"grad_output": data["G"]}))
    stepcert.EXACT_SETTLES.clear()
    for name in BACKWARD:
        trace.step(name).decimals(Rounding(digits=30))
    return sum(stepcert.EXACT_SETTLES[name] for name in BACKWARD), trace


@pytest.mark.parametrize("n, d", [(32, 16), (64, 32)])
def test_random_problem_takes_no_exact_settle(n, d):
    # n = 64, d = 32: one d_scores ball is near its own decimal at the first precision; it
    # was settled from its exact sum before the doubled precision was tried (1 here then)
    count, _ = _settles(_problem(n, d))
    assert count == 0


def test_a_terminating_gradient_is_still_settled_exactly():
    # Q = 0: every weight is 1/2, d_V = Pᵀ·dO is a terminating decimal that no ball decides
    count, trace = _settles({"Q": [["0", "0"], ["0", "0"]], "K": [["1", "2"], ["3", "4"]],
                             "V": [["1", "2"], ["3", "4"]], "G": [["0.3", "0.1"], ["0.7", "0.2"]]})
    assert count >= 4 and stepcert.EXACT_SETTLES["d_V"] == 4
    d_v = trace.step("d_V").decimals(Rounding(digits=30))
    assert [[str(x) for x in row] for row in d_v] == [["0.5", "0.15"], ["0.5", "0.15"]]
    assert all(x.exact for row in d_v for x in row)


def _mp_gradients(data: dict[str, list[list[str]]]) -> tuple[list[list], list[list]]:
    """d_scores and d_K by the formulas written out in mpmath (60 digits)."""
    Q, K, V, G = ([[mpmath.mpf(x) for x in row] for row in data[k]] for k in "QKVG")
    n, d = len(Q), len(Q[0])
    scale = 1 / mpmath.sqrt(d)
    dS = []
    for i in range(n):
        s = [scale * mpmath.fsum(Q[i][c] * K[j][c] for c in range(d)) for j in range(n)]
        top = max(s)
        e = [mpmath.exp(x - top) for x in s]
        z = mpmath.fsum(e)
        p = [x / z for x in e]
        dp = [mpmath.fsum(G[i][c] * V[j][c] for c in range(d)) for j in range(n)]
        D = mpmath.fsum(p[j] * dp[j] for j in range(n))
        dS.append([scale * p[j] * (dp[j] - D) for j in range(n)])
    dK = [[mpmath.fsum(dS[i][j] * Q[i][c] for i in range(n)) for c in range(d)] for j in range(n)]
    return dS, dK


def test_d_k_and_d_scores_against_mpmath():
    data = _problem(64, 32)
    _, trace = _settles(data)
    with mpmath.workdps(60):
        dS, dK = _mp_gradients(data)
        for name, ref in (("d_scores", dS), ("d_K", dK)):
            got = trace.step(name).decimals(Rounding(digits=30))
            worst = max(abs(mpmath.mpf(str(got[i][j])) - ref[i][j]) / abs(ref[i][j])
                        for i in range(len(ref)) for j in range(len(ref[0])))
            assert worst <= mpmath.mpf("5e-30"), (name, worst)   # half a unit of the 30th digit


@pytest.mark.parametrize("rope", [None, {"layout": "interleaved", "theta": ["1/2", "1/3"]}])
def test_a_retry_computes_the_same_balls_as_the_whole_set(rope):
    # the retry at twice a precision (BackwardSteps.step_matrix) builds only what a step
    # needs; its balls must be those of the whole set at that precision
    data = _problem(6, 4)
    trace = sa.attend(Problem(Q=data["Q"], K=data["K"], V=data["V"], rope=rope,
                              backward={"grad_output": data["G"]}))
    source = trace.backward
    source.matrices(128)
    names = [x for x in sorted(PARTIAL_STEPS) if x in trace.step_names]
    partial = {name: source.step_matrix(name, 256) for name in names}
    assert source._partial and 256 not in source._balls      # the retry path was taken
    whole = source.matrices(256)
    for name in names:
        a, b = partial[name], whole[name]
        assert all(a[i, j].overlaps(b[i, j]) and a[i, j].rad() == b[i, j].rad()
                   for i in range(a.nrows()) for j in range(a.ncols())), name
