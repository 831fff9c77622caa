"""Outputs a finite mask puts on a rounding boundary, decided by the sign of the distance to it.

With an additive sentinel (−1e9, −5e4, float32's minimum) a row can attend to a few keys
at full weight and to the rest with weights like e^(−1e9).  When the full-weight keys'
values average exactly to a rounding midpoint m of the target format (a float32 V entry
that is a float16 midpoint, say), the output is m + δ with |δ| ≈ e^(−1e9): its rounding
depends only on the sign of δ, and an arb ball of the output would need about 1.4·10^9
bits to see it.  :func:`decide_by_sign` decides that sign structurally, with exact
arithmetic for the cancellation and balls only for sums that do not cancel.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from fractions import Fraction

import flint

from symattn.floatref.binary import BinaryFormat, round_fraction
from symattn.numbers.precision import precision

#: the precision of the ball that locates the boundary, and those tried for the sign
LOCATE_BITS = 256
SIGN_BITS = (128, 512, 2048, 8192)


def _fraction(x: flint.arb) -> Fraction:
    man, exp = (int(v) for v in x.man_exp())
    return Fraction(man) * Fraction(2) ** exp


def _arb(x: Fraction) -> flint.arb:
    return flint.arb(flint.fmpq(x.numerator, x.denominator))


def boundary_near(ball: flint.arb, fmt: BinaryFormat) -> tuple[Fraction, Fraction] | None:
    """(m, h): the one rounding boundary m of ``fmt`` (a midpoint between neighbours, or the
    overflow threshold) with ``ball`` inside (m − h, m + h), where h is a quarter of the
    quantum at m; None when there is no such m.  Why h: (m − h, m) and (m, m + h) hold no
    boundary (the next ones are at least 3h away, at a binade edge too), so every value in
    one of them rounds as m ∓ h does."""
    if not ball.is_finite():
        return None
    x = _fraction(ball.mid())
    a = abs(x)
    if a == 0 or a > Fraction(2) ** (fmt.e_max + 1):
        return None
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < Fraction(2) ** e:
        e -= 1                                           # 2^e ≤ |x| < 2^(e+1)
    q = max(e, fmt.e_min) - fmt.p + 1                    # the quantum 2^q at |x|
    cell = Fraction(2) ** q
    m = (a // cell + Fraction(1, 2)) * cell              # the midpoint of |x|'s cell
    m = m if x > 0 else -m
    h = cell / 4
    inside = bool(ball > _arb(m - h)) and bool(ball < _arb(m + h))
    return (m, h) if inside else None


def decide_by_sign(tags: list[Hashable], t_of: Callable[[list[int]], list[flint.arb]],
                   values: list[Fraction], fmt: BinaryFormat) -> float | None:
    """RN(o) for o = Σ_j e^(t_j)·v_j / Σ_j e^(t_j) near a boundary m of ``fmt``, or None.

    ``tags[j]`` equal exactly when the t_j are equal (exact scores and mask values);
    ``t_of(js)``: arb balls of t_j at the current precision; ``values``: the exact v_j.

    Proof.  Σ_j e^(t_j) > 0, so sign(o − m) = sign(N) with
    N = Σ_j e^(t_j − c)·(v_j − m) = Σ_g e^(t_g − c)·c_g  (any real c),
    where g runs over the groups of keys with equal t and c_g = Σ_{j∈g} (v_j − m) is an exact
    rational.  Groups with c_g = 0 add exactly 0 and are dropped (this is the cancellation no
    ball of o can see: the full-weight keys whose values average to m).  If every c_g is 0,
    o = m exactly and RN(m) is its round-half-even.  Otherwise N is evaluated as an arb ball
    over the remaining groups, c their largest t midpoint (e^(−1e9) is an ordinary ball with
    a large negative exponent); a ball excluding 0 proves the sign.  The ball of o (located
    first) lies in (m − h, m + h), which holds no boundary but m (:func:`boundary_near`), so
    RN(o) = RN(m + sign(N)·h).  A ball of N containing 0 at every precision tried (true
    cancellation among the lower groups) gives None, the caller's refusal."""
    groups: dict[Hashable, list[int]] = {}
    for j, tag in enumerate(tags):
        groups.setdefault(tag, []).append(j)
    reps = [js[0] for js in groups.values()]
    sums = [sum((values[j] for j in js), Fraction(0)) for js in groups.values()]
    sizes = [len(js) for js in groups.values()]
    with precision(LOCATE_BITS):
        t = t_of(reps)
        c = max(x.mid() for x in t)
        w = [(x - c).exp() for x in t]
        num = sum((wi * _arb(si) for wi, si in zip(w, sums)), flint.arb(0))
        den = sum((wi * n for wi, n in zip(w, sizes)), flint.arb(0))
        located = boundary_near(num / den, fmt)
    if located is None:
        return None
    m, h = located
    coeffs = [(g, s - n * m) for g, (s, n) in enumerate(zip(sums, sizes)) if s != n * m]
    if not coeffs:
        return round_fraction(m, fmt)                    # o = m exactly: ties to even
    for bits in SIGN_BITS:
        with precision(bits):
            t = t_of([reps[g] for g, _ in coeffs])
            c = max(x.mid() for x in t)
            N = sum(((x - c).exp() * _arb(cg) for x, (_, cg) in zip(t, coeffs)), flint.arb(0))
            if N > 0 or N < 0:
                return round_fraction(m + h if N > 0 else m - h, fmt)
    return None


