"""Arb enclosures of every backward step at once, as whole-matrix products.

The exact entries (``symattn.trace.backward``) say what each step is; this computes the same
formulas on arb balls: P and O come from the engine's certified rows, the products are flint's
arb matrix products (one C call each, not an entry at a time), and the certification loop
(``symattn.trace.stepcert``) asks for a higher precision when a ball does not decide.
"""

from __future__ import annotations

from typing import Any

import flint

from symattn.numbers.certify import to_arb
from symattn.problem.keys.backward import Loss
from symattn.problem.matrix import ExactMatrix

#: symattn.trace.backward.BackwardSteps (which imports this module)
BackwardSteps = Any


def arb_matrix(matrix: ExactMatrix, prec: int) -> flint.arb_mat:
    """An exact matrix as balls at the working precision."""
    if matrix.rational is not None:
        return flint.arb_mat(matrix.rational)
    return flint.arb_mat([[matrix.ball(i, j, prec) for j in range(matrix.cols)] for i in range(matrix.rows)])


def _rows(matrix: flint.arb_mat) -> list[list[flint.arb]]:
    return [[matrix[i, j] for j in range(matrix.ncols())] for i in range(matrix.nrows())]


#: the steps a retry can compute without the rest (``only=``): d_output to d_Q and d_K
PARTIAL_STEPS = frozenset({"d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores",
                           "d_Q", "d_K", "d_Q_rot", "d_K_rot"})


def backward_balls(src: BackwardSteps, prec: int, only: str | None = None) -> dict[str, flint.arb_mat]:
    """Every backward step's balls at ``prec``; with ``only`` (one of PARTIAL_STEPS), what that
    step needs and perhaps a little more: a retry of the few entries the first precision left."""
    e, p, spec = src.engine, src.problem, src.spec
    n, m = p.n, p.m
    rows = list(range(n))
    P = flint.arb_mat([e.balls("weights", i, prec) for i in rows])
    if only is None or spec.loss is not Loss.GRAD_OUTPUT:
        e.prefetch("output", rows, prec)
        O = flint.arb_mat([e.balls("output", i, prec) for i in rows])  # noqa: E741 (the paper's O)
    if spec.loss is Loss.GRAD_OUTPUT:
        assert spec.grad_output is not None
        dO = arb_matrix(spec.grad_output, prec)
    elif spec.loss is Loss.SUM:
        dO = flint.arb_mat(n, p.d_v, [1] * (n * p.d_v))
    else:
        assert spec.target is not None
        dO = O - arb_matrix(spec.target, prec)
    V = arb_matrix(e.V, prec)
    out: dict[str, flint.arb_mat] = {"d_output": dO}
    if only in (None, "d_V"):
        out["d_V"] = P.transpose() * dO
    dP = out["d_weights"] = dO * V.transpose()
    allowed = [e.rows[i].allowed for i in rows]
    D = [sum((P[i, j] * dP[i, j] for j in allowed[i]), flint.arb(0)) for i in rows]
    out["row_dot"] = flint.arb_mat([[d] for d in D])
    zero = flint.arb(0)
    dS = [[zero] * m for _ in rows]
    for i in rows:
        row, Di = dS[i], D[i]
        for j in allowed[i]:
            row[j] = P[i, j] * (dP[i, j] - Di)
    out["d_logits"] = flint.arb_mat(dS)
    out["d_scores"] = dZ = _through_scores(src, dS, prec)
    Qu, Ku = arb_matrix(src.Qu, prec), arb_matrix(src.Ku, prec)
    if only in ("d_Q", "d_Q_rot", None):
        out["d_Q_rot"] = out["d_Q"] = dZ * Ku
        if src.rope is not None:
            out["d_Q"] = _turn_back(src, out["d_Q_rot"], src.rope.positions, prec)
    if only in ("d_K", "d_K_rot", None):
        out["d_K_rot"] = out["d_K"] = dZ.transpose() * Qu
        if src.rope is not None:
            out["d_K"] = _turn_back(src, out["d_K_rot"], src.rope.key_positions, prec)
    if only is not None:
        return out
    row_sums = [e.balls("row_sum", i, prec)[0] for i in rows]
    out["lse"] = flint.arb_mat([[_top_logit(src, i, prec) + row_sums[i].log()] for i in rows])
    if spec.loss is Loss.SUM:
        out["loss"] = flint.arb_mat([[sum((O[i, c] for i in rows for c in range(p.d_v)), zero)]])
    elif spec.loss is Loss.HALF_SQUARED_ERROR:
        out["loss"] = flint.arb_mat([[sum((dO[i, c] ** 2 for i in rows for c in range(p.d_v)), zero) / 2]])
    if p.sink is not None:
        sink = [to_arb(e.sink_exponent(i), prec).exp() / row_sums[i] for i in rows]
        out["d_sink"] = flint.arb_mat([[-sum((sink[i] * D[i] for i in rows), zero)]])
    if p.projected:
        _projections(src, out, prec)
    return out


def _top_logit(src: BackwardSteps, i: int, prec: int) -> flint.arb:
    e = src.engine
    r = e.rows[i].argmax
    if r is None:
        return flint.arb(0)
    return e.balls(e.logit_step, i, prec)[r]


def _through_scores(src: BackwardSteps, dS: list[list[flint.arb]], prec: int) -> flint.arb_mat:
    """d_scores = d_logits times d logit / d score: the scale, and 1 − tanh²(b/c) with a soft-cap."""
    e, p = src.engine, src.problem
    scale = flint.arb(e.scale_rational) if e.scale_rational is not None else to_arb(p.scale, prec)
    if p.softcap is None:
        return flint.arb_mat(dS) * scale
    cap = to_arb(p.softcap, prec)
    before = "biased" if p.alibi is not None else "scaled"
    out = []
    for i, row in enumerate(dS):
        b = e.balls(before, i, prec)
        out.append([x if x == 0 else x * scale * (1 - (b[j] / cap).tanh() ** 2) for j, x in enumerate(row)])
    return flint.arb_mat(out)


def _turn_back(src: BackwardSteps, rotated: flint.arb_mat, positions, prec: int) -> flint.arb_mat:
    """Each row of a gradient of rotated vectors rotated back by its angle (Rᵀ = R(−φ))."""
    rope = src.rope
    assert rope is not None
    rows = _rows(rotated)
    for r, row in enumerate(rows):
        new = list(row)
        for pair, (a, b) in enumerate(rope.pairs()):
            phi = to_arb(rope.angle(positions[r], pair), prec)
            cos, sin = phi.cos(), phi.sin()
            new[a] = row[a] * cos + row[b] * sin
            new[b] = row[b] * cos - row[a] * sin
        rows[r] = new
    return flint.arb_mat(rows)


def _projections(src: BackwardSteps, out: dict[str, flint.arb_mat], prec: int) -> None:
    inputs = src.engine.inputs
    X = arb_matrix(inputs["X"], prec)
    X_kv = arb_matrix(inputs["X_kv"], prec) if src.cross else X
    W_q, W_k, W_v = (arb_matrix(inputs[w], prec) for w in ("W_q", "W_k", "W_v"))
    dQ, dK, dV = out["d_Q"], out["d_K"], out["d_V"]
    out["d_W_q"] = X.transpose() * dQ
    out["d_W_k"] = X_kv.transpose() * dK
    out["d_W_v"] = X_kv.transpose() * dV
    kv = dK * W_k.transpose() + dV * W_v.transpose()
    query = dQ * W_q.transpose()
    if src.cross:
        out["d_X"], out["d_X_kv"] = query, kv
    else:
        out["d_X"] = query + kv
