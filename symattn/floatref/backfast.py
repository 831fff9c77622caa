"""The backward pass in float64 with a rigorous error bound on every gradient entry.

Used by :mod:`symattn.floatref.backward` (both the plain reference and ``given=``) to decide
most dQ, dK, dV entries without arb balls, as :mod:`symattn.floatref.fast` does for the
forward: every step computes a float64 value and a bound on its distance from the exact
real value (docs/floatref.md, "Error analysis of the fast backward"); an entry is decided
when both ends of its enclosure round to one value of the target format, and only the
others go to the exact path.  The bounds use fast.py's conventions: u = 2^-53,
γ_n = n·u/(1 − n·u), numpy's exp within EXP_REL plus EXP_ABS, and every bound passed
through fast's ``_up`` (which covers computing the bound itself and every underflow).
"""

from __future__ import annotations

from typing import Any

from symattn.floatref import fast
from symattn.floatref.fast import EXP_ABS, EXP_REL, U, gamma

_up = fast._up
#: a key with x̃ + 1.01·e_x below this has e^x < e^-746 < EXP_ABS: its weight is taken as 0 ± EXP_ABS
_FAR = -800.0


def _np():
    import numpy

    return numpy


def products(A, B):
    """fl(A·Bᵀ) for float64 A (n × k), B (m × k) and a per-row bound on its error: fast.py's
    split product (most of it exact), the bound ≈ u·‖a‖·max‖b‖ (docs/floatref.md, step 1)."""
    np = _np()
    head = fast._Head(B, np.zeros((B.shape[0], 1)))
    D, eD, _ = fast._scores(A, head)
    return D, eD


def given_probabilities(Q, K, allowed, additive, lse, s: float, ds: float):
    """P̃ ≈ e^(t − lse) (t = s·q·k + m) and a radius per entry: |P − P̃| ≤ R (the recipe's P on
    a kernel's saved lse; blocked keys P = R = 0)."""
    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        head = fast._Head(K, np.zeros((K.shape[0], 1)))
        D, eD, cs = fast._scores(Q, head)
        # |s̃·d̃ − s·d| ≤ |s̃|·e_d + |s̃ − s|·(|d| ≤ cs); then one rounding per operation, ≤ u|result|
        row = _up(abs(s) * eD + ds * cs)
        T = D * s
        eX = U * np.abs(T)
        if additive is not None:
            T += additive
            eX += U * np.abs(T)
        X = T - np.asarray(lse, dtype=np.float64)[:, None]
        eX += U * np.abs(X)
        eX = _up(eX + row[:, None])
        far = X + 1.01 * eX < _FAR                          # e^x ≤ e^(x̃ + e_x) < e^-746
        G = _up((np.expm1(eX) + EXP_REL) / (1 - EXP_REL) ** 2)
        P = np.exp(X)
        R = _up(P * G + EXP_ABS * (1 + G))
        R = np.where(eX < 0.5, R, np.inf)
        P = np.where(far, 0.0, P)
        R = np.where(far, EXP_ABS, R)
        if allowed is not None:
            P = np.where(allowed, P, 0.0)
            R = np.where(allowed, R, 0.0)
        R = np.where(np.isfinite(R) & np.isfinite(P), R, np.inf)
        P = np.where(np.isfinite(P), P, 0.0)
    return P, R


def row_dots(dO, Out, RO=None):
    """D = Σ_c dO_ic·O_ic and a bound per row: γ_Ev·Σ|dO||Õ| (+ Σ|dO|·R_O for an enclosed O)."""
    np = _np()
    aO = np.abs(dO)
    D = np.einsum("ic,ic->i", dO, Out)
    R = gamma(dO.shape[1]) * np.einsum("ic,ic->i", aO, np.abs(Out))
    if RO is not None:
        R = R + np.einsum("ic,ic->i", aO, RO)
    return D, _up(R)


