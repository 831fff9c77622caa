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
from symattn.floatref.plainexp import pin

_up = fast._up


def _upi(x):
    """:func:`fast._up` in place (an array this module made)."""
    x *= fast._INFLATE
    x += fast.TINY
    return x
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


def exponents(Q, K, additive, s: float, ds: float):
    """T̃ ≈ t = s·q·k + m (float64) and a bound per entry on |T̃ − t| (before any shift)."""
    np = _np()
    head = fast._Head(K, np.zeros((K.shape[0], 1)))
    D, eD, cs = fast._scores(Q, head)
    # |s̃·d̃ − s·d| ≤ |s̃|·e_d + |s̃ − s|·(|d| ≤ cs); then one rounding per operation, ≤ u|result|
    row = _up(abs(s) * eD + ds * cs)
    T = D * s
    eT = U * np.abs(T)
    if additive is not None:
        T += additive
        eT += U * np.abs(T)
    eT += row[:, None]
    return T, eT


def exp_enclosure(X, eX, allowed):
    """P̃ = fl(e^X̃) and R with |e^x − P̃| ≤ R when |x − X̃| ≤ e_X (fast.py's step 4), keys with
    x̃ + 1.01·e_x < −800 as 0 ± EXP_ABS, blocked keys 0 ± 0, R = ∞ where e_X ≥ 1/2 or overflowed."""
    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        G = np.expm1(eX)
        G += EXP_REL
        G *= _up(1 / (1 - EXP_REL) ** 2)
        G = _up(G)
        P = np.exp(X)
        R = P * G
        G += 1
        G *= EXP_ABS
        R += G
        _upi(R)
        np.putmask(R, ~(eX < 0.5), np.inf)
        far = X + 1.01 * eX < _FAR                          # e^x ≤ e^(x̃ + e_x) < e^-746
        pin(far, (P, 0.0), (R, EXP_ABS))
        if allowed is not None:
            pin(~allowed, (P, 0.0), (R, 0.0))
        if not (np.isfinite(P).all() and np.isfinite(R).all()):
            R = np.where(np.isfinite(R) & np.isfinite(P), R, np.inf)
            P = np.where(np.isfinite(P), P, 0.0)
    return P, R


def given_probabilities(Q, K, allowed, additive, lse, s: float, ds: float):
    """P̃ ≈ e^(t − lse) (t = s·q·k + m) and a radius per entry: |P − P̃| ≤ R (the recipe's P on
    a kernel's saved lse; blocked keys P = R = 0)."""
    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        T, eT = exponents(Q, K, additive, s, ds)
        X = T - np.asarray(lse, dtype=np.float64)[:, None]
        eX = _up(eT + U * np.abs(X))
    return exp_enclosure(X, eX, allowed)


def row_dots(dO, Out, RO=None):
    """D = Σ_c dO_ic·O_ic and a bound per row: each row summed exactly (TwoProduct pieces, fsum)
    and rounded once, u·|D̃| (+ Σ|dO|·R_O for an enclosed O)."""
    np = _np()
    D = exact_dots(dO, Out)
    R = U * np.abs(D)
    if RO is not None:
        R = R + np.einsum("ic,ic->i", np.abs(dO), RO)
    return D, _up(R)


def exact_dots(A, B):
    """fl(Σ_c A_ic·B_ic) per row, correctly rounded: A·B = p + e exactly (TwoProduct; an underflow
    of e loses at most 2^-1074 per term, inside fast's TINY) and math.fsum rounds the exact sum."""
    import math

    from symattn.floatref import dd

    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        p, e = dd.two_prod(A, B)
    ok = np.isfinite(p).all(axis=1) & (np.abs(A).max(axis=1, initial=0) < 2.0 ** 900) \
        & (np.abs(B).max(axis=1, initial=0) < 2.0 ** 90)
    both = np.concatenate([p, e], axis=1).tolist()
    return np.array([math.fsum(row) if good else np.nan for row, good in zip(both, ok.tolist())])


