"""Shared by the backward facts: when an instance check runs, and how a difference is decided
(exactly by Lindemann–Weierstrass where that applies, else by certified arb balls, worded as a
check of this instance)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import flint
import sympy

from symattn.errors import SymattnError
from symattn.facts.proof import Line
from symattn.facts.symbolic import has_symbols
from symattn.facts.zerotest import algebraically_zero, formally_zero
from symattn.numbers.arb import to_arb
from symattn.numbers.compare import exp_sum_is_zero, trig_is_zero
from symattn.numbers.precision import precision
from symattn.trace.trace import Trace

#: rows (and columns) checked exactly; past this the instance check uses certified balls
MAX_EXACT = 8
#: bits of the balls of an instance check that no exact test decides
BALL_BITS = 256
#: exact zero tests per check (a count, not seconds, so a check reads the same on any machine
#: and under any load); past them a difference is decided by its ball only
EXACT_BUDGET = 24


# ------------------------------------------------------------------ helpers

def no_backward(trace: Trace | None) -> tuple[Line, ...] | None:
    """The reason an instance check does not run (None: it runs)."""
    if trace is None:
        return ()
    if trace.problem.backward is None:
        return (Line("this problem has no backward key: nothing to check on it "
                     '(add backward = { loss = "sum" }, a target or a grad_output)'),)
    if has_symbols(trace):
        return (Line("this problem has symbols: the instance check needs numbers (substitute them)"),)
    return None


class Verdict:
    """How the differences of one check were decided: exactly, by balls, or not at all."""

    def __init__(self, budget: int | None = None, formal: bool = False) -> None:
        self.tests_left = EXACT_BUDGET if budget is None else budget
        self.formal = formal    # the formal zero test first (see _exact_zero)
        self.exact = 0
        self.by_balls = 0
        self.radius: flint.arb | None = None
        self.failed: list[tuple[Any, str]] = []

    def zero(self, difference: sympy.Expr, where: Any) -> bool:
        """Whether ``difference`` is 0: exactly when an exact test decides, else by a ball."""
        d = sympy.Integer(difference) if isinstance(difference, int) else difference   # an exact value, never text
        if d == 0:
            self.exact += 1
            return True
        ball = to_arb(d, BALL_BITS)
        if not ball.contains(0):          # certified nonzero: no exact test needed
            return self._ball(ball, where, True)
        decided = None
        if self.tests_left > 0:
            self.tests_left -= 1
            decided = _exact_zero(d, self.formal)
        if decided is True:
            self.exact += 1
            return True
        return self._ball(ball, where, decided is False)

    def ball(self, ball: flint.arb, where: Any) -> bool:
        return self._ball(ball, where, False)

    def _ball(self, ball: flint.arb, where: Any, proved_nonzero: bool) -> bool:
        if proved_nonzero or not ball.contains(0):
            self.failed.append((where, upper_text(abs(ball))))
            return False
        self.by_balls += 1
        rad = ball.rad() + abs(ball.mid())
        self.radius = rad if self.radius is None or rad > self.radius else self.radius
        return True

    @property
    def ok(self) -> bool:
        return not self.failed

    def how(self) -> str:
        """'exactly' or the honest wording of a ball check."""
        if self.failed:
            where, size = self.failed[0]
            return f"FAILS at {where}: the difference is certified nonzero (|·| about {size})"
        if not self.by_balls:
            return "exactly"
        bound = upper_text(self.radius) if self.radius is not None else "0"
        exact = f"{self.exact} exactly, " if self.exact else ""
        return (f"{exact}{self.by_balls} by certified {BALL_BITS}-bit balls: |difference| ≤ {bound} "
                "(a check of this instance, not an exact proof of 0)")


def _exact_zero(d: sympy.Expr, formal: bool = False) -> bool | None:
    """With ``formal`` and without cosines and sines, the formal test first (0 as a rational
    function over ℚ in a basis of exponentials and the other atoms: a proof of 0); then
    Lindemann–Weierstrass on exponentials (tanh rewritten as them), or on cosines and sines
    alone; None when none applies.

    The formal test is asked only for one gradient entry against SymPy's derivative (ten times
    cheaper there than the next test: 0.03 s instead of 0.25 s on the backward example).  On
    the identities' larger sums with surds it costs more than Lindemann–Weierstrass, and with
    RoPE's cos and sin inside the exponents it can take a minute on one entry and still miss
    cos² + sin² = 1."""
    if formal and not d.has(sympy.cos, sympy.sin) and formally_zero(d):
        return True
    try:
        if d.has(sympy.tanh):
            d = d.rewrite(sympy.exp)
        if d.has(sympy.cos, sympy.sin):
            return trig_is_zero(d) if not d.has(sympy.exp) else None
        return exp_sum_is_zero(d)
    except SymattnError:
        return None


def upper_text(x: flint.arb) -> str:
    """An upper bound of |x| with two significant digits, rounded up."""
    if x.is_zero():
        return "0"
    up = abs(x).abs_upper()
    m, e = flint.arb(up).mid().man_exp()
    value = Fraction(int(m)) * (Fraction(2) ** int(e))
    if value == 0:
        return "0"
    k = len(str(int(value))) - 1 if value >= 1 else -len(str(int(1 / value)))
    while Fraction(10) ** (k + 1) <= value:
        k += 1
    while Fraction(10) ** k > value:
        k -= 1
    scaled = value / Fraction(10) ** (k - 1)
    digits = -(-scaled.numerator // scaled.denominator)   # ceiling: an upper bound
    if digits >= 100:
        digits, k = 10, k + 1
    return f"{digits // 10}.{digits % 10}e{k:+d}"


def rows(trace: Trace) -> range:
    return range(min(trace.problem.n, MAX_EXACT))


def small(trace: Trace) -> bool:
    p = trace.problem
    return p.n <= MAX_EXACT and p.m <= MAX_EXACT


def label(trace: Trace, i: int) -> str:
    return repr(trace.problem.tokens[i])


def ball_sum(trace: Trace, terms: list[tuple[str, int, int, float]]) -> flint.arb:
    """Σ sign·entry as a ball, from the steps' certified enclosures."""
    cache: dict[tuple[str, int], list] = {}
    with precision(BALL_BITS):     # the arithmetic on the balls at their own precision
        out = flint.arb(0)
        for name, i, j, sgn in terms:
            key = (name, i)
            if key not in cache:
                cache[key] = trace.enclosure(name, i, BALL_BITS)
            out += cache[key][j] * sgn
    return out


