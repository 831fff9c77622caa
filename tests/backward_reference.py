"""An independent reference for the backward pass: complex-step derivatives of an mpmath forward.

Shares no code with symattn.  The forward is written here from the definitions (no
max-subtraction: the exponents are small), in mpmath complex arithmetic, and every gradient
is the complex-step derivative Im L(θ + i·h) / h with h = 10^-(2·dps): no cancellation, an
error of order h², so far below the digits compared.  Intermediate gradients (dP, dS, dS')
are taken the same way, by restarting the forward at that quantity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import mpmath

Matrix = list[list]


@dataclass
class Ref:
    """A problem as plain numbers (strings or Fractions mpmath can read)."""

    Q: Matrix | None = None
    K: Matrix | None = None
    V: Matrix | None = None
    X: Matrix | None = None
    X_kv: Matrix | None = None
    W_q: Matrix | None = None
    W_k: Matrix | None = None
    W_v: Matrix | None = None
    scale: object = None
    mask: list[list[bool]] | None = None
    slope: object = None
    symmetric: bool = False
    softcap: object = None
    sink: object = None
    rope_angles: Callable[[int, int], object] | None = None   # (position, pair) -> angle, interleaved
    positions: list[int] = field(default_factory=list)
    key_positions: list[int] = field(default_factory=list)
    grad_output: Matrix | None = None
    target: Matrix | None = None
    loss_sum: bool = False


def mp(x) -> mpmath.mpc:
    from fractions import Fraction

    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpmathify(x)


def mat(A: Matrix) -> list[list]:
    return [[mp(x) for x in row] for row in A]


def matmul(A, B, tb=False):
    if tb:
        B = [list(r) for r in zip(*B)]
    return [[sum((A[i][k] * B[k][j] for k in range(len(B))), mpmath.mpf(0)) for j in range(len(B[0]))]
            for i in range(len(A))]


def rotate(M, positions, angle):
    out = []
    for r, row in enumerate(M):
        new = list(row)
        for pair in range(len(row) // 2):
            a, b = 2 * pair, 2 * pair + 1
            phi = mp(angle(positions[r], pair))
            c, s = mpmath.cos(phi), mpmath.sin(phi)
            new[a] = row[a] * c - row[b] * s
            new[b] = row[a] * s + row[b] * c
        out.append(new)
    return out


class Forward:
    """The forward pass from any starting point: inputs, Q/K/V, rotated, scores, logits or weights."""

    def __init__(self, r: Ref) -> None:
        self.r = r

    def qkv(self, inputs: dict):
        r = self.r
        if r.X is not None:
            X = inputs["X"]
            X_kv = inputs.get("X_kv", X)
            return matmul(X, inputs["W_q"]), matmul(X_kv, inputs["W_k"]), matmul(X_kv, inputs["W_v"])
        return inputs["Q"], inputs["K"], inputs["V"]

    def rotated(self, Q, K):
        r = self.r
        if r.rope_angles is None:
            return Q, K
        return rotate(Q, r.positions, r.rope_angles), rotate(K, r.key_positions, r.rope_angles)

    def scale(self, d_k):
        return mpmath.mpf(1) / mpmath.sqrt(d_k) if self.r.scale is None else mp(self.r.scale)

    def logits(self, S, d_k):
        r, s = self.r, self.scale(d_k)
        out = []
        for i, row in enumerate(S):
            new = []
            for j, x in enumerate(row):
                z = s * x
                if r.slope is not None:
                    dist = abs(i - j) if r.symmetric else i - j
                    z = z - mp(r.slope) * dist
                if r.softcap is not None:
                    c = mp(r.softcap)
                    z = c * mpmath.tanh(z / c)
                new.append(z)
            out.append(new)
        return out

    def weights(self, Z, sink=None):
        r = self.r
        sink = (None if r.sink is None else mp(r.sink)) if sink is None else sink
        out = []
        for i, row in enumerate(Z):
            e = [mpmath.exp(z) if r.mask is None or r.mask[i][j] else mpmath.mpf(0) for j, z in enumerate(row)]
            total = sum(e, mpmath.mpf(0)) + (0 if sink is None else mpmath.exp(sink))
            out.append([x / total for x in e])
        return out

    def loss(self, O, V=None):  # noqa: E741
        r = self.r
        if r.grad_output is not None:
            G = mat(r.grad_output)
            return sum(G[i][c] * O[i][c] for i in range(len(O)) for c in range(len(O[0])))
        if r.loss_sum:
            return sum(x for row in O for x in row)
        T = mat(r.target)
        return sum((O[i][c] - T[i][c]) ** 2 for i in range(len(O)) for c in range(len(O[0]))) / 2


def _complex_step(f: Callable[[list[list]], object], M: list[list], h) -> list[list]:
    out = []
    for i in range(len(M)):
        row = []
        for j in range(len(M[0])):
            bumped = [list(r) for r in M]
            bumped[i][j] = M[i][j] + mpmath.mpc(0, h)
            row.append(mpmath.im(f(bumped)) / h)
        out.append(row)
    return out


def gradients(r: Ref, dps: int = 60) -> dict[str, list[list]]:
    """Every backward step of the reference at ``dps`` digits."""
    with mpmath.workdps(2 * dps + 20):
        h = mpmath.mpf(10) ** (-2 * dps)
        f = Forward(r)
        names = ("X", "X_kv", "W_q", "W_k", "W_v") if r.X is not None else ("Q", "K", "V")
        inputs = {k: mat(getattr(r, k)) for k in names if getattr(r, k) is not None}
        Q, K, V = f.qkv(inputs)
        d_k = len(Q[0])
        Qr, Kr = f.rotated(Q, K)
        S = matmul(Qr, Kr, tb=True)
        Z = f.logits(S, d_k)
        P = f.weights(Z)
        O = matmul(P, V)  # noqa: E741
        out: dict[str, list[list]] = {}
        out["d_output"] = _complex_step(lambda M: f.loss(M), O, h)
        out["d_weights"] = _complex_step(lambda M: f.loss(matmul(M, V)), P, h)
        out["d_V"] = _complex_step(lambda M: f.loss(matmul(P, M)), V, h)
        out["row_dot"] = [[sum(P[i][j] * out["d_weights"][i][j] for j in range(len(P[0])))] for i in range(len(P))]
        out["d_logits"] = _complex_step(lambda M: f.loss(matmul(f.weights(M), V)), Z, h)
        out["d_scores"] = _complex_step(lambda M: f.loss(matmul(f.weights(f.logits(M, d_k)), V)), S, h)
        through_rot = lambda Qm, Km: f.loss(matmul(f.weights(f.logits(matmul(Qm, Km, tb=True), d_k)), V))  # noqa: E731
        if r.rope_angles is not None:
            out["d_Q_rot"] = _complex_step(lambda M: through_rot(M, Kr), Qr, h)
            out["d_K_rot"] = _complex_step(lambda M: through_rot(Qr, M), Kr, h)
        full = lambda Qm, Km: through_rot(*f.rotated(Qm, Km))  # noqa: E731
        out["d_Q"] = _complex_step(lambda M: full(M, K), Q, h)
        out["d_K"] = _complex_step(lambda M: full(Q, M), K, h)
        lse = []
        for i, row in enumerate(Z):
            terms = [mpmath.exp(z) for j, z in enumerate(row) if r.mask is None or r.mask[i][j]]
            if r.sink is not None:
                terms.append(mpmath.exp(mp(r.sink)))
            lse.append([mpmath.log(sum(terms))])
        out["lse"] = lse
        if r.sink is not None:
            out["d_sink"] = _complex_step(lambda M: f.loss(matmul(f.weights(Z, sink=M[0][0]), V)),
                                          [[mp(r.sink)]], h)
        if r.grad_output is None:
            out["loss"] = [[f.loss(O)]]
        if r.X is not None:
            def from_inputs(name):
                def loss_of(M):
                    changed = dict(inputs, **{name: M})
                    q, k, v = f.qkv(changed)
                    qr, kr = f.rotated(q, k)
                    return f.loss(matmul(f.weights(f.logits(matmul(qr, kr, tb=True), d_k)), v))
                return loss_of
            for name in inputs:
                out["d_" + name] = _complex_step(from_inputs(name), inputs[name], h)
        return {k: [[mpmath.mpf(mpmath.re(x)) for x in row] for row in v] for k, v in out.items()}
