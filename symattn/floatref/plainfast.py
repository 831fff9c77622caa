"""The plain backward reference's float64 enclosures: dQ, dK, dV (and dS, dP, D) from the softmax
itself, not from a kernel's saved O and lse.

Per head (rows i, keys j; docs/floatref.md, "The fast plain backward"), a block of rows at a time:

1. the scores d = q·k as double-doubles (a split product: Qh·Khᵀ exact, the rest within e₂ per
   row, TwoSum), t = s·d by TwoProduct, x = t − c_i (c_i the row's largest allowed t_hi, an exact
   float) by TwoSum: the argument's error per entry is e_x = |s̃|e₂ + δs(|d| + e₂) + u(|s̃d_lo| +
   |t_lo| + |x_lo|);
2. w = e^x by :func:`symattn.floatref.plainexp.exp_dd` (a proved 1.25u, not numpy's assumed 8u),
   Z = Σ_j w̃ by compensated pairwise sums (:func:`plainexp.row_sum`) plus Σ R_w; P̃ = fl(w̃/Z̃)
   with R_P = (R_w + P̃(1 + 2u)·R_Z)/Z_lo·(1 + 2u) + u·P̃;
3. dP = dO·Vᵀ as in 1 (error |dP_lo| + e₂ per entry); D_i = Σ_j P_ij·dP_ij (= dO_i·O_i, since
   Σ_j P_ij = 1) by the same sums, R_D = Σ_j (R_P(|dP̃| + e_dP) + u|P̃dP̃| + P̃·e_dP) + the sum's;
4. :func:`backfast.grads` and :func:`backfast.decide` as the conditional reference (dS, the
   products, the exact-sum refinement of the entries left).

Rows whose dP is exactly constant on their allowed keys (one key, as a causal first row; V = ones)
have dP − D = 0 exactly: checked with integers (:func:`symattn.floatref.rows.dyadic_matrix`),
their dS is an exact 0.  A row with no allowed key contributes nothing (dQ = dS = D = 0).
"""

from __future__ import annotations

import math
from typing import Any

from symattn.floatref import backfast, dd, plaingrads
from symattn.floatref.fast import U, gamma
from symattn.floatref.plainexp import exp_dd, pairwise, pin, row_sum

_up = backfast._up


def _np():
    import numpy

    return numpy


def _split(A, beta: int):
    """A = hi + lo exactly, hi on a per-row grid 2^(e_i − β) (|A_i| < 2^e_i); and the e_i."""
    np = _np()
    e = np.frexp(np.abs(A).max(axis=1))[1]
    hi = np.ldexp(np.rint(np.ldexp(A, (beta - e)[:, None])), (e - beta)[:, None])
    return hi, A - hi, e


#: rows per block × keys: the elementwise passes work on blocks that stay in cache
BLOCK_ENTRIES = 1 << 15


class _Keys:
    """K (or V) split once for the scores of every block of rows: K = Kh + Kl exactly."""

    def __init__(self, K) -> None:
        np = _np()
        self.E = K.shape[1]
        self.beta = (53 - max(1, self.E - 1).bit_length()) // 2
        self.Kh, Kl, self.ek = _split(K, self.beta)
        self.KhT = np.ascontiguousarray(self.Kh.T)
        self.KlKT = np.ascontiguousarray(np.concatenate([Kl, K], axis=1).T)
        n = lambda M: np.sqrt(np.einsum("ij,ij->i", M, M))  # noqa: E731
        self.kl, self.kn = float(n(Kl).max()), float(n(K).max())


