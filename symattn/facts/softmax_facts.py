"""Facts about the softmax itself: rows sum to 1, weights in (0, 1), shift
invariance, the Jacobian and the temperature limits.

Each function returns a :class:`~symattn.facts.proof.Proof` with a general
argument verified by SymPy on symbols, and, when given a Trace (and/or a
person's claimed weights), exact checks on those values.  Concrete values
always come from the engine's Trace; the symbols are only for identities.
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.numbers.certify import certify
from symattn.numbers.compare import exp_sum_is_zero, compare, equal, sign
from symattn.facts.claims import Claims, decimal_text, written_sum
from symattn.facts.notation import T, dot, e, entry, fn, frac, minus, num, one, plus, rel, sigma, sym, times, value, zero
from symattn.facts.notation import p as prob, s as score
from symattn.facts.proof import Line, Proof
from symattn.facts.zerotest import ball_nonzero, formally_zero
from symattn.facts.symbolic import (has_symbols, indexed_softmax, is_zero, rename_dummies, softmax,
                                    symbol_vector, symbolic_trace)
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

SMALL_N = (2, 3, 4)


def dec(expr: sympy.Expr, digits: int = 3) -> str:
    """A certified decimal of an exact value (the only way numbers are shown);
    a formula in symbols is shown as itself."""
    if expr.free_symbols:
        return sympy.sstr(expr)
    return str(certify(expr, digits))


def allowed(trace: Trace, i: int) -> tuple[int, ...]:
    """The keys row i may attend (all of them without a mask)."""
    return trace.allowed(i)


def same(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Exact equality: structural; for numbers, a certified ball for "not equal", then
    Lindemann–Weierstrass on the exponentials, then the formal test (tanh, cos, sin as atoms),
    all before SymPy's simplify; then the exact decision of compare."""
    if a == b:
        return True
    difference = a - b
    if difference.free_symbols:
        return is_zero(difference)
    if ball_nonzero(difference):       # proved nonzero by a certified ball
        return False
    decided = exp_sum_is_zero(difference)   # complete for sums of e^β (algebraic β)
    if decided is not None:
        return decided
    if formally_zero(difference):      # tanh, cos, sin: proved 0 by exact structure
        return True
    return is_zero(difference) or equal(a, b)


def _tex_value(text: str, value: sympy.Expr) -> str:
    """A claimed figure for math mode: a decimal as written, anything else as SymPy writes it."""
    plain = text and all(ch.isdigit() or ch in ".-" for ch in text)
    return text if plain else sympy.latex(value)


def _row_label(trace: Trace | None, i: int) -> str:
    return repr(trace.problem.tokens[i]) if trace is not None else str(i)


# ------------------------------------------------------------ rows-sum-to-one

