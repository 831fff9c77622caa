"""An independent reference for scaled dot-product attention, for differential tests.

Shares no code with symattn (nothing here imports it): exact steps in
Python ``fractions``, scaled scores as exact surds g·√r decided with integer
square roots, and the softmax side in a private mpmath context at
``digits + 30`` working digits with a guard.

Which softmax values are exact is decided structurally, by
Lindemann–Weierstrass (e^a for distinct algebraic a are linearly
independent over the algebraic numbers): exp[i, j] is 1 at the row maximum
and transcendental elsewhere; row_sum and weights are rational only when
every allowed key of the row ties; output[i, c] is rational (= λ) only when
every group of tied keys has mean value λ in column c.  Rational values are
rounded exactly with integers; a transcendental value is trusted only when
it is not within 10^-(digits+10) (relative) of a rounding boundary.  Near
one (a near one-hot row whose top value is 35.5) the working precision
grows until the rounding is decided; a value that still sits on a boundary
at MAX_WORK_DIGITS raises ReferenceUndecided, which would expose a mistaken
exact/transcendental classification, never pass a test.

Rounding is half away from zero to ``digits`` significant digits, and the
text follows the README's JSON rules (``%#.Ng``-like, trailing zeros kept,
exact terminating values unpadded and plain below 1e21).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Union

import mpmath

GUARD_DIGITS = 30          # working digits beyond the digits asked for
BOUNDARY_DIGITS = 10       # refuse to trust a value this close (relative) to a boundary
SCI_LOW = -4               # scientific notation below 1e-4 ...
EXACT_PLAIN_MAX = 21       # ... and, for exact values, from 1e21 on
MAX_WORK_DIGITS = 200_000  # the most working digits tried near a boundary


class ReferenceUndecided(AssertionError):
    """A value the reference cannot decide: it looks exactly like a rounding boundary."""


# ---------------------------------------------------------------- numbers

def isqrt_fraction(q: Fraction) -> Fraction | None:
    """The exact square root of q >= 0 when it is rational, else None."""
    a, b = q.numerator, q.denominator
    ra, rb = math.isqrt(a), math.isqrt(b)
    return Fraction(ra, rb) if ra * ra == a and rb * rb == b else None


@dataclass(frozen=True)
class Surd:
    """g·√r with rational g and r > 0 (r not a rational square)."""

    g: Fraction
    r: Fraction


@dataclass(frozen=True)
class Transcendental:
    """A value known only through an evaluator: ``evaluate(dps)`` gives
    ``(x, ctx)``, an mpmath number with about dps correct digits (relative)
    and the private context it was computed in."""

    evaluate: Callable[[int], tuple]
    label: str = ""


class NegInf:
    """-inf at a masked position."""

    def __repr__(self) -> str:
        return "-inf"


NEG_INF = NegInf()

Value = Union[Fraction, Surd, Transcendental, NegInf]


def surd(g: Fraction, r: Fraction) -> Fraction | Surd:
    """g·√r, collapsed to a Fraction when √r is rational or g is 0."""
    if g == 0:
        return Fraction(0)
    root = isqrt_fraction(r)
    return g * root if root is not None else Surd(g, r)


def surd_to_mp(ctx: mpmath.ctx_mp.MPContext, g: Fraction, r: Fraction) -> mpmath.mpf:
    return ctx.mpf(g.numerator) / g.denominator * ctx.sqrt(ctx.mpf(r.numerator) / r.denominator)


# ---------------------------------------------------------------- rounding

@dataclass(frozen=True)
class Rounded:
    """mantissa·10^exponent, |mantissa| with exactly ``digits`` digits (or 0);
    ``exact`` when it equals the value."""

    mantissa: int
    exponent: int
    exact: bool

    def as_fraction(self) -> Fraction:
        return Fraction(self.mantissa) * Fraction(10) ** self.exponent


def _decade(a: Fraction) -> int:
    """floor(log10 a) for a > 0, decided with integers."""
    e = int((a.numerator.bit_length() - a.denominator.bit_length()) * 0.30102999566398)
    while Fraction(10) ** e > a:
        e -= 1
    while Fraction(10) ** (e + 1) <= a:
        e += 1
    return e


def round_fraction(q: Fraction, digits: int) -> Rounded:
    """q rounded half away from zero to ``digits`` significant digits, exactly."""
    if q == 0:
        return Rounded(0, 0, True)
    a = abs(q)
    t = _decade(a) - digits + 1
    scaled = a / Fraction(10) ** t                    # in [10^(d-1), 10^d)
    m = math.floor(scaled + Fraction(1, 2))           # half away from zero (a > 0)
    exact = m == scaled
    if m == 10**digits:
        m, t = m // 10, t + 1
    return Rounded(m if q > 0 else -m, t, exact)


def round_surd(s: Surd, digits: int) -> Rounded:
    """g·√r rounded exactly: |x| = √A with A = g²r; integer square roots decide."""
    A = s.g * s.g * s.r
    # decade: 10^e <= √A < 10^(e+1)  <=>  10^(2e) <= A < 10^(2e+2)
    e = _decade(A) // 2
    t = e - digits + 1
    y = A / Fraction(100) ** t                        # (|x| / 10^t)^2
    n = math.isqrt(y.numerator // y.denominator)      # floor(|x| / 10^t)
    m = n + 1 if y >= (n + Fraction(1, 2)) ** 2 else n
    if m == 10**digits:
        m, t = m // 10, t + 1
    return Rounded(m if s.g > 0 else -m, t, False)    # irrational: never exact


class TooClose(Exception):
    """The value is within the working precision's slack of a rounding boundary."""