def scores(Q, K, keys: _Keys | None = None):
    """(d_hi, d_lo, e₂): d = q·k within e₂_i of d_hi + d_lo (a double-double; Qh·Khᵀ exact, the
    rest's float product within e₂ per row), or None when the exponents are too far apart for
    the exact split product (then the caller leaves the head to arb)."""
    np = _np()
    k = _Keys(K) if keys is None else keys
    E, beta = k.E, k.beta
    Qh, Ql, eq = _split(Q, beta)
    if int(eq.min()) + int(k.ek.min()) - 2 * beta < -1022 or int(eq.max()) + int(k.ek.max()) + E.bit_length() > 900:
        return None
    # Qh·Khᵀ is exact (every partial sum an integer below 2^53 on the grid 2^(eq+ek−2β)); the rest,
    # [Qh | Ql]·[Kl | K]ᵀ, within γ_2E·(‖qh‖‖kl‖ + ‖ql‖‖k‖) (any order of summation); TwoSum exact
    A = Qh @ k.KhT
    B = np.concatenate([Qh, Ql], axis=1) @ k.KlKT
    norm = (1 + gamma(E + 2)) ** 2
    n = lambda M: np.sqrt(np.einsum("ij,ij->i", M, M))  # noqa: E731
    e2 = _up(gamma(2 * E) * (n(Qh) * k.kl + n(Ql) * k.kn) * norm)
    hi, lo = dd.two_sum(A, B)
    return hi, lo, e2


