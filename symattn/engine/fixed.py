"""Certified decimals of exp, row_sum, weights and output from fixed-point integers.

The fast path of :mod:`symattn.trace.stepcert` for problems whose scores are
integers over one denominator and whose scale is rational (every problem
typed in decimals).  The engine gives each row's exponentials as integers
E_j with E_j ≤ e_j·2^F < E_j + 1, and the row sum's S and term count k with
S ≤ s·2^F < S + k (:meth:`symattn.engine.engine.Engine.fixed_exps`).  Everything
after that is integer arithmetic with a proved error bound, so a whole
512 × 512 step costs one multiplication by a reciprocal per entry instead of
an arb division and a binary-to-decimal conversion (and the output is one
fmpz matrix product).

**Ratios: weights, exp, row_sum.**  Each is x = a/d with a known to lie in
[A, A + α) and d in [D, D + δ) (integers): a weight is e_j/s (A = E_j, α = 1,
D = S, δ = k), an exponential e_j·2^F/2^F (δ = 0), the row sum s·2^F/2^F
(A = S, α = k, δ = 0).  x lies in [A/(D + δ), (A + α)/D], so
|x − A/D| ≤ (A/D)·max(α/A, δ/D) ≤ (A/D)·2^−B when A ≥ α·2^B and D ≥ δ·2^B.
The common entry: A's bit length leaves A/D two decades; one comparison with
the threshold ⌈D·10^c⌉ picks the one, so y = A/D·10^k has exactly ``digits``
digits before the point, and x·10^k lies within ε = y·2^−B < 10^−6/16 of y.
With R = ⌊10^k·2^L/D⌋ (L = bits(D) + 64), v = A·R is below y·2^L by less
than 2^(L−40); w = v + 2^(L−1) gives m = ⌊w/2^L⌋, and when the bits of w
below 2^L stay 2^(L−20) away from 0 and from 2^L, m is the rounding of every
value x·10^k may take (the margin covers ε and the reciprocal's error).  The
rest (within that margin of a half, m at a decade's edge, a short numerator,
a row sum past 10^digits) takes the general test: scaled by 10^K, with
q = ⌊A·10^K/D⌋ < 2^(B−3), x·10^K lies within (q + 1)·2^−B < 1/8 of [q, q + 1),
so in [q − 2, q + 2].  Entries that miss a condition are left to the arb
path.  A tiny weight or exponential (E_j with few bits) is taken from its
finer floor M_j = ⌊e_j·2^(F+s)⌋ instead: A = M_j, D = S·2^s, δ = k·2^s, the
same conditions.

**Output.**  o_c = Σ_j e_j·N_jc / (s·den) with V = N/den, at the coarser unit
2^F' (F' = B + bits(m) + 32; the weights' extra bits serve tiny weights):
E'_j = ⌊E_j/2^(F−F')⌋ = ⌊e_j·2^F'⌋ (floors of floors) and S' = ⌊S/2^(F−F')⌋,
so s·2^F' lies in [S', S' + k + 1).  With the exact integer
T_c = Σ_j E'_j·N_jc and A_c = Σ_j |N_jc| over the allowed keys,
s·2^F'·den·o_c lies within A_c of T_c.  So with D = S'·den and
q = ⌊|T_c|·10^K/D⌋: |o_c|·10^K lies within ⌈A_c·10^K/D⌉ + 2 of q (taken as
the power of two its bit lengths bound, no division; the denominator's error
adds (q + 1)·(k + 1)/S' < 1/8 when S' ≥ (k + 1)·2^B).
"""

from __future__ import annotations

import math
from functools import lru_cache

import flint

from symattn.numbers.balls import judge_enclosure
from symattn.numbers.decimals import CertifiedDecimal, Rounding, new_decimal, p10
from symattn.engine.engine import Engine, FixedRow
from symattn.vocab import StepName

#: the fast path serves roundings to at most this many significant digits (the
#: arb path is as fast above: the integers grow as the balls do)
MAX_FAST_DIGITS = 300
_GUARD_DIGITS = 4          # q has about digits + 4 digits
_LOG2_10 = math.log2(10)


