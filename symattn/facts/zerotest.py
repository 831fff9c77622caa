"""Deciding "is this exactly 0?" fast: certified balls and exact structure before SymPy's simplify.

Why this exists: the facts ask thousands of zero questions (a softmax Jacobian is m² of
them per row), and ``simplify(cancel(together(·)))`` on a sum of exponentials costs a tenth
of a second or more each.  Most questions are settled long before that:

* **formal zero** (:func:`formally_zero`): every ``e^β`` is written over a basis of
  exponentials, ``e^β = Π_m (e^{m/L_m})^{c_m·L_m}`` for ``β = Σ_m c_m·m`` with rational
  ``c_m`` (``m`` a symbol, a product of symbols, a surd, 1, ...; ``L_m`` the common
  denominator of its coefficients), ``tanh x`` as ``(e^{2x} − 1)/(e^{2x} + 1)``, and the
  result is read as a rational function over ℚ in those exponentials and the remaining atoms
  (symbols, surds, π, ...), each taken as an indeterminate.  Every step is an identity and
  a rational function that is 0 stays 0 under any substitution, so formal zero *proves* 0.
  The converse need not hold (``cos²1 + sin²1 − 1`` is not formally 0): that is left to the
  slower tests.
* **a certified ball** (:func:`ball_nonzero`): an arb enclosure that excludes 0 proves a
  number nonzero; for a formula in symbols, a ball at a rational point that excludes 0
  proves that the formula is not identically 0.

A question neither settles goes on to the exact tests that were there before (Lindemann–
Weierstrass on exponentials, minimal polynomials, and SymPy's simplify as the last resort),
so a verdict here is always one of theirs, reached sooner.
"""

from __future__ import annotations

import math
from functools import lru_cache

import sympy
from sympy.polys.fields import FracField
from sympy.polys.rings import ring as polynomial_ring

from symattn.errors import SymattnError
from symattn.exact.values import algebraic_degree, minimal_polynomial_affordable
from symattn.limits import MAX_ALGEBRAIC_DEGREE
from symattn.numbers.arb import SYMPY_FAILURES, to_arb

__all__ = ["algebraically_zero", "ball_nonzero", "formally_zero", "rational_point"]

#: bits of the first ball; a difference that is not 0 is almost always far from 0
BALL_BITS = 96


def _exp_atoms(expr: sympy.Expr) -> set[sympy.Expr]:
    return {a for a in expr.atoms(sympy.exp, sympy.Pow) if isinstance(a, sympy.exp)
            or isinstance(a, sympy.Pow) and a.base is sympy.E}


@lru_cache(maxsize=1 << 14)
def _split_exponent(beta: sympy.Expr) -> tuple[tuple[sympy.Expr, sympy.Rational], ...] | None:
    """β = Σ c_m·m as ((m, c_m), ...) with rational c_m; None when a coefficient is not rational."""
    parts: dict[sympy.Expr, sympy.Rational] = {}
    for term in sympy.Add.make_args(sympy.expand(beta)):
        c, m = term.as_coeff_Mul()
        if not isinstance(c, sympy.Rational) or m.has(sympy.exp, sympy.E):
            return None
        parts[m] = parts.get(m, sympy.S.Zero) + c
    return tuple((m, c) for m, c in parts.items() if c != 0)


def _exponent_of(atom: sympy.Expr) -> sympy.Expr:
    return atom.args[0] if isinstance(atom, sympy.exp) else atom.exp


def _tanh_as_exp(expr: sympy.Expr) -> sympy.Expr:
    """tanh x as (e^{2x} − 1)/(e^{2x} + 1), except inside an exponent: there tanh x stays a
    monomial of the basis (e^{5·tanh(2/5)} is a power of e^{tanh(2/5)}), so a soft-capped
    softmax is still a rational function of exponentials."""
    if isinstance(expr, sympy.exp) or isinstance(expr, sympy.Pow) and expr.base is sympy.E or not expr.args:
        return expr
    if isinstance(expr, sympy.tanh):
        x = expr.args[0]
        return (sympy.exp(2 * x) - 1) / (sympy.exp(2 * x) + 1)
    if not expr.has(sympy.tanh):
        return expr
    return expr.func(*[_tanh_as_exp(a) for a in expr.args])