def grads(Q, K, V, dO, P, RP, Dm, RD, s: float, ds: float, dP: Any = None,
          zero_rows: Any = None) -> dict[str, tuple[Any, Any]]:
    """Midpoints and radii of dQ, dK, dV of one head from enclosures of P (per entry) and D
    (per row): dS = P∘(dO·Vᵀ − D), dV = Pᵀ·dO, dQ = s·dS·K, dK = s·dSᵀ·Q.  Each radius also
    covers the rounding of mid ± radius (4u·|mid|), as fast.py's.  ``dP``: (dP̃, e_dP) from
    :func:`products` when already computed (it is overwritten; e_dP per row or per entry); ``zero_rows``: rows proved to
    have dP − D = 0 exactly on every allowed key (their dS is an exact 0)."""
    np = _np()
    L, S = P.shape
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        dP, edP = products(dO, V) if dP is None else dP
        dP -= Dm[:, None]
        X = dP
        aX = np.abs(X)
        RX = aX * U                                         # dP̃ − D̃ and its rounding
        RX += (edP if edP.ndim == 2 else edP[:, None])
        RX += RD[:, None]
        _upi(RX)
        if zero_rows is not None and zero_rows.any():
            X[zero_rows] = 0.0
            aX[zero_rows] = 0.0
            RX[zero_rows] = 0.0
        dS = P * X
        aS = np.abs(dS)
        # |P̃X̃ − PX| ≤ P̃·|X̃ − X| + |P̃ − P|·|X| ≤ P̃·R_X + R_P·(|X̃| + R_X); the product's rounding
        RS = P * RX
        aX += RX
        aX *= RP
        RS += aX
        RS += U * aS
        _upi(RS)
        out = {"dV": _product(P.T, dO, RP.T, gamma(L), 1.0, 0.0), "dS": (dS, RS), "P": (P, RP)}
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
    t = aA * g
    t += RA
    N = _upi(t @ np.abs(B))
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
                 kv_batch: tuple) -> tuple[dict[str, tuple[Any, Any]], Any]:
    """{name: (values, decided)} of dQ, dK, dV for the recipe on a kernel's O and lse
    (:mod:`symattn.floatref.conditional`): the entries whose float64 enclosure rounds one way,
    then those whose exact-sum enclosure (:func:`refine`) does; one kv head's group at a time.
    Also P̃ (batch…, L, S), the midpoints of P (the conditioning's estimate)."""
    np = _np()
    L, E, S, Ev = pr.Q.shape[-2], pr.Q.shape[-1], pr.K.shape[-2], pr.V.shape[-1]
    known = {"dQ": _empty(pr.batch + (L, E)), "dK": _empty(kv_batch + (S, E)), "dV": _empty(kv_batch + (S, Ev))}
    P_all = np.zeros(pr.batch + (L, S))
    for kv in np.ndindex(*kv_batch):
        owners = [kv] if group == 1 else [kv[:-1] + (kv[-1] * group + k,) for k in range(group)]
        heads = {}
        for idx in owners:
            allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
            additive = None if pr.additive is None else np.asarray(pr.additive[idx])
            P, RP = given_probabilities(pr.Q[idx], pr.K[idx], allowed, additive, lse[idx], pr.scale_f,
                                        pr.scale_err)
            Dm, RD = row_dots(dO[idx], out[idx])
            heads[idx] = grads(pr.Q[idx], pr.K[idx], pr.V[idx], dO[idx], P, RP, Dm, RD, pr.scale_f, pr.scale_err)
            heads[idx]["inputs"] = (pr.Q[idx], pr.K[idx], dO[idx])  # type: ignore[assignment]
            P_all[idx] = P
        decide(heads, known, kv, owners, fmt, (pr.scale_f, pr.scale_err))
    return known, P_all


def _decide(mid, rad, fmt: Any) -> tuple[Any, Any]:
    """Both ends of [mid − rad, mid + rad] rounded (binary.round_array, exact RNE); decided where
    they agree (the radius covers computing the ends, as fast.py's)."""
    from symattn.floatref.binary import round_array

    np = _np()
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = round_array(mid - rad, fmt), round_array(mid + rad, fmt)
        ok = (lo == hi) & np.isfinite(rad) & np.isfinite(hi)
    return np.where(ok, hi + 0.0, np.nan), ok


def _empty(shape: tuple) -> tuple[Any, Any]:
    np = _np()
    return np.zeros(shape), np.zeros(shape, dtype=bool)


def decide(heads: dict, known: dict, kv: tuple, owners: list, fmt: Any, scale: tuple[float, float]) -> None:
    """Round both ends of every enclosure of one kv head's group (dK, dV summed over its query
    heads) into ``known``; the entries left are enclosed again by exact sums (:func:`refine`)."""
    for name in ("dQ", "dK", "dV"):
        for at in (owners if name == "dQ" else [kv]):
            mid, rad = heads[at][name] if name == "dQ" else group_sum([heads[h][name] for h in owners])
            values, ok = known[name][0][at], known[name][1][at]
            values[...], ok[...] = _decide(mid, rad, fmt)
            rows, cols = (~ok).nonzero()
            if rows.size:
                mid, rad = refine(heads, [at] if name == "dQ" else owners, name, rows, cols, scale)
                v, good = _decide(mid, rad, fmt)
                values[rows[good], cols[good]] = v[good]
                ok[rows[good], cols[good]] = True


def refine(heads: dict, owners: list, name: str, rows, cols, scale: tuple[float, float]) -> tuple[Any, Any]:
    """Tighter enclosures of the entries (rows[k], cols[k]): each sum Σ_j a_j·b_j of the
    float64 midpoints summed exactly (:func:`exact_dots`, one rounding: u|F|), so only the
    midpoints' own radii remain, Σ_j R_a·|b| (docs/floatref.md, "the fast backward", step 6)."""
    np = _np()
    parts = []
    for h in owners:
        Q, K, dO = heads[h]["inputs"]
        (P, RP), (dS, RS) = heads[h]["P"], heads[h]["dS"]
        if name == "dQ":
            parts.append((dS[rows], K.T[cols], RS[rows]))
        elif name == "dK":
            parts.append((dS.T[rows], Q.T[cols], RS.T[rows]))
        else:
            parts.append((P.T[rows], dO.T[cols], RP.T[rows]))
    A, B, RA = (np.concatenate([p[k] for p in parts], axis=1) for k in range(3))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        F = exact_dots(A, B)
        N = _up(np.einsum("kj,kj->k", RA, np.abs(B)) * (1 + gamma(A.shape[1])) + U * np.abs(F))
        s, ds = (1.0, 0.0) if name == "dV" else scale
        mid = F * s
        rad = _up((abs(s) + ds) * N + ds * np.abs(F) + 5 * U * np.abs(mid))
    return mid, np.where(np.isfinite(rad) & np.isfinite(mid), rad, np.inf)