def rows_sum_to_one(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """Σ_j weights[i, j] = 1 for every row (masked weights are 0 and add nothing)."""
    n, _, _, p = indexed_softmax()
    j = sympy.Symbol("j", integer=True)
    summed = sympy.factor_terms(sympy.Sum(p(j), (j, 0, n - 1)))
    ok = sympy.simplify(rename_dummies(summed, j) - 1) == 0
    denominator = sigma(e(score("k")), "k")
    general: tuple[Line, ...] = (Line(
        rel(sigma(frac(e(score("j")), denominator), "j"), "=", frac(sigma(e(score("j")), "j"), denominator), "=", one),
        " for any ", rel(sym("n"), "≥", one), " and any real s (SymPy: the difference simplifies to "
        f"{'0' if ok else 'something not 0'})"),)
    on_symbols = symbolic_trace()
    engine_ok = all(_row_sums_to_one(on_symbols, i) for i in range(on_symbols.problem.n))
    ok &= engine_ok
    general += (Line("the engine on all-symbol Q, K (3×2) and V (3×1): every row of weights sums to 1 "
                     "identically, ", rel(sigma(entry("A", "i", "j")), "≡", one),
                     f" ({'verified' if engine_ok else 'FAILED'})"),)
    checks: list[Line] = []
    counter: dict[str, Any] | None = None
    if trace is not None:
        symbolic = has_symbols(trace)
        for i in range(trace.problem.n):
            exact = _row_sums_to_one(trace, i)
            ok &= exact
            total_form = (sigma(entry("A", i, "j")) if symbolic else
                          plus(*[value(trace.weights[i, c]) for c in range(trace.problem.m)]))
            checks.append(Line(f"row {_row_label(trace, i)}: ", rel(total_form, "→", sym("Σ"), "=", one),
                               " exactly"))
            if not exact:  # cannot happen for true attention; kept honest
                counter = {"row": trace.problem.tokens[i]}
    if claims is not None and claims.weights is not None:
        for i, row in enumerate(claims.entries("weights")):
            label = _row_label(trace, i)
            total_i, slack, shown = written_sum(row)
            terms = " + ".join(e.text for e in row)
            # claimed numbers: the bounded exact decision, never SymPy's simplify (unbounded)
            if total_i == 1 or (not total_i.free_symbols and equal(total_i, sympy.S.One)):
                checks.append(Line(f"claimed row {label}: {terms} = {shown}: Σ = 1 exactly"))
            elif slack != 0 and compare(abs(total_i - 1), slack) <= 0:
                checks.append(Line(f"claimed row {label}: {terms} = {shown}, within ±{decimal_text(slack)} "
                                   f"of 1 (the rounding of the {len(row)} entries as written): consistent "
                                   "with Σ = 1"))
            else:
                ok = False
                within = f", more than ±{decimal_text(slack)} (the rounding as written) from 1" \
                    if slack != 0 else ""
                checks.append(Line(f"claimed row {label}: {terms} = {shown} ≠ 1{within}"))
                if counter is None:
                    counter = {"row": trace.problem.tokens[i] if trace else i,
                               "claimed": [e.text for e in row], "sum": shown,
                               "sum_decimal": dec(total_i, 6)}
                    if slack != 0:
                        counter["within"] = decimal_text(slack)
    return Proof("rows-sum-to-one", ok, Line("each row of weights sums to 1: ",
                                             rel(sigma(entry("A", "i", "j")), "=", one), " for every row i"),
                 general, tuple(checks), counter)


def _row_sums_to_one(trace: Trace, i: int) -> bool:
    row_sum = sympy.Add(*[trace.weights[i, c] for c in range(trace.problem.m)])
    return same(row_sum, sympy.S.One)


# ---------------------------------------------------- weights-in-open-interval

def weights_in_open_interval(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """0 < weight < 1 when a row has ≥ 2 allowed keys; masked weights are exactly 0."""
    general: tuple[Line, ...] = (Line(
        rel(e(score("j")), ">", zero), " for real ", score("j"), ", so ",
        rel(zero, "<", e(score("j")), "<", plus(e(score("j")), sigma(e(score("k")), "k≠j"))),
        " when the row has another allowed key: ", rel(zero, "<", prob("j"), "<", one),
        "; a masked key contributes ", rel(e(num(sympy.S.NegativeInfinity)), "=", zero),
        ", so its weight is exactly 0; a row with one allowed key gives that key 1"),)
    sv = symbol_vector("s", 2)
    general += (Line("SymPy: ", rel(prob(0), "=", num(softmax(sv)[0])), " is positive: "
                     f"{sympy.ask(sympy.Q.positive(softmax(sv)[0]))}"),)
    ok, checks = True, []
    counter: dict[str, Any] | None = None
    if trace is not None:
        for i in range(trace.problem.n):
            keys = allowed(trace, i)
            blocked = [j for j in range(trace.problem.m) if j not in keys]
            for j in blocked:
                if trace.weights[i, j] != 0:
                    ok = False
                    counter = counter or {"row": trace.problem.tokens[i], "key": trace.problem.key_tokens[j]}
            if len(keys) == 1 and trace.problem.sink is None:
                good = equal(trace.weights[i, keys[0]], 1)
                note = "its one allowed key has weight exactly 1"
            elif len(keys) == 1:     # the sink takes part of the row: e^x / (e^x + e^σ) < 1
                good = _in_open_interval(trace.weights[i, keys[0]])
                note = ("its one allowed key's weight is strictly between 0 and 1: the sink takes "
                        "the rest of the row (signs decided exactly)")
            else:
                good = all(_in_open_interval(trace.weights[i, j]) for j in keys)
                note = f"{len(keys)} weights strictly between 0 and 1 (signs decided exactly)"
            ok &= good
            extra = f"; {len(blocked)} masked weight(s) exactly 0" if blocked else ""
            checks.append(Line(f"row {_row_label(trace, i)}: {note}{extra}"))
    if claims is not None and claims.weights is not None:
        rounded = []
        for i, row in enumerate(claims.entries("weights")):
            for j, claimed in enumerate(row):
                x, h = claimed.value, claimed.half
                if trace is not None and j not in allowed(trace, i):
                    good, want = compare(abs(x), h) <= 0, "0 (masked)"
                    edge = good and x != 0
                elif trace is not None and len(allowed(trace, i)) == 1 and trace.problem.sink is None:
                    good, want = compare(abs(x - 1), h) <= 0, "1 (the only allowed key)"
                    edge = good and x != 1
                else:   # some w in (0, 1) with |w − x| ≤ h
                    good, want = compare(x + h, 0) > 0 and compare(x - h, 1) < 0, "in (0, 1)"
                    edge = good and not (compare(x, 0) > 0 and compare(x, 1) < 0)
                if edge:
                    rounded.append(f"[{i}, {j}] = {claimed.text}")
                if not good:
                    ok = False
                    at = f" (nor within ±{decimal_text(h)}, its rounding as written)" if h else ""
                    checks.append(Line(f"claimed weight [{i}, {j}] = {claimed.text} is not {want}{at}"))
                    counter = counter or {"row": i, "key": j, "claimed": claimed.text, "expected": want}
        if counter is None:
            checks.append(Line("claimed weights: every one in (0, 1) (0 where masked)"
                               + (f"; {', '.join(rounded)} only as a rounding as written (a true "
                                  "weight rounds to it)" if rounded else "")))
    return Proof("weights-in-open-interval", ok,
                 Line("every weight is in (0, 1): ", rel(zero, "<", entry("A", "i", "j"), "<", one),
                      "; masked weights are exactly 0 (a row with a single allowed key gives it weight 1)"),
                 general, tuple(checks), counter)


def _in_open_interval(w: sympy.Expr) -> bool:
    """0 < w < 1: by arb balls for numbers, by SymPy's sign rules for formulas in real symbols."""
    if w.free_symbols:
        return bool(w.is_positive) and bool(sympy.together(1 - w).is_positive)
    return sign(w) > 0 and sign(1 - w) > 0


# ------------------------------------------------------------ shift-invariance

def _shift_problem(trace: Trace, shifts: list[sympy.Expr]) -> Problem:
    """The same problem with shifts[i] added to every score of row i, through the engine:
    Q gains a column shifts[i]/1 and K a column of ones (the scale is kept as given)."""
    p = trace.problem
    if p.rope is not None:   # RoPE: the scores themselves as Q (K = I), so their exact form is kept
        S = trace.scores.matrix
        Q2 = sympy.ImmutableMatrix(p.n, p.m, lambda i, j: S[i, j] + shifts[i])
        return Problem(Q=Q2, K=sympy.eye(p.m), V=trace.V.matrix, scale=p.scale, mask=p.mask_value,
                       **p.variant_keys, tokens=p.tokens, key_tokens=p.key_tokens)
    Q, K = trace.Q.matrix, trace.K.matrix
    Q2 = Q.row_join(sympy.ImmutableMatrix([[c] for c in shifts]))
    K2 = K.row_join(sympy.ones(K.rows, 1))
    mask = None if p.mask is None else [[int(x) for x in row] for row in p.mask.tolist()]
    return Problem(Q=Q2, K=K2, V=trace.V.matrix, scale=p.scale, mask=mask, **p.variant_keys,
                   tokens=p.tokens, key_tokens=p.key_tokens)


def shift_invariance(trace: Trace | None = None) -> Proof:
    """softmax(s + c) = softmax(s): why subtracting the row maximum is safe."""
    n, s, _, p = indexed_softmax()
    c, j = sympy.Symbol("c", real=True), sympy.Symbol("j", integer=True)
    k = sympy.Symbol("k", integer=True)
    shifted = sympy.exp(s[j] + c) / sympy.Sum(sympy.exp(s[k] + c), (k, 0, n - 1))
    ok = sympy.simplify(shifted - p(j)) == 0
    c_ = sym("c")
    general = (Line(rel(frac(e(plus(score("j"), c_)), sigma(e(plus(score("k"), c_)), "k")), "=",
                        frac(times(e(c_), e(score("j"))), times(e(c_), sigma(e(score("k")), "k"))), "=",
                        frac(e(score("j")), sigma(e(score("k")), "k"))),
                    f" for any n, s and c (SymPy: the difference simplifies to {'0' if ok else 'something not 0'})"),)
    checks = []
    counter = None
    if trace is not None:
        shifts = [sympy.Rational(5, 2) + i for i in range(trace.problem.n)]
        other = Trace(_shift_problem(trace, shifts))
        for i in range(trace.problem.n):
            kept = all(same(other.weights[i, j_], trace.weights[i, j_]) for j_ in allowed(trace, i))
            ok &= kept
            checks.append(Line(f"row {_row_label(trace, i)}: scores + {shifts[i]} (recomputed by the engine) "
                               f"give {'the same' if kept else 'DIFFERENT'} weights exactly: ",
                               rel(fn("softmax", plus(entry("S", i), num(shifts[i]))),
                                   "=" if kept else "≠", fn("softmax", entry("S", i)))))
            if not kept:
                counter = counter or {"row": trace.problem.tokens[i], "shift": str(shifts[i])}
    return Proof("shift-invariance", ok,
                 Line("adding a constant to a row of scores leaves its weights unchanged: ",
                      rel(fn("softmax", plus(score(), sym("c"))), "=", fn("softmax", score()))),
                 general, tuple(checks), counter)


# ------------------------------------------------------------ softmax-jacobian

def _jacobian_identity(size: int) -> bool:
    s = symbol_vector("s", size)
    p = softmax(s)
    J = sympy.Matrix(size, size, lambda a, b: sympy.diff(p[a], s[b]))
    target = sympy.Matrix(size, size, lambda a, b: (p[a] if a == b else 0) - p[a] * p[b])
    return all(is_zero(J[a, b] - target[a, b]) for a in range(size) for b in range(size))


def softmax_jacobian(trace: Trace | None = None) -> Proof:
    """∂p_a/∂s_b = δ_ab p_a − p_a p_b: symmetric, with the ones vector in its null space."""
    _, s, _, p = indexed_softmax()
    a, b = sympy.symbols("a b", integer=True)
    J = sympy.diff(p(a), s[b])
    target = sympy.KroneckerDelta(a, b) * p(a) - p(a) * p(b)
    rest = sympy.simplify(J - target)
    # SymPy leaves "e^{s_b} if 0 ≤ b ≤ n−1": b indexes a score, so it is in range
    rest = rest.replace(lambda e: isinstance(e, sympy.Piecewise), lambda e: e.args[0].expr)
    ok = sympy.simplify(rest) == 0
    small = all(_jacobian_identity(size) for size in SMALL_N)
    ok &= small
    J_ = sym("J")
    jacobian = minus(fn("diag", prob()), times(prob(), T(prob())))
    general = (
        Line(rel(frac(sym("∂p", "a"), sym("∂s", "b")), "=",
                 minus(times(sym("δ", "ab"), prob("a")), times(prob("a"), prob("b")))),
             f" for any n (SymPy on indexed symbols: {'verified' if ok else 'FAILED'}; "
             f"and entry by entry for n = {', '.join(map(str, SMALL_N))}), that is ", rel(J_, "=", jacobian)),
        Line(rel(J_, "=", jacobian), " is symmetric, and ",
             rel(dot(J_, one), "=", minus(prob(), times(prob(), sigma(prob("b"), "b"))), "=", zero),
             ": adding a constant to every score changes nothing (shift invariance, to first order)"),
    )
    checks, counter = [], None
    if trace is not None:
        symbolic = has_symbols(trace)
        # at the shifted scores (e^0 = 1 keeps SymPy fast); symbols may leave the max open,
        # so there at the scaled scores (the same softmax, by shift invariance)
        at = trace.scaled if symbolic else trace.shifted
        for i in range(1 if symbolic else min(trace.problem.n, 8)):
            keys = allowed(trace, i)
            sv = symbol_vector("s", len(keys))
            probs = softmax(sv)
            values = {sv[t]: at[i, j] for t, j in enumerate(keys)}
            w = [trace.weights[i, j] for j in keys]
            size = len(keys)
            good = True
            for x in range(size):
                for y in range(size):
                    derivative = sympy.diff(probs[x], sv[y]).xreplace(values)
                    want = (w[x] if x == y else 0) - w[x] * w[y]
                    good &= same(derivative, want)
                good &= same(sympy.Add(*[(w[x] if x == y else 0) - w[x] * w[y] for y in range(size)]), 0)
            ok &= good
            checks.append(Line(f"row {_row_label(trace, i)}: the derivative of the softmax at this row's "
                               "logits " + ("equals " if good else "does NOT equal "),
                               minus(fn("diag", entry("A", i)), times(T(entry("A", i)), entry("A", i))),
                               " entry by entry" + ("; its rows sum to 0 exactly" if good else "")))
            if not good:
                counter = counter or {"row": trace.problem.tokens[i]}
    return Proof("softmax-jacobian", ok,
                 Line("the softmax Jacobian ", rel(sym("J"), "=", minus(fn("diag", prob()), times(prob(), T(prob())))),
                      " is symmetric, with the ones vector in its null space"),
                 general, tuple(checks), counter)
