"""Exact decisions about real numbers: sign, order, equality.

The row maximum of the scaled scores must be *decided*, not guessed from
floats: two scores may differ in the 40th digit, or be equal in different
forms (2√2 and √8).  Rationals are compared directly; anything else is
enclosed in arb balls of growing precision until the sign is clear, and a
number whose balls keep straddling zero is tested for being exactly zero.
"""

from __future__ import annotations

import sympy
from sympy.polys.numberfields import minimal_polynomial
from sympy.simplify.fu import TR8

from symattn.exact.parser import minimal_polynomial_affordable
from symattn.numbers.arb import SYMPY_FAILURES, _short, to_arb
from symattn.numbers.precision import SIGN_DIGITS, cap_bits, precisions, undecided

#: past this many bits a ball still straddling 0 is tested for being exactly 0
_ZERO_TEST_BITS = 1 << 12


def _is_exactly_zero(expr: sympy.Expr) -> bool | None:
    """True/False when an exact test settles whether ``expr`` is 0, else None.

    Only algebraic numbers are tested (their minimal polynomial is x exactly
    when they are 0; the parser's degree cap keeps that cheap).  SymPy's
    ``equals`` is never asked: on a transcendental near-tie it runs its
    solver without bound, so such a number is refused instead."""
    if not expr.is_algebraic:   # cosines and sines of algebraic angles (RoPE scores), or e^β
        return trig_is_zero(expr) if expr.has(sympy.cos, sympy.sin) else exp_sum_is_zero(expr)
    if not minimal_polynomial_affordable(expr):
        expr = _denested(expr)        # √(5 + 2√6) − √2 − √3: degree bound 16, truly 4
        if expr == 0:
            return True
        if not minimal_polynomial_affordable(expr):
            return None   # a derived root of index 10^4 (e^(c·log b) = b^c): no minimal polynomial
    x = sympy.Dummy("x")
    try:
        return minimal_polynomial(expr, x) == x
    except SYMPY_FAILURES:      # NotAlgebraic, NotImplementedError, OverflowError, ...: undecided
        return None


#: nested roots are denested only in values this small (sqrtdenest's cost grows with them)
_DENEST_OPS = 200