def fixed_point_decimals(engine: Engine, step: str, rounding: Rounding,
                         pending: dict[int, list[int]]) -> dict[int, dict[int, CertifiedDecimal]]:
    """The entries of ``pending`` ({row: [columns]}) of exp, row_sum, weights or output that
    the fixed point decides; the caller takes the rest to the arb path."""
    digits = rounding.digits
    if step not in _STEPS or digits is None or digits > MAX_FAST_DIGITS:
        return {}
    if step == "output" and not engine.V.is_rational:
        return {}
    b, f = working_bits(digits, engine.m)
    engine.prepare_fixed(pending, f, b + 8)
    rows = {}
    for i in pending:
        row = engine.fixed_exps(i, f, b + 8)
        # a fully tied row is rational (1/k, k): the exact path rounds it, never this one
        if row is not None and row.total >= row.terms << b and not engine.softmax_is_rational(i):
            rows[i] = row
    if not rows:
        return {}
    if step == "output":
        return _outputs(engine, rows, pending, b, f, rounding)
    if step == "weights":
        return {i: _ratios(row.exps, pending[i], 1, row.total, row.terms, b, rounding, row.fine)
                for i, row in rows.items()}
    if step == "exp":                   # e^0 = 1 exactly (E = 2^F only there): not here
        unit = 1 << f
        return {i: _ratios(row.exps, [j for j in pending[i] if row.exps[j] != unit], 1, unit, 0, b,
                           rounding, row.fine) for i, row in rows.items()}
    return {i: _ratios([row.total], pending[i], row.terms, 1 << f, 0, b, rounding, {})
            for i, row in rows.items()}


_STEPS = frozenset(StepName.span(StepName.EXP, StepName.OUTPUT))


def working_bits(digits: int, keys: int) -> tuple[int, int]:
    """(B, F) for a rounding to ``digits`` digits of rows of ``keys`` keys: q < 2^(B−3)
    holds q's digits + guard + 2 digits, and F leaves 2^B and 128 bits more per term of S
    (weights down to about 2^−128 stay on the fixed point)."""
    b = math.ceil((digits + _GUARD_DIGITS + 2) * _LOG2_10) + 4
    return b, b + max(1, keys).bit_length() + 128


def _ratios(numerators: list[int], cols: list[int], spread: int, total: int, terms: int, b: int,
            rounding: Rounding, fine: dict[int, tuple[int, int]]) -> dict[int, CertifiedDecimal]:
    """numerators[j]/total for j in cols, each numerator within [A, A + spread) and the
    denominator within [total, total + terms) (see the module docstring); a numerator too
    short for that is taken from ``fine`` when it is there: (M, s), the same value in
    units 2^s times smaller.

    The common entry costs one multiplication by a reciprocal and a shift: its decade comes
    from a table by the numerator's bit length (one comparison with the decade's threshold),
    and the bits below the shift say both the rounding and whether the enclosure decides it.
    The rest (a short numerator, a rounding within the margin of a half, a decade's edge)
    take the general test of :func:`_ratio_one`."""
    digits = rounding.digits
    assert digits is not None          # the fast path serves significant digits only
    least, total_bits = spread << b, total.bit_length()
    low, high = p10(digits - 1), p10(digits)
    shift = total_bits + _RECIPROCAL_BITS
    half, cut = 1 << (shift - 1), (1 << shift) - 1
    margin = 1 << (shift - _MARGIN_BITS)         # 2^shift·(ε + 2^−40): the module docstring
    tables: dict[int, tuple[int, int, int, int, int] | None] = {}
    new, cls = new_decimal, CertifiedDecimal
    out = {}
    for j in cols:
        e = numerators[j]
        t = tables.get(e.bit_length())
        if t is None:
            length = e.bit_length()
            if length > least.bit_length() and length not in tables:   # not short, not a row sum past 10^digits
                t = tables[length] = _decade_table(length - total_bits, total, digits, shift)
            if t is None:
                decided = _ratio_one(e, j, spread, total, b, rounding, fine)
                if decided is not None:
                    out[j] = decided
                continue
        if e >= t[0]:                  # the upper of the two decades this bit length allows
            w = e * t[1] + half
            x = t[2]
        else:
            w = e * t[3] + half
            x = t[4]
        m = w >> shift                 # the rounding of e·10^k/D, when the bits below allow it
        if margin <= w & cut <= cut - margin and low < m < high:
            out[j] = new(cls, (m, x, False, rounding))
        else:                          # within the margin of a half, or a decade's edge
            decided = _ratio_one(e, j, spread, total, b, rounding, fine)
            if decided is not None:
                out[j] = decided
    return out