def grads(Q, K, V, dO, P, RP, Dm, RD, s: float, ds: float) -> dict[str, tuple[Any, Any]]:
    """Midpoints and radii of dQ, dK, dV of one head from enclosures of P (per entry) and D
    (per row): dS = P∘(dO·Vᵀ − D), dV = Pᵀ·dO, dQ = s·dS·K, dK = s·dSᵀ·Q.  Each radius also
    covers the rounding of mid ± radius (4u·|mid|), as fast.py's."""
    np = _np()
    L, S = P.shape
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        dP, edP = products(dO, V)
        X = dP - Dm[:, None]
        aX = np.abs(X)
        RX = _up((edP + RD)[:, None] + U * aX)              # dP̃ − D̃ and its rounding
        dS = P * X
        # |P̃X̃ − PX| ≤ P̃·|X̃ − X| + |P̃ − P|·|X| ≤ P̃·R_X + R_P·(|X̃| + R_X); the product's rounding
        RS = _up(P * RX + RP * (aX + RX) + U * np.abs(dS))
        out = {"dV": _product(P.T, dO, RP.T, gamma(L), 1.0, 0.0)}
        aS = np.abs(dS)
        out["dQ"] = _product(dS, K, RS, gamma(S), s, ds, aS)
        out["dK"] = _product(dS.T, Q, RS.T, gamma(L), s, ds, aS.T)
    return out


def _product(A, B, RA, g: float, s: float, ds: float, aA=None):
    """s̃·fl(Ã·B) and its radius, with |A − Ã| ≤ R_A entrywise, |s̃ − s| ≤ ds:
    |fl(ÃB) − AB| ≤ (γ·|Ã| + R_A)·|B| =: N; |s̃·fl(ÃB) − s·AB| ≤ (|s̃| + ds)·N + ds·|fl(ÃB)|,
    and u for the product by s̃ (none when s̃ = 1)."""
    np = _np()
    aA = np.abs(A) if aA is None else aA
    M = A @ B
    N = _up((g * aA + RA) @ np.abs(B))
    if s == 1.0 and ds == 0.0:
        mid, rad = M, N
    else:
        mid = M * s
        rad = _up((abs(s) + ds) * N + ds * np.abs(M) + U * np.abs(mid))
    rad = _up(rad + 4 * U * np.abs(mid))
    return mid, np.where(np.isfinite(rad) & np.isfinite(mid), rad, np.inf)


def group_sum(parts: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The sum of several enclosed arrays (a GQA kv head's query heads): the midpoints summed in
    float64 (γ_g of the absolute sum more), the radii summed."""
    np = _np()
    if len(parts) == 1:
        return parts[0]
    mid = sum(p[0] for p in parts[1:]) + parts[0][0]
    rad = sum(p[1] for p in parts)
    absum = sum(np.abs(p[0]) for p in parts)
    rad = _up(rad + gamma(len(parts)) * absum + 4 * U * np.abs(mid))
    return mid, np.where(np.isfinite(rad), rad, np.inf)


def decide_given(pr: Any, dO: Any, out: Any, lse: Any, fmt: Any, group: int,
                 kv_batch: tuple) -> dict[str, tuple[Any, Any]]:
    """{name: (values, decided)} of dQ, dK, dV for the recipe on a kernel's O and lse
    (:mod:`symattn.floatref.conditional`): the entries whose float64 enclosure rounds one way."""
    np = _np()
    per_head = {}
    for idx in np.ndindex(*pr.batch):
        allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
        additive = None if pr.additive is None else np.asarray(pr.additive[idx])
        P, RP = given_probabilities(pr.Q[idx], pr.K[idx], allowed, additive, lse[idx], pr.scale_f, pr.scale_err)
        Dm, RD = row_dots(dO[idx], out[idx])
        per_head[idx] = grads(pr.Q[idx], pr.K[idx], pr.V[idx], dO[idx], P, RP, Dm, RD, pr.scale_f, pr.scale_err)
    return decide(per_head, pr.batch, kv_batch, group, fmt)


def decide(per_head: dict, batch: tuple, kv_batch: tuple, group: int, fmt: Any) -> dict[str, tuple[Any, Any]]:
    """Round both ends of every enclosure (dK, dV summed over a kv head's query heads first)."""
    from symattn.floatref.sdpa import _decide

    np = _np()
    known = {}
    for name in ("dQ", "dK", "dV"):
        lead = batch if name == "dQ" else kv_batch
        shape = next(iter(per_head.values()))[name][0].shape
        values, ok = np.zeros(lead + shape), np.zeros(lead + shape, dtype=bool)
        for idx in np.ndindex(*lead):
            owners = [idx] if name == "dQ" or group == 1 else \
                [idx[:-1] + (idx[-1] * group + k,) for k in range(group)]
            mid, rad = group_sum([per_head[h][name] for h in owners])
            values[idx], ok[idx] = _decide(mid, rad, fmt)
        known[name] = (values, ok)
    return known
