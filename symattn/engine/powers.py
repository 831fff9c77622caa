"""Exponentials that are exact powers: e^(Σ q·log b) = Π b^q (the engine's log scales).

Why a module of its own: SymPy turns e^(q·log b) into b^q on sight, so a scale such as
log(2) makes the softmax algebraic (rational weights 2^k / Σ 2^k), and a b^q too long to
build must be refused before SymPy tries.  These are the pieces: the Σ q·log b form of
an exponent, a bound on the digits of Π b^q, the refusal, and the power itself."""

from __future__ import annotations

import math

import flint
import sympy

from symattn.errors import ProblemError
from symattn.problem.matrix import fmpq_to_sympy, sympy_to_fmpq

#: the most digits (numerator or denominator) of an exact b^q = e^(q·log b)
#: that a problem may make: SymPy evaluates e^(q·log b) to b^q on sight (an
#: unevaluated one is re-evaluated by any product), and every view prints it
EXACT_POWER_DIGITS = 1_000

LogTerms = tuple[tuple[sympy.Rational, sympy.Rational], ...]


def log_terms(expr: sympy.Expr) -> LogTerms | None:
    """``expr`` as Σ q·log(b) with q and b > 0 rational ((q, b) pairs), else None.

    0 is the empty sum; a rational constant term makes it None (e^r with
    r ≠ 0 rational is transcendental)."""
    terms = []
    for term in sympy.Add.make_args(sympy.expand_mul(expr)):
        if term == 0:
            continue
        q, rest = term.as_coeff_Mul()
        if not (q.is_Rational and isinstance(rest, sympy.log)):
            return None
        b = rest.args[0]
        if not (b.is_Rational and b > 0):
            return None
        terms.append((q, b))
    return tuple(terms)


def power_digits(terms: LogTerms) -> int:
    """An upper bound on the decimal digits of Π b^q (numerator plus denominator)."""
    return sum(math.ceil(float(abs(q)) * (math.log10(int(b.p)) + math.log10(int(b.q))))
               for q, b in terms)


def _too_big(terms: LogTerms, where: str) -> ProblemError:
    shown = " + ".join(f"{sympy.sstr(q)}·log({b})" for q, b in terms[:3])
    return ProblemError(
        f"{where} is e^({shown}), an exact number of about {power_digits(terms):,} digits "
        f"(at most {EXACT_POWER_DIGITS:,}): make the scores or the scale smaller "
        "(attention sees only score differences)")


def _power(terms: LogTerms) -> flint.fmpq | sympy.Expr:
    """Π b^q exactly: an fmpq when it is rational, else a SymPy algebraic number."""
    if all(q.is_Integer for q, _ in terms):
        value = flint.fmpq(1)
        for q, b in terms:
            value *= flint.fmpq(int(b.p), int(b.q)) ** int(q)
        return value
    value = sympy.Mul(*[sympy.Pow(b, q) for q, b in terms])
    return sympy_to_fmpq(value) if value.is_Rational else value


def _as_sympy(value: flint.fmpq | sympy.Expr) -> sympy.Expr:
    return fmpq_to_sympy(value) if isinstance(value, flint.fmpq) else value
