"""A float64 backward pass of plain attention, written from the formulas for the worksheet and
export tests (shares no code with symattn), with each named backward mistake made by hand.

A problem is its file's plain values (``tomllib``): Q, K, V or X with the W's; ``backward`` with
grad_output, a half-squared-error target or the sum.  Only the default scale 1/√d_k.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import numpy as np


def _m(value) -> np.ndarray:
    return np.array([[float(Fraction(str(x))) for x in row] for row in value], float)


def backward(data: dict, *, mistake: str = "") -> dict[str, np.ndarray]:
    """Every step a backward sheet asks, in float64; ``mistake``: one named backward mistake."""
    if "X" in data:
        X = _m(data["X"])
        Q, K, V = X @ _m(data["W_q"]), X @ _m(data["W_k"]), X @ _m(data["W_v"])
    else:
        X, Q, K, V = None, _m(data["Q"]), _m(data["K"]), _m(data["V"])
    scale = 1 / np.sqrt(Q.shape[1])
    forward_scale = 1.0 if mistake == "unscaled-forward" else scale
    S = Q @ K.T
    Z = S * forward_scale
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    P = E / E.sum(axis=1, keepdims=True)
    Out = P @ V
    b = data["backward"]
    if "grad_output" in b:
        dO = _m(b["grad_output"])
    elif "target" in b:
        dO = Out - _m(b["target"])
    else:
        dO = np.ones_like(Out)
    dP = dO @ V if mistake == "dp-not-transposed" else dO @ V.T
    D = dP.sum(axis=1, keepdims=True) if mistake == "row-dot-as-row-sum" else (P * dP).sum(axis=1, keepdims=True)
    dS = P * dP if mistake == "forgot-row-dot" else P * (dP - D)
    factor = {"backward-unscaled": 1.0, "backward-scaled-twice": scale ** 2}.get(mistake, forward_scale)
    dSs = factor * dS
    dV = P @ dO if mistake == "dv-not-transposed" else P.T @ dO
    dQ = dSs @ K
    dK = dSs @ Q if mistake == "dk-not-transposed" else dSs.T @ Q
    out = {"Q": Q, "K": K, "V": V, "scores": S, "weights": P, "output": Out, "d_output": dO, "d_V": dV,
           "d_weights": dP, "row_dot": D, "d_logits": dS, "d_scores": dSs, "d_Q": dQ, "d_K": dK}
    if X is not None:
        out.update(d_W_q=X.T @ dQ, d_W_k=X.T @ dK, d_W_v=X.T @ dV)
    if mistake == "gradient-ascent":
        out = {k: (-v if k.startswith(("d_", "row_dot")) else v) for k, v in out.items()}
    return out


#: the steps each mistake changes (where a sheet must tell it apart)
CHANGES = {
    "forgot-row-dot": ("d_logits", "d_scores", "d_Q", "d_K"),
    "row-dot-as-row-sum": ("row_dot", "d_logits", "d_scores", "d_Q", "d_K"),
    "dp-not-transposed": ("d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K"),
    "dv-not-transposed": ("d_V",),
    "dk-not-transposed": ("d_K",),
    "backward-unscaled": ("d_scores", "d_Q", "d_K"),
    "backward-scaled-twice": ("d_scores", "d_Q", "d_K"),
    "unscaled-forward": ("d_V", "row_dot", "d_logits", "d_scores", "d_Q", "d_K"),
    "gradient-ascent": ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K"),
}


def sig(x: float, digits: int = 3) -> Fraction:
    """float64 rounded to ``digits`` significant digits (the tests' values are far from ties)."""
    d = Decimal(repr(float(x)))
    if abs(d) < Decimal("1e-12"):
        return Fraction(0)
    return Fraction(d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=ROUND_HALF_EVEN))


def sig_grid(matrix: np.ndarray, digits: int = 3) -> tuple[tuple[Fraction, ...], ...]:
    return tuple(tuple(sig(x, digits) for x in row) for row in matrix)