#: the output's unit keeps this many bits beyond B + bits(m)
_OUTPUT_SPARE_BITS = 32

#: the reciprocals ⌊10^k·2^(bits(D) + 64)/D⌋ err by less than 2^−40 of a unit for numerators
#: under 2^(bits(D) + 24) (a weight or exp is at most D, a row sum (m + 1)·D), and the
#: enclosure by ε < 10^digits·2^−B ≤ 10^−6/16: 2^−20 of a unit covers both
_RECIPROCAL_BITS, _MARGIN_BITS = 64, 20


def _decade_table(delta: int, total: int, digits: int, shift: int) -> tuple[int, int, int, int, int] | None:
    """For numerators A of one bit length, delta bits longer than the denominator D: A/D
    lies in (2^(delta−1), 2^(delta+1)), so in decade c0 or c0 + 1 (c0 = ⌊(delta − 1)·log10 2⌋).
    (threshold, R, −k for the upper decade, R, −k for the lower), with A ≥ threshold
    exactly when A/D ≥ 10^(c0+1), k the shift that gives A/D·10^k ``digits`` digits and
    R = ⌊10^k·2^shift/D⌋; None when A/D may reach 10^digits (k < 0: the general test)."""
    c0 = _decade_of_power_of_two(delta - 1)
    k_high = digits - 2 - c0
    if k_high < 0 or delta > _RECIPROCAL_BITS - 40:
        return None
    c = c0 + 1
    threshold = total * p10(c) if c >= 0 else -(-total // p10(-c))   # ⌈D·10^c⌉
    low = (p10(k_high + 1) << shift) // total
    return (threshold, low // 10, -k_high, low, -k_high - 1)      # ⌊⌊x⌋/10⌋ = ⌊x/10⌋: one division


@lru_cache(maxsize=4096)
def _decade_of_power_of_two(a: int) -> int:
    """⌊log10 2^a⌋, exactly, for any integer a."""
    if a >= 0:
        return len(str(1 << a)) - 1
    return -len(str((1 << -a) - 1))      # 2^−a is no power of ten: −⌈log10 2^−a⌉


def _ratio_one(e: int, j: int, spread: int, total: int, b: int, rounding: Rounding,
               fine: dict[int, tuple[int, int]]) -> CertifiedDecimal | None:
    """One ratio by the general test: q = ⌊A·10^K/D⌋ with about digits + 4 digits, and the
    rounding of [q − 2, q + 2]·10^−K (a short numerator from its finer floor)."""
    if e < spread << b:
        return _tiny_ratio(*fine[j], spread, total, b, rounding) if j in fine else None
    assert rounding.digits is not None   # the fast path serves significant digits only
    # K so that q has about `want` digits (K ≥ want when A ≤ D); 1233/4096 ≈ log10 2
    k = rounding.digits + _GUARD_DIGITS - (((e.bit_length() - total.bit_length()) * 1233) >> 12)
    if k < 0:                                             # a row sum over 10^want: arb
        return None
    q = e * p10(k) // total
    if q.bit_length() > b - 3:
        return None
    return judge_enclosure(q, 2, -k, rounding)


def _outputs(engine: Engine, rows: dict[int, FixedRow], pending: dict[int, list[int]], b: int,
             f: int, rounding: Rounding) -> dict[int, dict[int, CertifiedDecimal]]:
    assert engine.V.rational is not None     # fixed_point_decimals checked it
    numerators, den = engine.V.rational.numer_denom()
    den = int(den)
    order = list(rows)
    # the product at the coarser unit 2^(B + bits(m) + 32): S ≥ 2^that ≥ k·2^B still, and
    # about 140 fewer bits per entry than the weights' (their extra 128 bits serve tiny weights)
    shift = max(0, f - (b + engine.m.bit_length() + _OUTPUT_SPARE_BITS))
    products = (flint.fmpz_mat([engine.fixed_exps_fmpz(i, f, b + 8, shift) for i in order])
                * numerators).tolist()
    # Σ_j |N_jc| over every key bounds the sum over a row's allowed keys
    spread_bits = [sum(abs(int(x)) for x in column).bit_length()
                   for column in numerators.transpose().tolist()]
    digits = rounding.digits
    assert digits is not None          # the fast path serves significant digits only
    want, q_bits = digits + _GUARD_DIGITS, b - 3
    pow10 = _powers_of_ten(2 * want + 64)
    low, high = pow10[digits - 1], pow10[digits]
    new, cls = new_decimal, CertifiedDecimal
    out: dict[int, dict[int, CertifiedDecimal]] = {}
    for i, row in zip(order, products):
        # S' = ⌊S/2^shift⌋ ≤ s·2^(F − shift) < S' + 1 + k/2^shift ≤ S' + k + 1
        total = rows[i].total >> shift
        if total < (rows[i].terms + 1) << b:     # D ≥ δ·2^B fails at the coarse unit: arb
            continue
        d = total * den
        d_bits = d.bit_length()
        decided_row = out[i] = {}
        for c in pending[i]:
            t = int(row[c])
            a = abs(t)
            k = want - (((a.bit_length() - d_bits) * 1233) >> 12)
            if t == 0 or not 0 <= k < len(pow10):    # |o| ≥ 10^want (huge V) or tiny: arb
                continue
            scale = pow10[k]
            q = a * scale // d
            if q.bit_length() > q_bits:
                continue
            # ⌈A_c·10^K/D⌉ + 2, bounded by bit lengths (no division): A_c·10^K < 2^(a + k),
            # D ≥ 2^(d − 1)
            rad = (1 << max(0, spread_bits[c] + scale.bit_length() - d_bits + 1)) + 2
            # the rounding of [q − rad, q + rad]·10^−K as in _weights, and the gap r
            # between q and its rounded decimal m·unit
            n = ((q.bit_length() - 1) * 1233 >> 12) + 1
            if q >= pow10[n]:
                n += 1
            if n <= digits:
                continue
            unit = pow10[n - digits]
            m, r = divmod(q, unit)
            if 2 * r >= unit:
                m, r = m + 1, r - unit
            if low < m < high and 2 * (r - rad) >= -unit and 2 * (r + rad) < unit:
                decided = new(cls, (-m if t < 0 else m, n - digits - k, False, rounding))
            else:                                         # a decade's edge: the general test
                edge = judge_enclosure(-q if t < 0 else q, rad, -k, rounding)
                if edge is None or edge.exponent + k < 0:
                    continue
                decided = edge
                r = q - abs(decided.mantissa) * pow10[decided.exponent + k]
            if -rad <= r <= rad and not (engine.algebraic and engine.algebraic_value("output", i, c) is None):
                # the enclosure holds its own decimal, and the output may be exactly it (a
                # constant value column): the arb path settles those.  When it is proved
                # transcendental (Lindemann–Weierstrass), the rounding stands as inexact.
                continue
            decided_row[c] = decided
    return out


def _tiny_ratio(fine: int, shift: int, spread: int, total: int, b: int,
                rounding: Rounding) -> CertifiedDecimal | None:
    """One ratio whose numerator lies in [M, M + spread)/2^s (a tiny weight or exponential):
    the same bound with A = M, D = total·2^s, δ = terms·2^s, so D ≥ δ·2^B holds as before,
    and q = ⌊M·10^K/(total·2^s)⌋ = ⌊⌊M·10^K/2^s⌋/total⌋ (floors of floors)."""
    if fine < spread << b:
        return None
    assert rounding.digits is not None   # the fast path serves significant digits only
    k = rounding.digits + _GUARD_DIGITS - (((fine.bit_length() - shift - total.bit_length()) * 1233) >> 12)
    if k < 0:
        return None
    q = ((fine * p10(k)) >> shift) // total
    if q.bit_length() > b - 3:
        return None
    return judge_enclosure(q, 2, -k, rounding)


@lru_cache(maxsize=16)
def _powers_of_ten(top: int) -> tuple[int, ...]:
    """10^0 … 10^top (an index in the hot loop; one table per size, shared by the rows)."""
    powers = [1]
    for _ in range(top):
        powers.append(powers[-1] * 10)
    return tuple(powers)
