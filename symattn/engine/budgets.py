"""Budgets on the exact values the engine builds (not only on the inputs), checked when it is made.

Why: the parser caps what is typed, but SymPy rewrites what the engine
builds.  ``e^(c·log b)`` becomes ``b^c`` on sight, so a scale such as
``log(7)*1.00000000000000000001`` (typed: 20 decimal places, within every
input cap) turns every exponential into ``7·7^(1/10^20)``, a root of index
10^20, that the certifier cannot enclose (flint's root takes a machine
integer) and that no exact test can decide.  So the root index of every
rational power the engine will build is bounded here, from the logarithms'
coefficients times the score differences, before any value is built; past
:data:`symattn.limits.MAX_ROOT_INDEX` the problem is refused with one line
that names the input and the fix.  (The powers' sizes, |c|·log b, are
bounded by ``EXACT_POWER_DIGITS`` in the engine.)
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING

import sympy

from symattn.errors import ProblemError
from symattn.limits import MAX_ROOT_INDEX

if TYPE_CHECKING:  # pragma: no cover
    from symattn.engine.engine import Engine

__all__ = ["check_root_indices", "log_root_index"]


def _log_coefficients(expr: sympy.Expr) -> list[sympy.Rational]:
    """The rational c of every term c·log(b) of ``expr`` (what SymPy turns into b^c in e^expr)."""
    found = []
    for term in sympy.Add.make_args(sympy.expand_mul(expr)):
        coeff, rest = term.as_coeff_Mul()
        if coeff.is_Rational and isinstance(rest, sympy.log):
            found.append(coeff)
    return found


def log_root_index(expr: sympy.Expr) -> int:
    """The largest root index q of the powers b^(p/q) that SymPy builds from e^expr (1: none)."""
    return max((int(c.q) for c in _log_coefficients(expr)), default=1)


def _refuse(what: str, where: str, index: int) -> ProblemError:
    verb = "make" if what.endswith("s") else "makes"
    return ProblemError(
        f"{what} {verb} {where} a power with a root of index {index:,} (SymPy writes e^(c·log b) as "
        f"b^c), over the cap of {MAX_ROOT_INDEX:,} (MAX_ROOT_INDEX): give {what} with fewer decimal "
        "places (such as 1.1*log(7), not 1.00000000000000000001*log(7)) or without a logarithm")


def check_root_indices(engine: "Engine") -> None:
    """Refuse a problem whose exponentials would hold a root of index past MAX_ROOT_INDEX.

    A Σ c·log b scale with rational scores: the exponent of b in exp[i, j] is
    c·Δ with Δ = (n_j − n_r)/D over the scores' common denominator, so its root
    index is A / gcd(A, n_j − n_r) with A the denominator of c/D: integers
    only, every allowed entry, no SymPy value built.  Logarithms anywhere else
    (in the scores, the ALiBi slope, the sink) come with irrational inputs,
    which keep the problem within MAX_SYMBOLIC_SIDE: each exponent is checked.  With a
    soft-cap the exponents are c·tanh(x/c), which SymPy leaves alone."""
    p = engine.problem
    if engine.symbolic or p.softcap is not None:   # c·tanh(x/c) in the exponent: no b^c is built
        return
    if p.scale.has(sympy.log) and engine.scores.is_rational:
        numerators, den = engine.scores.rational.numer_denom()
        flat, m = [int(x) for x in numerators.entries()], engine.m
        for c in _log_coefficients(p.scale):
            A = int((c / sympy.Integer(int(den))).q)
            if A <= MAX_ROOT_INDEX:
                continue                                    # no entry can pass the bound A
            for i, plan in enumerate(engine.rows):
                if plan.argmax is None:
                    continue
                top = flat[i * m + plan.argmax]
                for j in plan.allowed:
                    index = A // gcd(A, flat[i * m + j] - top)
                    if index > MAX_ROOT_INDEX:
                        raise _refuse("the scale", f"exp[{i}, {j}]", index)
    slope = None if p.alibi is None else p.alibi.slope
    general = not engine.scores.is_rational and engine.scores.general.has(sympy.log)
    if general or (slope is not None and slope.has(sympy.log)):
        what = "the logarithms in the inputs" if general else "the alibi slope"
        for i, plan in enumerate(engine.rows):
            for j in plan.allowed:
                index = log_root_index(engine.exponent(i, j))
                if index > MAX_ROOT_INDEX:
                    raise _refuse(what, f"exp[{i}, {j}]", index)
    if p.sink is not None and p.sink.has(sympy.log):
        for i in range(engine.n):
            index = log_root_index(engine.sink_exponent(i))
            if index > MAX_ROOT_INDEX:
                raise _refuse("the sink", f"the sink's term of row {i}", index)