def round_mp(ctx: mpmath.ctx_mp.MPContext, x: mpmath.mpf, digits: int, slack: int) -> Rounded:
    """x (correct to about ctx.dps digits) rounded half away from zero; raises
    TooClose when x is within 10^-slack (relative) of a rounding boundary."""
    a = abs(x)
    e = int(ctx.mag(a) * 0.30103)          # a cheap estimate, corrected below
    while a >= ctx.mpf(10) ** (e + 1):
        e += 1
    while a < ctx.mpf(10) ** e:
        e -= 1
    # A power of 10 is not a rounding boundary: just below it, the rounding
    # carries up to the same decimal as just above it (0.99…97 -> 1.00).
    t = e - digits + 1
    scaled = a / ctx.mpf(10) ** t
    n = int(ctx.floor(scaled))
    if abs(scaled - n - ctx.mpf(0.5)) <= ctx.mpf(10) ** -slack * scaled:
        raise TooClose
    m = n + 1 if scaled - n > ctx.mpf(0.5) else n
    if m == 10**digits:
        m, t = m // 10, t + 1
    return Rounded(m if x > 0 else -m, t, False)


def round_transcendental(value: "Transcendental", digits: int) -> Rounded:
    """Evaluate at digits + GUARD_DIGITS and trust the rounding only when the
    value is farther than 10^-(digits + BOUNDARY_DIGITS) (relative) from a
    boundary.  A transcendental value is never ON a boundary, only perhaps
    near one (a near one-hot row whose top value is 35.5 gives
    35.5 − e^-300·…): then the working precision grows, keeping the same
    slack of GUARD_DIGITS − BOUNDARY_DIGITS digits, until it is decided."""
    work = digits + GUARD_DIGITS
    while work <= MAX_WORK_DIGITS:
        x, ctx = value.evaluate(work)
        if x == 0:
            raise ReferenceUndecided(f"{value.label}: a transcendental value evaluated to 0")
        try:
            return round_mp(ctx, x, digits, work - (GUARD_DIGITS - BOUNDARY_DIGITS))
        except TooClose:
            work = 2 * work + 100
    raise ReferenceUndecided(f"{value.label}: within 10^-{MAX_WORK_DIGITS} of a rounding boundary "
                             f"at {digits} digits (is it really transcendental?)")


def int_text(v: int) -> str:
    """Decimal digits of v >= 0 without Python's 4,300-digit str() limit."""
    if v < 10**4000:
        return str(v)
    k = (v.bit_length() * 30103) // 200000            # about half the digits
    high, low = divmod(v, 10**k)
    return int_text(high) + int_text(low).rjust(k, "0")


def format_rounded(r: Rounded, digits: int) -> str:
    """The README's text rules for significant digits: like ``%#.{digits}g``
    (scientific when the leading exponent is < -4 or >= digits, written
    ``1.23e4`` / ``4.54e-7``), trailing zeros kept; a value equal to its
    rounding drops trailing zeros and stays plain below 1e21."""
    if r.mantissa == 0:
        return "0"
    sign = "-" if r.mantissa < 0 else ""
    s = int_text(abs(r.mantissa))
    t = r.exponent
    limit = digits
    if r.exact:
        stripped = s.rstrip("0")
        t += len(s) - len(stripped)
        s = stripped
        limit = max(digits, EXACT_PLAIN_MAX)
    lead = t + len(s) - 1
    if lead < SCI_LOW or lead >= limit:
        return f"{sign}{s[0]}{'.' + s[1:] if len(s) > 1 else ''}e{lead}"
    if lead < 0:
        return f"{sign}0.{'0' * (-lead - 1)}{s}"
    whole, frac = s[:lead + 1].ljust(lead + 1, "0"), s[lead + 1:]
    return sign + whole + ("." + frac if frac else "")