def _denested(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with its nested square roots denested (√(5 + 2√6) = √2 + √3) and expanded, or
    ``expr`` itself.  Why: the degree bound counts every distinct root, so a nested root whose
    field is that of the plain roots beside it over-counts, and a zero stays undecided."""
    if sympy.count_ops(expr) > _DENEST_OPS:
        return expr
    try:
        return sympy.expand(sympy.sqrtdenest(expr))
    except SYMPY_FAILURES:
        return expr


def sign(expr: sympy.Expr) -> int:
    """The exact sign (-1, 0 or 1) of a real number given as a SymPy expression."""
    if not isinstance(expr, sympy.Basic):
        expr = sympy.Rational(expr)  # ints and Fractions; strings never reach here
    if expr.is_Rational:
        return 1 if expr.p > 0 else (-1 if expr.p < 0 else 0)
    tried = False
    for prec in precisions(SIGN_DIGITS):
        ball = to_arb(expr, prec)
        if ball > 0:
            return 1
        if ball < 0:
            return -1
        if ball.is_exact() and ball.is_zero():
            return 0
        if not tried and prec >= _ZERO_TEST_BITS:
            tried = True
            if _is_exactly_zero(expr):
                return 0
    raise undecided(_short(expr), "the sign", cap_bits(SIGN_DIGITS),
                    "it is that close to 0 and could not be proved 0",
                    "write it so that SymPy can simplify it (e.g. combine the logarithms)")


def compare(a: sympy.Expr, b: sympy.Expr) -> int:
    """-1, 0 or 1 as a < b, a == b, a > b, decided exactly."""
    return sign(sympy.expand(a - b))


def equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Exact equality of two real numbers, whatever their written form."""
    return a == b or compare(a, b) == 0


# -- exact zero test for sums of cosines and sines ----------------------------------------

def _has_trig_products(expr: sympy.Expr) -> bool:
    return any(len(term.atoms(sympy.cos, sympy.sin)) > 1 or term.has(sympy.Pow)
               and any(isinstance(f, sympy.Pow) and f.base.func in (sympy.cos, sympy.sin)
                       for f in sympy.Mul.make_args(term))
               for term in sympy.Add.make_args(sympy.expand(expr)))


def trig_is_zero(expr: sympy.Expr) -> bool | None:
    """Whether Σ c·cos(α) + Σ c·sin(α) + c₀ is exactly 0, with algebraic c and α; None
    when ``expr`` is not of that form.

    Why this decides: writing cos α = (e^{iα} + e^{−iα})/2 and sin α = (e^{iα} − e^{−iα})/(2i),
    the sum is a combination of e^β over distinct algebraic β (iα, −iα for each distinct
    α > 0, and 0), whose coefficients are algebraic; by Lindemann–Weierstrass it is 0
    exactly when every coefficient is, i.e. when c₀ = 0 and, for each α, the cosine and the
    sine coefficients are both 0.  Angles are grouped by exact equality."""
    constant: list[sympy.Expr] = []
    groups: list[tuple[sympy.Expr, list[sympy.Expr], list[sympy.Expr]]] = []
    # products of cosines and sines become sums first: cos a·cos b = (cos(a − b) + cos(a + b))/2
    expr = sympy.expand(TR8(sympy.expand(expr))) if _has_trig_products(expr) else sympy.expand(expr)
    for term in sympy.Add.make_args(expr):
        atoms = term.atoms(sympy.cos, sympy.sin)
        if not atoms:
            if not term.is_algebraic:
                return None
            constant.append(term)
            continue
        if len(atoms) != 1:
            return None
        atom = atoms.pop()
        coeff = sympy.cancel(term / atom)
        if coeff.has(sympy.cos, sympy.sin) or not coeff.is_algebraic:
            return None
        alpha = atom.args[0]
        if alpha.free_symbols or not alpha.is_algebraic:
            return None
        if sign(alpha) < 0:        # cos(−α) = cos α, sin(−α) = −sin α
            alpha = -alpha
            coeff = -coeff if isinstance(atom, sympy.sin) else coeff
        if sign(alpha) == 0:
            if isinstance(atom, sympy.cos):
                constant.append(coeff)
            continue
        for angle, cosines, sines in groups:
            if angle == alpha or equal(angle, alpha):
                (cosines if isinstance(atom, sympy.cos) else sines).append(coeff)
                break
        else:
            groups.append((alpha, [coeff] if isinstance(atom, sympy.cos) else [],
                           [coeff] if isinstance(atom, sympy.sin) else []))
    parts = [constant] + [part for _, cosines, sines in groups for part in (cosines, sines)]
    return all(sign(sympy.Add(*part)) == 0 for part in parts if part)


# -- exact zero test for sums of exponentials ---------------------------------------------

def exp_sum_is_zero(expr: sympy.Expr) -> bool | None:
    """Whether a rational function of e^β (algebraic β, algebraic coefficients) is exactly 0;
    None when ``expr`` is not of that form.

    Why this decides: the numerator, expanded with e^a·e^b = e^(a+b), is Σ c_k·e^{β_k} over
    distinct algebraic β_k with algebraic c_k; by Lindemann–Weierstrass it is 0 exactly when
    every c_k is (exponents are grouped by exact equality).  The denominator is not asked: an
    expression whose denominator vanishes has no value to compare."""
    if expr.free_symbols or expr.has(sympy.cos, sympy.sin, sympy.log, sympy.tanh):
        return None
    numerator, _ = sympy.fraction(sympy.together(expr))
    groups: list[tuple[sympy.Expr, list[sympy.Expr]]] = []
    for term in sympy.Add.make_args(sympy.expand(numerator)):
        split = _exponent_and_coefficient(term)
        if split is None:
            return None
        beta, coeff = split
        for exponent, coeffs in groups:
            if exponent == beta or equal(exponent, beta):
                coeffs.append(coeff)
                break
        else:
            groups.append((beta, [coeff]))
    return all(sign(sympy.Add(*coeffs)) == 0 for _, coeffs in groups)


def _exponent_and_coefficient(term: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
    """A product c·e^{a}·e^{b}·(e^{d})^k as (β, c) with β = a + b + k·d; None unless β and c
    are algebraic."""
    beta: list[sympy.Expr] = []
    coeff: list[sympy.Expr] = []
    for factor in sympy.Mul.make_args(term):
        base, power = factor.as_base_exp()
        if base is sympy.E:
            beta.append(power)
        elif isinstance(base, sympy.exp):
            beta.append(base.args[0] * power)
        else:
            coeff.append(factor)
    exponent, c = sympy.Add(*beta), sympy.Mul(*coeff)
    if c.has(sympy.exp, sympy.E) or not (exponent.is_algebraic and c.is_algebraic):
        return None
    return exponent, c
