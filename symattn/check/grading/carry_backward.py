"""Carried-forward slips through the backward pass: a later gradient right for the student's own
earlier figure.

The forward rule (``symattn.check.grading.carry``) extended down the backward chain: a student
who slips in P, dO, dP, D or dS and then does every later step correctly from that slip has made
one mistake.  Each later value is the student's own product of their earlier figure and the
trace's exact values, the formula of the step itself (``symattn.trace.backward``)::

    weights (P)   ->  d_V = Pᵀ·dO (whole step),  row_dot D = Σ_j P∘dP,  d_logits = P∘(dP − D)
    d_output      ->  d_V = Pᵀ·dO (whole step),  d_weights = dO·Vᵀ
    d_weights     ->  row_dot = Σ_j P∘dP,  d_logits = P∘(dP − D)
    row_dot       ->  d_logits = P∘(dP − D)
    d_logits      ->  d_scores = scale·dS,  d_Q = scale·dS·K,  d_K = scale·dSᵀ·Q (whole step)
    d_scores      ->  d_Q = dS'·K,  d_K = dS'ᵀ·Q (whole step)

The same rows on both sides (``d_logits[I]`` from ``weights[I]``), or whole steps.  Not carried
(the verdict stands as judged): RoPE and soft-capped problems past d_logits (the rotation and
tanh′ would have to be re-applied).
"""

from __future__ import annotations

from typing import Callable

import sympy
from sympy import Matrix

from symattn.check.figures import Written, WrittenNumber
from symattn.numbers.certify import certify
from symattn.numbers.compare import equal
from symattn.trace.trace import Trace

__all__ = ["BACKWARD_CHAIN", "follows_backward"]

#: the backward steps a carried-forward answer can be, in the order they are computed
BACKWARD_CHAIN = ("d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")

_WHOLE = frozenset(("d_V", "d_K"))     # a column of them mixes every query row


def _step(trace: Trace, name: str, rows: list[int]) -> Matrix:
    m = trace.step(name).matrix
    return Matrix([[m[i, j] for j in range(m.cols)] for i in rows])


def _row_dot(P: Matrix, dP: Matrix) -> Matrix:
    return Matrix([[sum((P[i, j] * dP[i, j] for j in range(P.cols)), sympy.S.Zero)]
                   for i in range(P.rows)])


def _d_logits(P: Matrix, dP: Matrix, D: Matrix) -> Matrix:
    return Matrix(P.rows, P.cols, lambda i, j: P[i, j] * (dP[i, j] - D[i, 0]))


def _later(trace: Trace, rows: list[int], ustep: str, own: Matrix, step: str) -> Matrix | None:
    """The later step computed from the student's own ``ustep`` rows (None: not carried)."""
    p = trace.problem
    get: Callable[[str], Matrix] = lambda name: _step(trace, name, rows)   # noqa: E731
    if ustep in ("weights", "d_output") and step == "d_V":
        P, dO = (own, get("d_output")) if ustep == "weights" else (get("weights"), own)
        return P.T * dO
    if ustep == "d_output" and step == "d_weights":
        return own * trace.V.matrix.T
    if ustep in ("weights", "d_weights", "row_dot") and step in ("row_dot", "d_logits"):
        P = own if ustep == "weights" else get("weights")
        dP = own if ustep == "d_weights" else get("d_weights")
        D = own if ustep == "row_dot" else _row_dot(P, dP)
        return D if step == "row_dot" else _d_logits(P, dP, D)
    if ustep in ("d_logits", "d_scores") and step in ("d_scores", "d_Q", "d_K"):
        if p.rope is not None or p.softcap is not None:
            return None
        dS = own * p.scale if ustep == "d_logits" else own
        if step == "d_scores":
            return dS if ustep == "d_logits" else None
        return dS * trace.K.matrix if step == "d_Q" else dS.T * trace.Q.matrix
    return None


def follows_backward(trace: Trace, step: str, keys: tuple, ustep: str,
                     values: list[list[sympy.Expr]], written: Written) -> bool:
    """Is the written ``step`` the student's own ``ustep`` figure carried through correctly?"""
    if trace.problem.backward is None or step not in BACKWARD_CHAIN:
        return False
    if keys and step in _WHOLE:
        return False
    if any(v.is_infinite for row in values for v in row):
        return False
    rows = [trace.step(ustep).row_index(keys[0])] if keys else \
        list(range(trace.step(ustep).shape[0]))
    own = Matrix(values)
    if own.shape != (len(rows), trace.step(ustep).shape[1]):
        return False
    later = _later(trace, rows, ustep, own, step)
    return later is not None and entries_match(written.entries, list(later))


def entries_match(entries: list, values: list) -> bool:
    """Every written entry is its value: rounded as written for a number, exactly otherwise."""
    if len(entries) != len(values):
        return False
    for w, value in zip(entries, values):
        if isinstance(w, WrittenNumber):
            if certify(value, w.rounding).as_fraction() != w.value:
                return False
        elif not equal(w.value, value):
            return False
    return True