# ---------------------------------------------------------------- the problem

Matrix = list[list[Fraction]]


@dataclass
class RefProblem:
    """Inputs of one problem, exactly.  ``scale`` is c·√r (default 1/√d_k);
    ``mask[i][j]`` True = may attend (None: no mask)."""

    Q: Matrix | None = None
    K: Matrix | None = None
    V: Matrix | None = None
    X: Matrix | None = None
    W_q: Matrix | None = None
    W_k: Matrix | None = None
    W_v: Matrix | None = None
    X_kv: Matrix | None = None
    scale_c: Fraction | None = None      # None: the default 1/√d_k
    scale_r: Fraction = Fraction(1)
    mask: list[list[bool]] | None = None
    steps: dict[str, list[list[Value]]] = field(default_factory=dict, init=False)


def matmul(A: Matrix, B: Matrix, transpose_b: bool = False) -> Matrix:
    if transpose_b:
        return [[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in B] for row in A]
    cols = list(zip(*B))
    return [[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in cols] for row in A]


def solve(p: RefProblem) -> dict[str, list[list[Value]]]:
    """Every step of the trace, in symattn's order, as exact or evaluable values."""
    steps: dict[str, list[list[Value]]] = {}
    if p.X is not None:
        kv = p.X_kv if p.X_kv is not None else p.X
        steps.update(X=p.X, W_q=p.W_q, W_k=p.W_k, W_v=p.W_v)
        if p.X_kv is not None:
            steps["X_kv"] = p.X_kv
        Q, K, V = matmul(p.X, p.W_q), matmul(kv, p.W_k), matmul(kv, p.W_v)
    else:
        Q, K, V = p.Q, p.K, p.V
    steps.update(Q=Q, K=K, V=V)
    n, m, d_k, d_v = len(Q), len(K), len(Q[0]), len(V[0])
    scores = matmul(Q, K, transpose_b=True)
    steps["scores"] = scores
    if p.scale_c is None:
        c, r = Fraction(1), Fraction(1, d_k)
    else:
        c, r = p.scale_c, p.scale_r
    root = isqrt_fraction(r)
    if root is not None:
        c, r = c * root, Fraction(1)
    allowed = [[p.mask is None or bool(p.mask[i][j]) for j in range(m)] for i in range(n)]
    steps["scaled"] = [[surd(s * c, r) for s in row] for row in scores]
    if p.mask is not None:
        steps["masked"] = [[steps["scaled"][i][j] if allowed[i][j] else NEG_INF for j in range(m)]
                           for i in range(n)]
    # the row maximum of the scaled scores: compare c·s exactly (√r > 0)
    gaps: list[list[Fraction | None]] = []     # g with shifted = g·√r, None where masked
    for i in range(n):
        best = max(c * scores[i][j] for j in range(m) if allowed[i][j])
        gaps.append([c * scores[i][j] - best if allowed[i][j] else None for j in range(m)])
    steps["shifted"] = [[NEG_INF if g is None else surd(g, r) for g in row] for row in gaps]
    exp_rows, sum_rows, weight_rows, out_rows = [], [], [], []
    for i in range(n):
        row_exp, row_sum, row_w, row_out = _softmax_row(gaps[i], r, V, d_v, label=f"row {i}")
        exp_rows.append(row_exp)
        sum_rows.append([row_sum])
        weight_rows.append(row_w)
        out_rows.append(row_out)
    steps.update(exp=exp_rows, row_sum=sum_rows, weights=weight_rows, output=out_rows)
    return steps