def _over_exponential_basis(expr: sympy.Expr, keep_tanh: bool = False) -> sympy.Expr | None:
    """``expr`` with every e^β a product of powers of basis symbols (one per monomial m of the
    exponents, standing for e^{m/L_m}); None when an exponent is not of that form.  tanh x is
    written as exponentials unless ``keep_tanh`` (then it stays an atom)."""
    if expr.has(sympy.tanh) and not keep_tanh:
        expr = _tanh_as_exp(expr)
    atoms = _exp_atoms(expr)
    if sympy.E in expr.atoms(sympy.NumberSymbol):     # e itself is e^1 (SymPy writes exp(1) as E)
        atoms.add(sympy.E)
    if not atoms:
        return expr
    splits = {}
    for atom in atoms:
        split = ((sympy.S.One, sympy.S.One),) if atom is sympy.E else _split_exponent(_exponent_of(atom))
        if split is None:
            return None
        splits[atom] = split
    common: dict[sympy.Expr, int] = {}
    for split in splits.values():
        for m, c in split:
            common[m] = math.lcm(common.get(m, 1), int(c.q))
    basis = {m: sympy.Dummy("e") for m in common}
    return expr.xreplace({atom: sympy.Mul(*[basis[m] ** int(c * common[m]) for m, c in split])
                          for atom, split in splits.items()})


#: terms of a numerator or denominator past which the formal test gives up (left to the others)
MAX_TERMS = 4_000


class _TooBig(Exception):
    pass


def _atoms(expr: sympy.Expr, found: dict[sympy.Expr, None]) -> None:
    """The indeterminates: every node that is not a rational, a sum, a product or an integer power."""
    if isinstance(expr, sympy.Rational):
        return
    if isinstance(expr, (sympy.Add, sympy.Mul)) or isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        for arg in expr.args:
            _atoms(arg, found)
        return
    found[expr] = None


def _element(expr: sympy.Expr, field, gens: dict, memo: dict):
    """``expr`` as an element of the rational function field, built bottom-up (never expanded as
    an expression, so a sum of reciprocals does not multiply out)."""
    hit = memo.get(expr)
    if hit is not None:
        return hit
    if isinstance(expr, sympy.Rational):
        out = field(sympy.QQ(int(expr.p), int(expr.q)))
    elif expr in gens:
        out = gens[expr]
    elif isinstance(expr, sympy.Add):
        out = sum((_element(a, field, gens, memo) for a in expr.args), field(0))
    elif isinstance(expr, sympy.Mul):
        out = field(1)
        for a in expr.args:
            out = out * _element(a, field, gens, memo)
    else:   # an integer power
        out = _element(expr.base, field, gens, memo) ** int(expr.exp)
    if len(out.numer) > MAX_TERMS or len(out.denom) > MAX_TERMS:
        raise _TooBig
    memo[expr] = out
    return out


def formally_zero(expr: sympy.Expr) -> bool:
    """True when ``expr`` is 0 as a rational function over ℚ in a basis of exponentials and its
    other atoms (a proof that it is 0); False means only "not shown this way" (also when the
    rational function grows past MAX_TERMS terms)."""
    if expr == 0:
        return True
    rewritten = _over_exponential_basis(expr)
    if rewritten is None or rewritten.has(sympy.Float):
        return False
    found: dict[sympy.Expr, None] = {}
    _atoms(rewritten, found)
    if not found:
        return rewritten == 0
    field, *symbols = _field(tuple(found))
    try:
        return _element(rewritten, field, dict(zip(found, symbols)), {}) == 0
    except (_TooBig, ZeroDivisionError):
        return False


def _field(atoms: tuple[sympy.Expr, ...]):
    """The field ℚ(atoms) and its generators."""
    field_ = FracField(tuple(sympy.Dummy(f"g{k}") for k in range(len(atoms))), sympy.QQ, sympy.lex)
    return (field_, *field_.gens)


def _is_root(atom: sympy.Expr) -> bool:
    """A real root of an algebraic number: 2^(1/3), √(5 + 2√6) (an element of a number field)."""
    return isinstance(atom, sympy.Pow) and atom.exp.is_Rational and not atom.exp.is_Integer \
        and atom.base.is_algebraic is True and atom.base.is_positive is True


@lru_cache(maxsize=64)
def _number_field(roots: tuple[sympy.Expr, ...]):
    """ℚ(roots) as SymPy's algebraic field (a primitive element), or None past the degree cap
    (its minimal polynomial would not stay cheap)."""
    if not minimal_polynomial_affordable(sympy.Add(*roots)) or algebraic_degree(*roots) > MAX_ALGEBRAIC_DEGREE:
        return None
    try:
        return sympy.QQ.algebraic_field(*roots)
    except SYMPY_FAILURES:
        return None