def blocked_scores(Q, K):
    """:func:`scores` a block of rows at a time: (d_hi, d_lo, e_d per entry = |d_lo| + e₂), or None."""
    np = _np()
    keys = _Keys(K)
    L, S = Q.shape[0], K.shape[0]
    hi, err = np.empty((L, S)), np.empty((L, S))
    step = max(1, BLOCK_ENTRIES // max(S, 1))
    for a in range(0, L, step):
        got = scores(Q[a:a + step], K, keys)
        if got is None:
            return None
        hi[a:a + step] = got[0]
        e = np.abs(got[1], out=got[1])
        e += got[2][:, None]
        err[a:a + step] = _up(e)
    return hi, err


class _Values:
    """V split once per head for the output numerators N = W·V as double-doubles (step 4): V =
    Vh + Vl exactly, Vh on a per-column grid g_c = 2^(e_c − β_v) (|V_jc| < 2^e_c), and W ∈ [0, 1]
    on the grid 2^-β_w, with β_w + β_v = 52 − n (S ≤ 2^n): every product of the high parts is an
    integer times 2^-β_w·g_c of at most 2^(β_w + β_v)(1 + 2^-β_w), so Wh·Vh sums exactly below
    2^53 in any order."""

    def __init__(self, V) -> None:
        np = _np()
        S = V.shape[0]
        n = max(1, S).bit_length()
        self.bw = (52 - n) // 2
        bv = 52 - n - self.bw
        e = np.frexp(np.abs(V).max(axis=0, initial=0.0))[1]
        self.ok = bool(V.size) and int(e.min()) - bv - self.bw >= -1000 and int(e.max()) < 1000
        grid = np.ldexp(1.0, e - bv)
        self.Vh = np.rint(V / grid) * grid
        self.Vl = V - self.Vh
        self.V = V
        self.absV = np.abs(V)
        self.half = grid / 2                                  # ≥ |Vl_jc|
        self.vsum = _up(self.absV.sum(axis=0) * (1 + gamma(S + 1)))   # ≥ Σ_j |V_jc|


def probabilities(Q, K, allowed, s: float, ds: float, dO=None, V=None):
    """(P̃, R_P, live, (c, Z̃, R_Z), tight, O): the softmax weights of one head with |P − P̃| ≤ R_P per
    entry (blocked keys 0 ± 0), the rows with some allowed key, each row's shift c and enclosure
    Z̃ ± R_Z of Σ_j e^(t_j − c) (the LSE's), and with ``dO`` and ``V`` each row's D (:func:`_row_dots`):
    tight = (D̃, R_D, Zh, Zl, R_Zt, Nh, Nl, R_N) with Z ∈ Zh + Zl ± R_Zt and Σ_c dO_ic·N_ic ∈ Nh + Nl ±
    R_N (N = Σ_j e^(t_ij − c_i)·V_j), and O ≈ N/Z̃ (midpoints, the conditioning's estimate), else
    None.  None when the scores need arb.  A block of rows at
    a time (every step is row-local)."""
    np = _np()
    keys = _Keys(K)
    vals = None if V is None else _Values(V)
    L, S = Q.shape[0], K.shape[0]
    P, R = np.empty((L, S)), np.empty((L, S))
    live, c, Z, RZ = np.empty(L, dtype=bool), np.empty(L), np.empty(L), np.empty(L)
    tight = None if vals is None else np.empty((8, L))
    out_mid = None if vals is None else np.zeros((L, V.shape[1]))
    step = max(1, BLOCK_ENTRIES // max(S, 1))
    for a in range(0, L, step):
        b = min(L, a + step)
        got = _block(Q[a:b], K, keys, None if allowed is None else allowed[a:b], s, ds,
                     None if dO is None else dO[a:b], vals)
        if got is None:
            return None
        P[a:b], R[a:b], live[a:b], (c[a:b], Z[a:b], RZ[a:b]) = got[:4]
        if tight is not None:
            tight[:, a:b] = got[4]
            if got[5] is None:
                out_mid = None
            elif out_mid is not None:
                out_mid[a:b] = got[5]
    return P, R, live, (c, Z, RZ), tight, out_mid


def arguments(Q, K, keys: _Keys, allowed, s: float, ds: float, c=None):
    """(Xh, Xl, e_x, ok, c, live) of a block (step 1): x = t − c as a double-double within e_x per
    entry (0 on blocked keys), ok where t is finite, c each row's largest allowed t_hi (or the one
    given), live the rows with some allowed key.  None when the scores need arb."""
    np = _np()
    found = scores(Q, K, keys)
    if found is None:
        return None
    Dh, Dl, e2 = found
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        # t = s·d: TwoProduct (s̃·d_hi exact) plus s̃·d_lo; |s − s̃| ≤ ds
        Th, Tl = _scaled(Dh, s)
        sl = Dl * s
        Tl += sl
        eX = np.abs(sl)
        eX += np.abs(Tl)
        eX *= U
        if ds:
            eX += ds * (np.abs(Dh) + np.abs(Dl) + e2[:, None])
        eX += abs(s) * e2[:, None]
        ok = np.isfinite(Th).all(axis=1) & np.isfinite(Tl).all(axis=1)
        if allowed is not None:
            np.putmask(Th, ~allowed, -np.inf)
        if c is None:
            c = Th.max(axis=1)
            live = np.isfinite(c)
            c = np.where(live, c, 0.0)
        else:
            live = np.ones(len(c), dtype=bool) if allowed is None else allowed.any(axis=1)
        Xh, e = dd.two_sum(Th, np.broadcast_to(-c[:, None], Th.shape))
        Xl = Tl + e
        eX += U * np.abs(Xl)
        if allowed is not None:
            pin(~allowed, (Xh, 0.0), (Xl, 0.0))
    return Xh, Xl, eX, ok, c, live


def _scaled(D, s: float):
    """(t_hi, t_lo) = s·D exactly (TwoProduct with the scalar split once; a power of two: one
    multiplication, checked exact by multiplying back, as an underflow would not be)."""
    np = _np()
    if s != 0 and math.frexp(s)[0] in (0.5, -0.5):
        T = D * s
        if (T * (1 / s) == D).all():
            return T, np.zeros_like(T)
    return dd.two_prod(s, D)


def weights(Q, K, allowed, s: float, ds: float, c):
    """(W, W_lo, R₂): e^(t_ij − c_i) ∈ W + W_lo ± R₂ for these rows and keys (c given: the rows'
    shifts of :func:`probabilities`), the pair of :func:`plainexp.exp_dd`; None when the scores
    need arb (the later tiers' rows and columns of P)."""
    np = _np()
    got = arguments(Q, K, _Keys(K), allowed, s, ds, c)
    if got is None:
        return None
    Xh, Xl, eX, ok, _, _ = got
    W, _, lo, R = exp_dd(Xh, Xl, _up(eX), allowed, residual=True)
    R[~ok] = np.inf
    return W, lo, R


def _block(Q, K, keys: _Keys, allowed, s: float, ds: float, dO=None, vals=None):
    """:func:`probabilities` of a block of rows."""
    np = _np()
    got = arguments(Q, K, keys, allowed, s, ds)
    if got is None:
        return None
    Xh, Xl, eX, ok, c, live = got
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        W, RW, Wlo, R2 = exp_dd(Xh, Xl, _up(eX), allowed, residual=True)
        Zh, Ze, rest, absum = pairwise(W)
        Z = Zh + Ze
        # Σ_j W_lo within γ_S·Σ|W_lo| ≤ γ_S·(u·Σ W + S·2^-1074); Zl = Ze + Σ W_lo rounded (u|Zl|)
        Zl = Ze + Wlo.sum(axis=1)
        R2sum = R2.sum(axis=1)
        RZt = _up(rest + gamma(W.shape[1]) * (U * absum + W.shape[1] * 2.0 ** -1074) + U * np.abs(Zl) + R2sum)
        # |Z − Z̃| ≤ R_Zt + |Zh + Zl − Z̃| ≤ R_Zt + u|Z̃| + |Zl − Ze|
        RZ = _up(RZt + U * np.abs(Z) + np.abs(Zl - Ze) * (1 + 2 * U))
        tight = None if vals is None else _numerators(W, Wlo, R2, dO, vals, absum)
        Z = np.where(live, Z, 1.0)
        RZ = np.where(live & ok, RZ, np.where(live, np.inf, 0.0))
        Zlo = np.nextafter(Z - RZ, -np.inf)
        Zlo = np.where((Zlo > 0) & np.isfinite(RZ), Zlo, np.nan)
        P = W
        P /= Z[:, None]
        R = RW
        R += (P * (1 + 2 * U)) * RZ[:, None]
        R /= Zlo[:, None]
        R *= 1 + 2 * U
        R += U * P
        backfast._upi(R)
        R = np.where(np.isfinite(R), R, np.inf)
        out_mid = None
        if tight is not None:
            Nh, Nl, RN, out_mid = tight
            if out_mid is not None:
                out_mid /= Z[:, None]
                out_mid[~live] = 0.0
            N = Nh + Nl
            Dm = N / Z
            aD = np.abs(Dm)
            RD = _up((RN + U * np.abs(N) + aD * (1 + 2 * U) * RZ) / Zlo * (1 + 2 * U) + U * aD)
            ok_t = live & ok & np.isfinite(RD) & np.isfinite(RZt)
            RD = np.where(ok_t, RD, np.where(live, np.inf, 0.0))
            Dm = np.where(live, Dm, 0.0)
            RZt = np.where(ok_t, RZt, np.inf)
            tight = np.stack([Dm, RD, Zh, Zl, RZt, Nh, Nl, np.where(ok_t, RN, np.inf)])
    return P, R, live, (c, np.where(live, Z, 0.0), RZ), tight, out_mid


def _numerators(W, Wlo, R2, dO, vals: _Values, absum):
    """(Nh, Nl, R_N) per row: Σ_c dO_ic·N_ic ∈ Nh + Nl ± R_N for N = Σ_j w_ij·V_j with every w_ij
    in W + W_lo ± R₂ (step 4).  N = Wh·Vh (exact, :class:`_Values`) + fl(Wh·Vl) + fl(WL·V) with
    W = Wh + Wl exactly and WL = fl(Wl + W_lo): the float parts within γ_{S+1}·(Σ|Wh||Vl| +
    Σ|WL||V|) ≤ γ_{S+1}·((Σ W + S·2^-β_w-1)·g_c/2 + wl·Σ_j|V_jc|) (|WL| ≤ wl = (2^-β_w-1 + 2^-51)(1 + u)),
    WL's rounding u·wl·Σ|V_jc|, the weights' R₂·|V|.  Then dO_i·N_i by TwoProduct on Nh (exact),
    pairwise sums, and the float rest: γ_{E+3}(Σ|e| + 2Σ|dO·Nl|) + Σ_c |dO_ic|·e_N,ic."""
    np = _np()
    S = W.shape[1]
    if not vals.ok:
        inf = np.full(W.shape[0], np.inf)
        return np.zeros(W.shape[0]), np.zeros(W.shape[0]), inf, None
    scale = 2.0 ** vals.bw
    Wh = np.rint(W * scale)
    Wh /= scale
    WL = W - Wh
    WL += Wlo
    Nh = Wh @ vals.Vh
    Nl = Wh @ vals.Vl
    Nl += WL @ vals.V
    wl = (2.0 ** (-vals.bw - 1) + 2.0 ** -51) * (1 + U)
    g = gamma(S + 1)
    eN = (g * (absum + S * 2.0 ** (-vals.bw - 1)))[:, None] * vals.half[None, :]
    eN += (g + U) * wl * vals.vsum[None, :]
    eN += R2 @ vals.absV
    backfast._upi(eN)
    p, e = dd.two_prod(dO, Nh)
    q = dO * Nl
    hi, lo, rest, _ = pairwise(p)
    lo += e.sum(axis=1)
    lo += q.sum(axis=1)
    aq = np.abs(q).sum(axis=1)
    RN = rest + gamma(dO.shape[1] + 3) * (np.abs(e).sum(axis=1) + 2 * aq) + U * aq + 3 * U * np.abs(lo)
    RN += np.einsum("ic,ic->i", np.abs(dO), eN)
    RN += dO.shape[1] * 2.0 ** -1070
    Nh += Nl                                                  # N itself, an estimate for the conditioning
    return hi, lo, _up(RN), Nh


def row_dots(P, RP, dP, edP):
    """D_i = Σ_j P_ij·dP_ij and its radius (step 3), from the enclosures of P and dP (per entry)."""
    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        M = P * dP
        Dm, eD = row_sum(M)
        np.abs(M, out=M)
        A = np.abs(dP)
        A += edP
        A *= RP
        A += U * M                                  # each product's rounding
        M = P * edP
        A += M
        R = _up(eD + A.sum(axis=1) * (1 + gamma(A.shape[1] + 1)))
        R = np.where(np.isfinite(R), R, np.inf)
    return Dm, R


def constant_rows(dO, V, dP, edP, allowed, live):
    """(rows, values): the rows whose exact dP_ij = dO_i·v_j takes one value on every allowed key
    j (then dP − D = 0 there exactly, and D_i is that value): candidates by the float spread,
    confirmed with integers; ``values`` maps each such row to its exact D_i (a Fraction)."""
    np = _np()
    from fractions import Fraction

    import flint

    from symattn.floatref.rows import dyadic_matrix

    with np.errstate(invalid="ignore"):
        top = np.max(dP, axis=1, where=True if allowed is None else allowed, initial=-np.inf)
        low = np.min(dP, axis=1, where=True if allowed is None else allowed, initial=np.inf)
        spread = edP.max(axis=1, initial=0.0)
        maybe = live & (top - low <= 2 * spread + 4 * U * np.maximum(np.abs(top), np.abs(low)))
    out = np.zeros(dP.shape[0], dtype=bool)
    values: dict[int, Fraction] = {}
    rows = np.nonzero(maybe)[0]
    if rows.size == 0:
        return out, values
    on, go = dyadic_matrix(dO[rows])
    vn, gv = dyadic_matrix(V)
    exact = flint.fmpz_mat(on) * flint.fmpz_mat(vn).transpose()
    for r, i in enumerate(rows.tolist()):
        keys = range(V.shape[0]) if allowed is None else np.nonzero(allowed[i])[0].tolist()
        found = {int(exact[r, j]) for j in keys}
        if len(found) == 1:
            out[i] = True
            values[i] = Fraction(found.pop()) * Fraction(2) ** (go + gv)
    return out, values


def head(Q, K, V, dO, allowed, s: float, ds: float, extras: tuple = ()) -> dict[str, Any] | None:
    """The enclosures of one query head: backfast.grads' dQ, dK, dV, dS, P, and D (and dP when
    among the ``extras``); None when the scores need arb."""
    np = _np()
    found = probabilities(Q, K, allowed, s, ds, dO, V)
    if found is None:
        return None
    P, RP, live, sums, tight, out_mid = found
    found_dp = blocked_scores(dO, V)
    if found_dp is None:
        return None
    dP, edP = found_dp
    zero, exact_D = constant_rows(dO, V, dP, edP, allowed, live)
    Dm, RD = tight[0].copy(), tight[1].copy()
    wide = live & ~np.isfinite(RD)            # V's exponents too far apart for the split product
    if wide.any():
        D2, R2 = row_dots(P, RP, dP, edP)
        Dm[wide], RD[wide] = D2[wide], R2[wide]
    Dm[~live], RD[~live] = 0.0, 0.0
    dP_out = (dP.copy(), _up(edP + 4 * U * np.abs(dP))) if "dP" in extras else None
    D_out = (Dm.copy(), _up(RD + 4 * U * np.abs(Dm)))
    out = plaingrads.grads(Q, K, V, dO, P, RP, Dm, RD, s, ds, (dP, edP), zero,
                           P @ V if out_mid is None else out_mid)
    out["D"], out["dP"] = D_out, dP_out
    out["inputs"] = (Q, K, dO)    # type: ignore[assignment]
    out["zero"] = zero            # type: ignore[assignment]
    out["exact_D"] = exact_D      # type: ignore[assignment]
    out["sums"] = sums + (live,)  # type: ignore[assignment]
    out["tight"] = tight          # type: ignore[assignment]
    return out


def decide_plain(pr: Any, dO: Any, fmt: Any, group: int, kv_batch: tuple, extras: tuple = (),
                 tight: Any = None) -> tuple[dict[str, tuple[Any, Any]], Any, Any, dict]:
    """{name: (values, decided)} of dQ, dK, dV (and the ``extras`` among dS, dP, D) where the
    float64 enclosures decide them (GQA: dK, dV summed over a kv head's query heads); also the
    conditioning's estimates (κ (batch…, L) and {dQ, dK, dV: scales} per query head, from
    :func:`plaingrads.grads`), the rows proved to have dS = 0 exactly (batch…, L), and {idx: (c, Z̃, R_Z, live)} of each head enclosed (the LSE's sums).
    ``tight``: :func:`symattn.floatref.plaintight.decide_tight`, run on each kv head's group
    while its enclosures are at hand (the second tier)."""
    from symattn.floatref.binary import round_fraction

    np = _np()
    L, E, S, Ev = pr.Q.shape[-2], pr.Q.shape[-1], pr.K.shape[-2], pr.V.shape[-1]
    shapes = {"dQ": pr.batch + (L, E), "dK": kv_batch + (S, E), "dV": kv_batch + (S, Ev),
              "dS": pr.batch + (L, S), "dP": pr.batch + (L, S), "D": pr.batch + (L,)}
    known = {name: backfast._empty(shapes[name]) for name in ("dQ", "dK", "dV") + tuple(extras)}
    kappa = np.ones(pr.batch + (L,))
    scales = {"dQ": np.zeros(pr.batch + (L, E)), "dK": np.zeros(pr.batch + (S, E)), "dV": np.zeros(pr.batch + (S, Ev))}
    zeros = np.zeros(pr.batch + (L,), dtype=bool)
    sums: dict[tuple, tuple] = {}
    ds = pr.scale_err
    if _exact_float(pr.scale, pr.scale_f):
        ds = 0.0
    for kv in np.ndindex(*kv_batch):
        owners = [kv] if group == 1 else [kv[:-1] + (kv[-1] * group + k,) for k in range(group)]
        heads = {}
        for idx in owners:
            allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
            h = head(pr.Q[idx], pr.K[idx], pr.V[idx], dO[idx], allowed, pr.scale_f, ds, extras)
            if h is None:
                break
            heads[idx] = h
            kappa[idx] = h["condition"][0]
            for name, value in h["condition"][1].items():
                scales[name][idx] = value
            zeros[idx] = h["zero"]
            sums[idx] = h["sums"]
        if len(heads) < len(owners):        # scores out of the split product's range: all to arb
            continue
        backfast.decide(heads, known, kv, owners, fmt, (pr.scale_f, ds))
        for name in extras:
            for idx in owners:
                values, ok = known[name][0][idx], known[name][1][idx]
                mid, rad = heads[idx][name]
                values[...], ok[...] = backfast._decide(mid, rad, fmt)
                if name == "D":                   # dP constant on the row's keys: D is that value exactly
                    for i, exact in heads[idx]["exact_D"].items():
                        values[i], ok[i] = round_fraction(exact, fmt) + 0.0, True
        if tight is not None:
            tight(pr, dO, heads, known, kv, owners, fmt, ds)
    return known, (kappa, scales), zeros, sums


def _exact_float(exact: Any, f: float) -> bool:
    """The exact scale is the float itself (a Fraction, or 1/√E with E a square power of 4)."""
    from fractions import Fraction

    if isinstance(exact, Fraction):
        return exact == Fraction(f)
    if getattr(exact, "is_Rational", False):
        return Fraction(int(exact.p), int(exact.q)) == Fraction(f)
    return False


__all__ = ["constant_rows", "decide_plain", "head", "probabilities", "row_dots", "scores"]
