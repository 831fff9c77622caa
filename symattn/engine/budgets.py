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
bounded by ``EXACT_POWER_DIGITS``: in the engine for the scale and the
entries, here for the sink and the ALiBi slope.)
"""

from __future__ import annotations

import math
from math import gcd
from collections.abc import Sequence
from typing import Protocol

import sympy

from symattn.errors import ProblemError
from symattn.engine.powers import EXACT_POWER_DIGITS   # the engine's own budget on b^c
from symattn.engine.transform import LogitTransform
from symattn.limits import MAX_ROOT_INDEX
from symattn.problem.matrix import ExactMatrix
from symattn.problem.problem import Problem


class RowView(Protocol):
    @property
    def argmax(self) -> int | None: ...

    @property
    def allowed(self) -> tuple[int, ...]: ...


class EngineView(Protocol):
    """What the budget reads of the engine being made (engine.py imports this module, so the
    engine's class is not named here)."""

    problem: Problem
    symbolic: bool
    scores: ExactMatrix
    transform: LogitTransform | None
    n: int
    m: int

    @property
    def rows(self) -> Sequence[RowView]: ...

    def exponent(self, i: int, j: int) -> sympy.Expr: ...

    def sink_exponent(self, i: int) -> sympy.Expr: ...

__all__ = ["check_root_indices", "log_power_digits", "log_root_index"]


def _log_terms(expr: sympy.Expr) -> list[tuple[sympy.Rational, sympy.Expr]]:
    """(c, b) for every term c·log(b) of ``expr`` with c rational (SymPy turns e^expr into b^c·...)."""
    found = []
    for term in sympy.Add.make_args(sympy.expand_mul(expr)):
        coeff, rest = term.as_coeff_Mul()
        if coeff.is_Rational and isinstance(rest, sympy.log):
            found.append((coeff, rest.args[0]))
    return found


def _log_coefficients(expr: sympy.Expr) -> list[sympy.Rational]:
    return [c for c, _ in _log_terms(expr)]


def log_root_index(expr: sympy.Expr) -> int:
    """The largest root index q of the powers b^(p/q) that SymPy builds from e^expr (1: none)."""
    return max((int(c.q) for c in _log_coefficients(expr)), default=1)


def log_power_digits(expr: sympy.Expr) -> int:
    """About the digits of the rational powers b^c (b rational) SymPy builds from e^expr:
    |c|·(digits of b's numerator and denominator); 0 when there are none."""
    total = 0.0
    for c, b in _log_terms(expr):
        if b.is_Rational and b > 0:
            total += abs(float(c)) * (math.log10(int(b.p)) + math.log10(int(b.q)))
    return math.ceil(total)


def _check_exponent(expr: sympy.Expr, what: str, where: str) -> None:
    """One exponent: the root index and the size of the powers SymPy will build from e^expr."""
    index = log_root_index(expr)
    if index > MAX_ROOT_INDEX:
        raise _refuse(what, where, index)
    digits = log_power_digits(expr)
    if digits > EXACT_POWER_DIGITS:
        verb = "make" if what.endswith("s") else "makes"
        raise ProblemError(f"{what} {verb} {where} e^(c·log b) = b^c, an exact number of about {digits:,} "
                           f"digits (at most {EXACT_POWER_DIGITS:,}): make {what} smaller")


def _refuse(what: str, where: str, index: int) -> ProblemError:
    verb = "make" if what.endswith("s") else "makes"
    return ProblemError(
        f"{what} {verb} {where} a power with a root of index {index:,} (SymPy writes e^(c·log b) as "
        f"b^c), over the cap of {MAX_ROOT_INDEX:,} (MAX_ROOT_INDEX): give {what} with fewer decimal "
        "places (such as 1.1*log(7), not 1.00000000000000000001*log(7)) or without a logarithm")


def check_root_indices(engine: EngineView) -> None:
    """Refuse a problem whose exponentials would hold a root of index past MAX_ROOT_INDEX.

    A Σ c·log b scale with rational scores: the exponent of b in exp[i, j] is
    c·Δ with Δ = (n_j − n_r)/D over the scores' common denominator, so its root
    index is A / gcd(A, n_j − n_r) with A the denominator of c/D: integers
    only, every allowed entry, no SymPy value built.  Logarithms anywhere else
    (in the scores, in the scale with irrational scores, the ALiBi slope, the
    sink) come with irrational inputs,
    which keep the problem within MAX_SYMBOLIC_SIDE: each exponent is checked.  A logit
    transform that does not keep logarithms (the soft-cap: c·tanh(x/c), which SymPy leaves
    alone) builds no b^c; one that does has each exponent checked."""
    p, transform = engine.problem, engine.transform
    if engine.symbolic or (transform is not None and not transform.keeps_logs):
        return
    log_scale = p.scale.has(sympy.log) and engine.scores.is_rational
    if log_scale and transform is None:
        assert engine.scores.rational is not None       # is_rational: the fmpq_mat is there
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
    general = engine.scores.general
    logs_in_scores = not engine.scores.is_rational and general is not None and general.has(sympy.log)
    irrational_scores = not engine.scores.is_rational and p.scale.has(sympy.log)
    transformed_scale = log_scale and transform is not None   # t(scale·score): entry by entry
    if logs_in_scores or irrational_scores or transformed_scale or (slope is not None and slope.has(sympy.log)):
        what = "the logarithms in the inputs" if logs_in_scores else \
            "the scale" if irrational_scores or transformed_scale else "the alibi slope"
        for i, plan in enumerate(engine.rows):
            for j in plan.allowed:
                _check_exponent(engine.exponent(i, j), what, f"exp[{i}, {j}]")
    if p.sink is not None and p.sink.has(sympy.log):
        for i in range(engine.n):
            _check_exponent(engine.sink_exponent(i), "the sink", f"the sink's term of row {i}")
