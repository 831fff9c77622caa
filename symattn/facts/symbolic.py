"""Symbols for general proofs: softmax of symbolic scores, and zero tests.

Why this exists: a *general* fact (for all scores, not one problem) is an
identity in symbols.  This is not a second implementation of attention: it
is the textbook softmax of a vector of symbols, used only to state and
verify identities.  Concrete problems always go through the engine
(:func:`symattn.attend`).  When the engine accepts symbols (it does
now), the facts also run their exact checks on a symbolic Trace
(:func:`symbolic_trace`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import sympy

from symattn.facts.zerotest import ball_nonzero, formally_zero
from symattn.problem.matrix import symbol_matrix
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

__all__ = ["has_symbols", "indexed_softmax", "is_zero", "rename_dummies", "simplifies_to_zero", "softmax",
           "symbol_matrix", "symbol_vector", "symbolic_trace"]


def symbol_vector(name: str, n: int) -> list[sympy.Symbol]:
    """n real symbols ``name0 .. name{n-1}``."""
    return list(sympy.symbols(f"{name}0:{n}", real=True))


@lru_cache(maxsize=None)
def symbolic_trace(n: int = 3, d: int = 2, mask: str | None = None) -> Trace:
    """Attention through the engine on all-symbol inputs: Q, K (n × d), V (n × 1).

    Running a fact's exact check on this Trace is a general proof for that
    size: nothing about the numbers is assumed."""
    return Trace(Problem(Q=symbol_matrix("q", n, d), K=symbol_matrix("k", n, d),
                         V=symbol_matrix("v", n, 1), mask=mask))


def has_symbols(trace: Trace) -> bool:
    """True when the problem has symbolic inputs (so orders and decimals are open)."""
    p = trace.problem
    return bool(p.scale.free_symbols) or any(m.to_sympy().free_symbols for m in p.inputs.values()
                                             if not m.is_rational)


def softmax(vector: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """e^{s_j} / Σ_k e^{s_k}, unsimplified (the definition itself)."""
    total = sympy.Add(*[sympy.exp(s) for s in vector])
    return [sympy.exp(s) / total for s in vector]


def is_zero(expr: sympy.Expr) -> bool:
    """True when expr ≡ 0 is proved as an identity in its symbols: formally (a rational function
    of a basis of exponentials, :func:`~symattn.facts.zerotest.formally_zero`), else by SymPy's
    simplify; a certified ball at a rational point that excludes 0 settles "not 0" first."""
    if formally_zero(expr):
        return True
    if ball_nonzero(expr):
        return False
    return simplifies_to_zero(expr)


def simplifies_to_zero(expr: sympy.Expr) -> bool:
    """The slow test, kept as the last resort: SymPy's powsimp, expand, together, cancel, simplify."""
    expr = sympy.powsimp(sympy.expand(expr))
    if expr == 0:
        return True
    return sympy.simplify(sympy.cancel(sympy.together(expr))) == 0


def indexed_softmax() -> tuple[sympy.Symbol, sympy.IndexedBase, sympy.Expr,
                             Callable[[sympy.Expr], sympy.Expr]]:
    """Softmax over n symbolic scores s[0..n-1] for a symbolic n ≥ 1.

    Returns (n, s, D, p) with D = Σ_k e^{s[k]} and p(i) = e^{s[i]} / D.
    """
    n = sympy.Symbol("n", integer=True, positive=True)
    s = sympy.IndexedBase("s", real=True)
    k = sympy.Symbol("k", integer=True)
    total = sympy.Sum(sympy.exp(s[k]), (k, 0, n - 1))
    return n, s, total, lambda i: sympy.exp(s[i]) / total


def rename_dummies(expr: sympy.Expr, to: sympy.Symbol) -> sympy.Expr:
    """Give every single-index Sum the same dummy, so equal sums compare equal."""
    def rename(term: sympy.Sum) -> sympy.Sum:
        (var, low, high), = term.limits
        return sympy.Sum(term.function.xreplace({var: to}), (to, low, high))
    return expr.replace(lambda e: isinstance(e, sympy.Sum) and len(e.limits) == 1, rename)