def lse_by_sign(tags: list[Hashable], t_of: Callable[[list[int]], list[flint.arb]],
                exact: Callable[[int], Fraction | None], fmt: BinaryFormat) -> float | None:
    """RN(lse) for lse = log Σ_j e^(t_j) near a boundary m of ``fmt``, or None.

    ``tags`` and ``t_of`` as :func:`decide_by_sign`; ``exact(j)``: t_j as a Fraction when it is
    rational (else None).  Proof.  Group the keys by equal t; let the top group (the largest
    t, its ball above every other group's) have n keys and value t_0, and
    R = Σ_{g below} n_g·e^(t_g − t_0) > 0.  Then lse − m = (t_0 − m) + log(n + R), with t_0 − m
    exact when t_0 is rational.  The case a sentinel makes: one key at full weight whose
    t_0 is itself the boundary m, so lse − m = log1p(R) ≈ e^(−1e9) > 0, which a ball of
    log1p(R) shows positive at any precision while a ball of lse cannot.  A ball of lse − m
    excluding 0 proves its sign, and with the ball of lse inside (m − h, m + h)
    (:func:`boundary_near`) RN(lse) = RN(m + sign·h).  Otherwise None."""
    groups: dict[Hashable, list[int]] = {}
    for j, tag in enumerate(tags):
        groups.setdefault(tag, []).append(j)
    reps = [js[0] for js in groups.values()]
    sizes = [len(js) for js in groups.values()]
    with precision(LOCATE_BITS):
        t = t_of(reps)
        c = max(x.mid() for x in t)
        located = boundary_near(c + sum(((x - c).exp() * n for x, n in zip(t, sizes)), flint.arb(0)).log(), fmt)
        top = max(range(len(t)), key=lambda g: t[g].mid())
        if located is None or not all(t[top] > x for g, x in enumerate(t) if g != top):
            return None
    m, h = located
    t0 = exact(reps[top])
    for bits in SIGN_BITS:
        with precision(bits):
            t = t_of(reps)
            R = sum(((x - t[top]).exp() * n for g, (x, n) in enumerate(zip(t, sizes)) if g != top), flint.arb(0))
            gap = _arb(t0 - m) if t0 is not None else t[top] - _arb(m)
            D = gap + (R.log1p() if sizes[top] == 1 else (R + sizes[top]).log())
            if D > 0 or D < 0:
                return round_fraction(m + h if D > 0 else m - h, fmt)
    return None


def sum_by_sign(terms: list[tuple[Hashable, Fraction]], exponent: Callable[[Hashable], flint.arb],
                scale: Fraction, fmt: BinaryFormat) -> float | None:
    """RN(x) for x = scale·Σ_k c_k·e^(a_k) near a boundary m of ``fmt`` (a gradient entry of the
    given-O-and-lse backward: dV with scale 1, dQ and dK with a rational scale s ≠ 0), or None.

    ``terms``: (a_k as an exact key, c_k exact); ``exponent(key)``: a ball of a_k at the current
    precision.  Proof.  sign(x − m) = sign(scale)·sign(Σ_g C_g·e^(a_g) − m/scale), C_g the exact
    sum of the c_k of equal exponent.  The e^0 group is rational: C_0 − m/scale is exact, and so
    is every C_g = 0 (dropped).  What is left is an arb ball; excluding 0 it proves the sign,
    and RN(x) = RN(m + sign·h) as in :func:`decide_by_sign`.  The case a sentinel makes: dV_j =
    dO_j·e^0 + Σ e^(−1e9)·dO_i with dO_j a midpoint."""
    groups: dict[Hashable, Fraction] = {}
    for key, coef in terms:
        groups[key] = groups.get(key, Fraction(0)) + coef
    zero = [key for key in groups if exponent_is_zero(key)]
    with precision(LOCATE_BITS):
        total = sum((exponent(k).exp() * _arb(cg) for k, cg in groups.items()), flint.arb(0))
        located = boundary_near(total * _arb(scale), fmt)
    if located is None or scale == 0:
        return None
    m, h = located
    c0 = (groups[zero[0]] if zero else Fraction(0)) - m / scale
    rest = [(k, cg) for k, cg in groups.items() if cg and k not in zero]
    if not rest:
        return round_fraction(m + (h if c0 * scale > 0 else -h) if c0 else m, fmt)
    for bits in SIGN_BITS:
        with precision(bits):
            N = sum((exponent(k).exp() * _arb(cg) for k, cg in rest), _arb(c0))
            if N > 0 or N < 0:
                up = bool(N > 0) == (scale > 0)
                return round_fraction(m + h if up else m - h, fmt)
    return None


def exponent_is_zero(key: Hashable) -> bool:
    """The key of the exponent 0: Fraction 0, or (0, 0) for a = s·x + y with s irrational."""
    return key == 0 if isinstance(key, Fraction) else key == (0, 0)


__all__ = ["boundary_near", "decide_by_sign", "exponent_is_zero", "lse_by_sign", "sum_by_sign"]
