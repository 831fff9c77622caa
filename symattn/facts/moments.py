"""The moments behind variance-d_k, derived here in a few exact steps.

Why not sympy.stats: its integrals (Meijer G) cost 0.7 s in every process that proves the
facts, for a handful of constants.  Each step below is computed by SymPy and checked;
the theorems used between them (Fubini and polar coordinates, translation invariance of
the integral, differentiating under it, linearity of E and E[XY] = E[X]E[Y] for independent
X, Y) are stated, not computed.

* **Normal(0, 1)**, density φ(x) = e^{−x²/2}/√(2π).  ∫φ = 1: (∫e^{−x²/2}dx)² is
  ∫∫e^{−(x²+y²)/2} dx dy = ∫₀^{2π}∫₀^∞ e^{−r²/2}·r dr dθ (the Jacobian of (r cos θ, r sin θ)
  is r, checked) = 2π·[−e^{−r²/2}]₀^∞ (the antiderivative checked by differentiating, the
  limit by SymPy) = 2π.  The moment generating function: s·x − x²/2 = s²/2 − (x − s)²/2
  (checked by expanding), so M(s) = E[e^{sx}] = e^{s²/2}·∫φ(x − s)dx = e^{s²/2}, and
  E[x^k] = M^{(k)}(0) (SymPy's derivatives).
* **Uniform(−√3, √3)**, density 1/(2√3) there: E[x^k] = [x^{k+1}/(k + 1)] from −√3 to √3,
  over 2√3 (SymPy integrates the polynomial).
* **Independent variables**: E of a polynomial in them, expanded, is the sum over its
  monomials of coefficient × the product of each variable's moment (:func:`expectation`).
"""

from __future__ import annotations

from functools import lru_cache

import sympy

__all__ = ["expectation", "normal_moments", "uniform_moments"]


@lru_cache(maxsize=None)
def _normal_density_integrates_to_one() -> bool:
    """(∫e^{−x²/2}dx)² = 2π by polar coordinates: the three checked steps."""
    r, theta = sympy.symbols("r theta", positive=True)
    x, y = r * sympy.cos(theta), r * sympy.sin(theta)
    jacobian = sympy.diff(x, r) * sympy.diff(y, theta) - sympy.diff(x, theta) * sympy.diff(y, r)
    jacobian_ok = sympy.expand((jacobian - r).rewrite(sympy.exp)) == 0           # cos² + sin² = 1
    radius_ok = sympy.expand((x ** 2 + y ** 2 - r ** 2).rewrite(sympy.exp)) == 0     # so e^{−(x²+y²)/2} = e^{−r²/2}
    antiderivative = -sympy.exp(-r ** 2 / 2)
    anti_ok = sympy.diff(antiderivative, r) - r * sympy.exp(-r ** 2 / 2) == 0
    radial = sympy.limit(antiderivative, r, sympy.oo) - antiderivative.subs(r, 0)     # ∫₀^∞ e^{−r²/2} r dr
    square = 2 * sympy.pi * radial                                                   # ∫₀^{2π} dθ · that
    return jacobian_ok and radius_ok and anti_ok and radial == 1 and square == 2 * sympy.pi


@lru_cache(maxsize=None)
def normal_moments(n: int) -> tuple[sympy.Expr, ...] | None:
    """E[x⁰], …, E[xⁿ] for x ~ Normal(0, 1) (1, 0, 1, 0, 3, …); None if a step failed."""
    if not _normal_density_integrates_to_one():
        return None
    s, x = sympy.symbols("s x", real=True)
    if sympy.expand(s * x - x ** 2 / 2 - (s ** 2 / 2 - (x - s) ** 2 / 2)) != 0:   # completing the square
        return None
    mgf = sympy.exp(s ** 2 / 2)
    return tuple(sympy.diff(mgf, s, k).subs(s, 0) for k in range(n + 1))


@lru_cache(maxsize=None)
def uniform_moments(half_width: sympy.Expr, n: int) -> tuple[sympy.Expr, ...]:
    """E[x⁰], …, E[xⁿ] for x uniform on (−a, a), a = ``half_width``: ∫ x^k dx/(2a) over it."""
    x = sympy.Symbol("x", real=True)
    out = []
    for k in range(n + 1):
        antiderivative = sympy.Poly(x ** k, x).integrate().as_expr()
        out.append((antiderivative.subs(x, half_width) - antiderivative.subs(x, -half_width)) / (2 * half_width))
    return tuple(out)


def expectation(expr: sympy.Expr, moments: dict[sympy.Symbol, tuple[sympy.Expr, ...]]) -> sympy.Expr:
    """E[expr] for a polynomial in independent variables with the given moments (E[v^k] is
    ``moments[v][k]``): linearity over the expanded monomials, and E of a monomial is the
    product of its variables' moments (independence)."""
    gens = list(moments)
    poly = sympy.Poly(sympy.expand(expr), *gens)
    total = sympy.S.Zero
    for powers, coeff in poly.terms():
        term = sympy.Mul(coeff, *[moments[v][k] for v, k in zip(gens, powers)])
        total += term
    return sympy.expand(total)