def algebraically_zero(expr: sympy.Expr) -> bool:
    """True when ``expr`` is 0 as a rational function over the number field of its roots (√2, ∛3,
    ...: ℚ(roots), exact) in a basis of exponentials and its other atoms (tanh, cos, sin, π,
    symbols, each an indeterminate): a proof that it is 0.  False means only "not shown this way".

    Why: :func:`formally_zero` takes √2 and √3 as indeterminates too, so it misses
    √3·√3 − 3 inside a sum of exponentials, and rewriting tanh of algebraic numbers as
    exponentials leaves Lindemann–Weierstrass a zero test that took minutes (a soft-capped
    3-token backward problem with surds).  An identity such as dQ = dS'·K holds with each
    tanh whole, so the indeterminates need not know what tanh is; only the roots must
    multiply as numbers."""
    if expr == 0:
        return True
    rewritten = _over_exponential_basis(expr, keep_tanh=True)
    if rewritten is None or rewritten.has(sympy.Float):
        return False
    found: dict[sympy.Expr, None] = {}
    _atoms(rewritten, found)
    roots = tuple(a for a in found if _is_root(a))
    others = tuple(a for a in found if a not in roots)
    domain = _number_field(tuple(sorted(roots, key=sympy.default_sort_key))) if roots else sympy.QQ
    if domain is None:
        return False
    ring, *symbols = polynomial_ring([sympy.Dummy(f"g{k}") for k in range(len(others))] or [sympy.Dummy("g")],
                                     domain, sympy.lex)
    gens = {a: (g, ring.one) for a, g in zip(others, symbols)}
    gens.update({r: (ring(domain.from_sympy(r)), ring.one) for r in roots})
    try:
        return not _fraction(rewritten, ring, gens, {})[0]
    except (_TooBig, ZeroDivisionError):
        return False


def _fraction(expr: sympy.Expr, ring, gens: dict, memo: dict) -> tuple:
    """``expr`` as (numerator, denominator) in a polynomial ring, never cancelled (a gcd over a
    number field cost ten times the rest); fractions with one denominator add their numerators.
    The value is 0 exactly when the numerator is."""
    hit = memo.get(expr)
    if hit is not None:
        return hit
    if isinstance(expr, sympy.Rational):
        out = (ring(sympy.QQ(int(expr.p), int(expr.q))), ring.one)
    elif expr in gens:
        out = gens[expr]
    elif isinstance(expr, sympy.Add):
        num, den = ring.zero, ring.one
        for a in expr.args:
            n, d = _fraction(a, ring, gens, memo)
            num, den = (num + n, den) if d == den else (num * d + n * den, den * d)
        out = (num, den)
    elif isinstance(expr, sympy.Mul):
        num, den = ring.one, ring.one
        for a in expr.args:
            n, d = _fraction(a, ring, gens, memo)
            num, den = num * n, den * d
        out = (num, den)
    else:   # an integer power
        n, d = _fraction(expr.base, ring, gens, memo)
        k = int(expr.exp)
        if k < 0:
            if not n:
                raise ZeroDivisionError
            n, d, k = d, n, -k
        out = (n ** k, d ** k)
    if len(out[0]) > MAX_TERMS or len(out[1]) > MAX_TERMS:
        raise _TooBig
    memo[expr] = out
    return out


def rational_point(symbols: set[sympy.Symbol]) -> dict[sympy.Symbol, sympy.Rational] | None:
    """Distinct small rationals for the symbols that satisfy their assumptions (integer, positive,
    negative, ...); None when a symbol's assumptions are not met by such a value."""
    point = {}
    for k, s in enumerate(sorted(symbols, key=str)):
        if not isinstance(s, sympy.Symbol):
            return None
        value = sympy.Integer(k + 2) if s.is_integer else sympy.Rational(2 * k + 3, 7 + k)
        if s.is_negative or s.is_nonpositive:
            value = -value
        facts = {key for key, on in s.assumptions0.items() if on}
        if any(getattr(value, f"is_{key}") is not True for key in facts if key != "commutative"):
            return None
        point[s] = value
    return point


def ball_nonzero(expr: sympy.Expr, bits: int = BALL_BITS) -> bool:
    """True when a certified ball proves ``expr`` is not 0 (for a formula in symbols: not
    identically 0, by its value at a rational point); False means only "not shown this way"."""
    if expr.free_symbols:
        point = rational_point(expr.free_symbols)
        if point is None:
            return False
        expr = expr.xreplace(point)
    try:
        ball = to_arb(expr, bits)
    except (SymattnError, ZeroDivisionError, ValueError, TypeError, RecursionError):
        return False
    return ball.is_finite() and not ball.contains(0)