class _RowNumbers:
    """The exponentials of one row in a private mpmath context, once per precision.

    ``at(dps)`` gives (ctx, {gap: e^(gap·√r)}, Σ count·e^...) with dps digits
    plus as many as the largest exponent's magnitude costs exp()."""

    def __init__(self, groups: dict[Fraction, list[int]], r: Fraction) -> None:
        self.groups, self.r = groups, r
        bound = max((math.ceil(abs(g)) * (math.isqrt(math.ceil(r)) + 1) for g in groups), default=1)
        self.extra = len(str(bound)) + 2
        self._memo: dict[int, tuple] = {}

    def at(self, dps: int) -> tuple:
        if dps not in self._memo:
            ctx = mpmath.MPContext()
            ctx.dps = dps + self.extra
            root = ctx.sqrt(ctx.mpf(self.r.numerator) / self.r.denominator)
            exps = {g: ctx.exp(ctx.mpf(g.numerator) / g.denominator * root) for g in self.groups}
            total = ctx.fsum(len(js) * exps[g] for g, js in self.groups.items())
            self._memo[dps] = (ctx, exps, total)
        return self._memo[dps]


def _softmax_row(gaps: list[Fraction | None], r: Fraction, V: Matrix, d_v: int, label: str):
    """exp, row_sum, weights and output of one row, as exact values where the
    exponentials cancel and as mpmath evaluators elsewhere."""
    groups: dict[Fraction, list[int]] = {}
    for j, g in enumerate(gaps):
        if g is not None:
            groups.setdefault(g, []).append(j)
    count = sum(len(js) for js in groups.values())
    tied = len(groups) == 1
    numbers = _RowNumbers(groups, r)

    def exp_of(g):
        def evaluate(dps):
            ctx, exps, _ = numbers.at(dps)
            return exps[g], ctx
        return evaluate

    def weight_of(g):
        def evaluate(dps):
            ctx, exps, total = numbers.at(dps)
            return exps[g] / total, ctx
        return evaluate

    def row_total(dps):
        ctx, _, total = numbers.at(dps)
        return total, ctx

    row_exp: list[Value] = []
    row_w: list[Value] = []
    for j, g in enumerate(gaps):
        if g is None:
            row_exp.append(Fraction(0))
            row_w.append(Fraction(0))
            continue
        row_exp.append(Fraction(1) if g == 0 else Transcendental(exp_of(g), f"exp {label} key {j}"))
        row_w.append(Fraction(1, count) if tied else
                     Transcendental(weight_of(g), f"weight {label} key {j}"))
    row_sum: Value = Fraction(count) if tied else Transcendental(row_total, f"row_sum {label}")
    row_out: list[Value] = []
    for col in range(d_v):
        sums = {g: sum((V[j][col] for j in js), Fraction(0)) for g, js in groups.items()}
        means = {sums[g] / len(js) for g, js in groups.items()}
        if len(means) == 1:                 # every tie group has the same mean λ: output = λ
            row_out.append(means.pop())
            continue
        sums = {g: v for g, v in sums.items() if v != 0}
        row_out.append(Transcendental(lambda dps, sums=sums: _output(numbers, sums, dps),
                                      f"output {label} column {col}"))
    return row_exp, row_sum, row_w, row_out


def _output(numbers: _RowNumbers, sums: dict[Fraction, Fraction], dps: int) -> tuple:
    """Σ sums[g]·e^g / total, redone at more digits for as many as the sum cancels
    (it is never 0: Lindemann–Weierstrass, as the group means differ)."""
    work = dps
    for _ in range(12):
        ctx, exps, total = numbers.at(work)
        terms = [ctx.mpf(s.numerator) / s.denominator * exps[g] for g, s in sums.items()]
        num = ctx.fsum(terms)
        if num != 0:
            lost = int((max(ctx.mag(t) for t in terms) - ctx.mag(num) + 2) * 0.30103) + 1
            if work - dps >= lost:
                return num / total, ctx
            work = dps + lost + 20
        else:
            work = 2 * work + 50
    raise ReferenceUndecided("the output's numerator cancels beyond every precision tried")


# ---------------------------------------------------------------- decimals

def round_value(value: Value, digits: int) -> Rounded | NegInf:
    """The correct rounding of one value, decided exactly or with a guard."""
    if isinstance(value, NegInf):
        return value
    if isinstance(value, Fraction):
        return round_fraction(value, digits)
    if isinstance(value, Surd):
        return round_surd(value, digits)
    return round_transcendental(value, digits)


def decimal_text(value: Value, digits: int) -> str:
    """The README's JSON decimal of one value: "-inf" where masked."""
    r = round_value(value, digits)
    return "-inf" if isinstance(r, NegInf) else format_rounded(r, digits)


def decimal_table(steps: dict[str, list[list[Value]]], digits: int) -> dict[str, list[list[str]]]:
    """Every step's decimals as the JSON view should print them."""
    return {name: [[decimal_text(v, digits) for v in row] for row in rows]
            for name, rows in steps.items()}
