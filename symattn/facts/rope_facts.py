"""rope-relative-position: after RoPE, q_m·k_n depends only on the offset m − n; rotations keep norms.

Proved in general with symbols for one pair (SymPy's trigonometric simplification),
checked exactly on a RoPE problem: every position shifted by the same constant gives
the same scores and weights (the engine on the shifted problem, compared exactly), and
every rotated row keeps the norm of its pair.  Claimed weights are read as "the
weights of the shifted problem"; one that its written rounding cannot reach is a
counterexample.
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.numbers.compare import compare, equal
from symattn.facts.claims import Claims
from symattn.facts.notation import dot as cdot, fn, minus, plus, rel, row as bracket, sup, sym, times
from symattn.facts.proof import Line, Proof
from symattn.notation.nodes import Factor, Int, Math
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

#: the constant every position is shifted by in the instance check
SHIFT = 7
MAX_CHECKED_ROWS = 8


def _rotated(x: sympy.Expr, y: sympy.Expr, phi: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    return x * sympy.cos(phi) - y * sympy.sin(phi), x * sympy.sin(phi) + y * sympy.cos(phi)


_q, _k, _x, _y, _a, _b, _m, _n = (sym(c) for c in "qkxyabmn")


def _turned(position: Math, vector: Math) -> Math:
    """R(mθ)q: a pair turned by its position's angle."""
    return times(fn("R", times(position, sym("θ"))), vector)


def _offset() -> Math:
    """(m − n)θ."""
    return times(Factor(minus(_m, _n)), sym("θ"))


def _general() -> tuple[bool, tuple[Line, ...]]:
    x, y, a, b, theta = sympy.symbols("x y a b theta", real=True)
    m, n = sympy.symbols("m n", integer=True)
    q, k = _rotated(x, y, m * theta), _rotated(a, b, n * theta)
    dot = q[0] * k[0] + q[1] * k[1]
    offset = (x * a + y * b) * sympy.cos((m - n) * theta) + (x * b - y * a) * sympy.sin((m - n) * theta)
    relative = sympy.simplify(sympy.expand_trig(sympy.expand(dot - offset))) == 0
    norm = sympy.simplify(q[0] ** 2 + q[1] ** 2 - (x ** 2 + y ** 2)) == 0
    return relative and norm, (
        Line("one pair ", rel(_q, "=", bracket([_x, _y])), " at position m and ", rel(_k, "=", bracket([_a, _b])),
             " at position n, each turned by its angle: ",
             rel(cdot(_turned(_m, _q), _turned(_n, _k)), "=",
                 plus(cdot(Factor(plus(times(_x, _a), times(_y, _b))), fn("cos", _offset())),
                      cdot(Factor(minus(times(_x, _b), times(_y, _a))), fn("sin", _offset())))),
             ", a function of ", minus(_m, _n), " only, so every pair, and their sum ",
             cdot(sym("q", "m"), sym("k", "n")), ", depends only on the "
             f"offset (SymPy: {'verified' if relative else 'FAILED'})"),
        Line(rel(sup(fn("abs", _turned(_m, _q)), Int(2)), "=", plus(sup(_x, Int(2)), sup(_y, Int(2)))),
             f": a rotation keeps the norm (SymPy: {'verified' if norm else 'FAILED'})"),
    )


def _shifted(p: Problem, by: int) -> Problem:
    assert p.rope is not None            # the fact moves the positions of a RoPE problem
    rope = {**p.rope.as_value(), "positions": [x + by for x in p.rope.positions],
            "key_positions": [x + by for x in p.rope.key_positions]}
    keys: dict[str, Any] = {k: mat.to_sympy() for k, mat in p.inputs.items()}   # Problem checks them
    keys.update(tokens=list(p.tokens), key_tokens=list(p.key_tokens), scale=p.scale,
                mask=p.mask_value, **p.variant_keys, rope=rope)
    return Problem(**keys)


def rope_relative_position(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """After RoPE the scores depend only on position differences; rotations keep norms."""
    ok, general = _general()
    checks: list[Line] = []
    counter: dict[str, Any] | None = None
    p = trace.problem if trace is not None else None
    if p is not None and p.rope is None:
        checks.append(Line("this problem has no RoPE: nothing to check on it"))
    elif trace is not None and p is not None and p.rope is not None:
        moved = Trace(_shifted(p, SHIFT))
        for i in range(min(p.n, MAX_CHECKED_ROWS)):
            row_ok = all(equal(trace.scores[i, j], moved.scores[i, j]) for j in range(p.m))
            ok &= row_ok
            checks.append(Line(f"row {p.tokens[i]!r}: every position + {SHIFT} leaves its scores "
                               f"unchanged ({'exactly' if row_ok else 'NOT equal'})"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[i]}
        for name, plain in (("Q_rot", "Q"), ("K_rot", "K")):
            step, source = trace.step(name), trace.step(plain)
            kept = all(equal(sympy.Add(*[step[r, c] ** 2 for c in pair]),
                             sympy.Add(*[source[r, c] ** 2 for c in pair]))
                       for r in range(min(step.shape[0], MAX_CHECKED_ROWS)) for pair in p.rope.pairs())
            ok &= kept
            checks.append(Line(sym(plain, "rot"), f": every rotated pair keeps its norm "
                               f"({'exactly' if kept else 'NOT equal'})"))
            if not kept and counter is None:
                counter = {"step": name}
        if claims is not None and claims.weights is not None:
            for i, row in enumerate(claims.entries("weights")):
                bad = [j for j, e in enumerate(row)
                       if not _within(e.value, moved.weights[i, j], e.half)]
                label = repr(p.tokens[i])
                if not bad:
                    checks.append(Line(f"claimed row {label}: the weights with every position + {SHIFT} "
                                       "are as claimed (within the rounding written)"))
                    continue
                ok = False
                j = bad[0]
                checks.append(Line(f"claimed row {label}: {row[j].text} for key {p.key_tokens[j]!r}, but "
                                   f"with every position + {SHIFT} the weight is "
                                   f"{_decimal(moved.weights[i, j])}"))
                if counter is None:
                    counter = {"row": p.tokens[i], "key": p.key_tokens[j], "claimed": row[j].text,
                               "shift": SHIFT, "weight": _decimal(moved.weights[i, j])}
    return Proof("rope-relative-position", ok,
                 Line("with RoPE, ", cdot(sym("q", "m"), sym("k", "n")), " depends only on the offset ",
                      minus(_m, _n), " (shifting every position leaves the scores and weights unchanged), "
                      "and rotations keep norms"),
                 general, tuple(checks), counter)


def _within(claimed: sympy.Expr, exact: sympy.Expr, half: sympy.Expr) -> bool:
    if half == 0:
        return equal(claimed, exact)
    return compare(abs(claimed - exact), half) <= 0


def _decimal(value: sympy.Expr) -> str:
    from symattn.numbers.certify import Rounding, certify

    return str(certify(value, Rounding(digits=6)))