def ball_products(trace: Trace, pairs: list[tuple[str, str]], rows: int, cols: int,
                   sgn: float) -> flint.arb:
    with precision(BALL_BITS):
        out = flint.arb(0)
        for a, b in pairs:
            for i in range(rows):
                ra, rb = trace.enclosure(a, i, BALL_BITS), trace.enclosure(b, i, BALL_BITS)
                for c in range(cols):
                    out += ra[c] * rb[c] * sgn
    return out


#: zero tests the structural proof of ⟨dQ, Q⟩ = ⟨dK, K⟩ may ask ((n + m)·d_k + n·m of them);
#: past this the identity is decided as a whole (by the exact tests above, else by balls)
MAX_STRUCTURAL_TESTS = 512


def inner_products_structurally(trace: Trace, q: str, k: str, dq: str, dk: str) -> bool:
    """Whether ⟨dq, q⟩ = ⟨dS', S⟩ = ⟨dk, k⟩ is proved from its parts, exactly: every entry of
    dq = dS'·k and dk = dS'ᵀ·q, and S = q·kᵀ (each 0 as a rational function over the roots'
    number field, tanh and the exponentials taken whole: :func:`algebraically_zero`), and the
    identity ⟨dQ, Q⟩ − ⟨dS', S⟩ = Σ Q_ic·(dQ − dS'·K)_ic + Σ dS'_ij·(Q·Kᵀ − S)_ij with dQ, dS'
    and S as symbols (a polynomial identity; likewise for dK).  False: not shown this way.

    Why: the inner products as wholes are sums of tanh and exponentials of algebraic numbers,
    and their zero test (Lindemann–Weierstrass) took minutes on a soft-capped 3-token problem
    with surds; the parts are each the step's own definition, decided in milliseconds."""
    p = trace.problem
    if (p.n + p.m) * p.d_k + p.n * p.m > MAX_STRUCTURAL_TESTS:
        return False
    Q, K, dQ, dK = (trace.step(name) for name in (q, k, dq, dk))
    S, dS = trace.step("scores"), trace.step("d_scores")
    allowed = [set(trace.allowed(i)) for i in range(p.n)]
    if any(dS[i, j] != 0 for i in range(p.n) for j in range(p.m) if j not in allowed[i]):
        return False
    pairs = [(i, j) for i in range(p.n) for j in sorted(allowed[i])]
    parts = [dQ[i, c] - sympy.Add(*[dS[i, j] * K[j, c] for j in sorted(allowed[i])])
             for i in range(p.n) for c in range(p.d_k)]
    parts += [dK[j, c] - sympy.Add(*[dS[i, j] * Q[i, c] for i in range(p.n) if j in allowed[i]])
              for j in range(p.m) for c in range(p.d_k)]
    parts += [S[i, j] - sympy.Add(*[Q[i, c] * K[j, c] for c in range(p.d_k)]) for i, j in pairs]
    if not all(algebraically_zero(part) for part in parts):
        return False
    return _identity_holds(p.n, p.m, p.d_k, pairs, Q, K)


def _identity_holds(n: int, m: int, d: int, pairs: list[tuple[int, int]], Q: Any, K: Any) -> bool:
    """⟨A, Q⟩ − ⟨G, S⟩ = Σ Q∘(A − G·K) + Σ G∘(Q·Kᵀ − S), and the same for B = dK, with A, B,
    G, S symbols and this problem's Q and K: verified, not assumed."""
    A = {(i, c): sympy.Symbol(f"a{i}_{c}") for i in range(n) for c in range(d)}
    B = {(j, c): sympy.Symbol(f"b{j}_{c}") for j in range(m) for c in range(d)}
    G = {ij: sympy.Symbol(f"g{ij[0]}_{ij[1]}") for ij in pairs}
    S = {ij: sympy.Symbol(f"s{ij[0]}_{ij[1]}") for ij in pairs}
    middle = sympy.Add(*[G[ij] * S[ij] for ij in pairs])
    gap = sympy.Add(*[G[i, j] * (sympy.Add(*[Q[i, c] * K[j, c] for c in range(d)]) - S[i, j]) for i, j in pairs])
    left = sympy.Add(*[A[i, c] * Q[i, c] for i, c in A]) - middle
    via_q = sympy.Add(*[Q[i, c] * (A[i, c] - sympy.Add(*[G[i, j] * K[j, c] for (r, j) in pairs if r == i]))
                        for i, c in A]) + gap
    right = sympy.Add(*[B[j, c] * K[j, c] for j, c in B]) - middle
    via_k = sympy.Add(*[K[j, c] * (B[j, c] - sympy.Add(*[G[i, r] * Q[i, c] for (i, r) in pairs if r == j]))
                        for j, c in B]) + gap
    return algebraically_zero(left - via_q) and algebraically_zero(right - via_k)
