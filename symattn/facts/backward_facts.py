"""Facts about the backward pass (issue 20): identities of the gradient of attention, proved.

Each fact has a general argument verified by SymPy on symbols (a small derivation: the
identity for n = 2, 3, 4 symbols, with the softmax written out) and an instance check on
the problem's own ``backward`` steps.  An instance check is exact where an exact zero
test decides it (sums of exponentials of algebraic numbers: Lindemann–Weierstrass;
``tanh`` rewritten as exponentials), else it is a check of this instance with certified
arb balls, and says so: a ball containing 0 with a tiny radius bounds the difference, it
does not prove it 0.  A ball that excludes 0 is a failure (a counterexample).

* ``d-logits-rows-sum-to-zero``: Σ_j dS_ij = 0 (with a sink: p_sink,i·D_i, which is minus
  row i's share of d_sink, so the row with its sink column sums to 0);
* ``d-V-column-sums``: Σ_j dV_jc = Σ_i (Σ_j P_ij)·dO_ic, which is Σ_i dO_ic when every row's
  weights sum to 1 (no sink, every row attends);
* ``d-Q-K-inner-products``: ⟨dQ, Q⟩ = ⟨dK, K⟩ = ⟨dS', S⟩ (with RoPE on the rotated ones,
  and on the unrotated ones too: each row is turned by an orthogonal rotation); on a small
  problem proved from its parts first (dQ = dS'·K, dK = dS'ᵀ·Q and S = Q·Kᵀ entry by entry,
  then the identity with dS' as symbols: ``backward_checks.inner_products_structurally``), which
  needs no transcendental zero test;
* ``row-dot-is-dO-dot-O``: D_i = Σ_j P_ij·dP_ij = dO_i·O_i;
* ``gradient-is-sympy-derivative``: the engine's gradient of every input equals SymPy's
  derivative of the exact loss, written out here from the definitions (small problems);
* ``finite-difference-converges``: a central difference converges to the gradient as h²
  in exact arithmetic, and the certified errors of float64 and float32 differences.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import flint
import sympy

from symattn.facts import notation as nt
from symattn.facts.proof import Line, Proof
from symattn.notation.nodes import Factor, Group, Math, Neg, Sub
from symattn.facts.symbolic import is_zero, softmax, symbol_vector
from symattn.numbers.precision import precision
from symattn.trace.trace import Trace

from symattn.facts.backward_checks import MAX_EXACT, BALL_BITS, Verdict as _Verdict, \
    ball_products as _ball_products, ball_sum as _ball_sum, inner_products_structurally, label as _label, \
    no_backward as _no_backward, \
    rows as _rows, small as _small
from symattn.facts.backward_gradient_facts import finite_difference_converges, gradient_is_sympy_derivative

SMALL_N = (2, 3, 4)


def _s(name: str, sub: str) -> Math:
    """A named entry with its indices: dP_j, P_ij, dO_ic (written as the proofs write them)."""
    return nt.sym(name, sub)


_D = nt.sym("D")


def _dV_sum() -> Math:
    """Σ_j dV_jc: a column sum of dV."""
    return nt.sigma(_s("dV", "jc"))


def _weighted_dO() -> Math:
    """Σ_i (Σ_j P_ij)·dO_ic."""
    return nt.sigma(nt.dot(Group(nt.sigma(_s("P", "ij"))), _s("dO", "ic")), "i")


def _row_dot() -> Math:
    """D_i = dO_i·O_i."""
    return nt.rel(_s("D", "i"), "=", nt.dot(_s("dO", "i"), _s("O", "i")))


# ------------------------------------------------------- d-logits-rows-sum-to-zero

@lru_cache(maxsize=None)
def _general_row_sums() -> tuple[bool, tuple[Line, ...]]:
    ok_free, ok_soft, ok_sink = True, True, True
    for n in SMALL_N:
        p, dP = symbol_vector("p", n), symbol_vector("dP", n)
        D = sympy.Add(*[a * b for a, b in zip(p, dP)])
        total = sympy.Add(*[p[j] * (dP[j] - D) for j in range(n)])
        ok_free &= sympy.expand(total - D * (1 - sympy.Add(*p))) == 0
        s = symbol_vector("s", n)
        w = softmax(s)
        Dw = sympy.Add(*[a * b for a, b in zip(w, dP)])
        ok_soft &= is_zero(sympy.Add(*[w[j] * (dP[j] - Dw) for j in range(n)]))
        sigma = sympy.Symbol("sigma", real=True)
        ws = softmax([*s, sigma])
        Ds = sympy.Add(*[a * b for a, b in zip(ws[:n], dP)])
        ok_sink &= is_zero(sympy.Add(*[ws[j] * (dP[j] - Ds) for j in range(n)]) - ws[n] * Ds)
    sizes = ", ".join(map(str, SMALL_N))
    ok = ok_free and ok_soft and ok_sink
    return ok, (
        Line(nt.rel(nt.sigma(nt.times(nt.p("j"), Factor(nt.minus(_s("dP", "j"), _D))), "j"), "=",
                    nt.minus(_D, nt.dot(_D, nt.sigma(nt.p("j")))), "=",
                    nt.dot(_D, Group(nt.minus(nt.one, nt.sigma(nt.p("j")))))),
             " with ", nt.rel(_D, "=", nt.sigma(nt.times(nt.p("k"), _s("dP", "k")), "k")), ", for any p and dP "
             f"(SymPy, expanded, n = {sizes}: {'verified' if ok_free else 'FAILED'}); "
             "the softmax's weights sum to 1, so the row sums to 0"),
        Line("with ", nt.rel(nt.p(), "=", nt.fn("softmax", nt.s())), f" written out, for symbols s and dP, n = {sizes}: "
             f"the row sum simplifies to 0 ({'verified' if ok_soft else 'FAILED'}); a masked key has ",
             nt.rel(nt.p(), "=", nt.zero), " and adds nothing"),
        Line("with a sink logit σ the weights of the keys sum to ", nt.minus(nt.one, _s("p", "σ")),
             ", so the row sums to ", nt.dot(_s("p", "σ"), _D), ", which is minus the sink's share ",
             Neg(nt.dot(_s("p", "σ"), _D)), " of d_sink: the row with its sink column sums to 0 "
             f"(SymPy, n = {sizes}: {'verified' if ok_sink else 'FAILED'})"),
    )


def d_logits_rows_sum_to_zero(trace: Trace | None = None) -> Proof:
    """Every row of dS = P ∘ (dP − D) sums to 0 (with a sink: to p_sink·D)."""
    ok, general = _general_row_sums()
    checks = _no_backward(trace)
    counter = None
    if checks is None and trace is not None:
        p, lines = trace.problem, []
        dS = trace.step("d_logits")
        sink = p.sink is not None
        for i in _rows(trace):
            v = _Verdict()
            row = sympy.Add(*[dS[i, j] for j in trace.allowed(i)])
            # p_sink,i = 1 − Σ_j P_ij (the sink's share of the row)
            p_sink = 1 - sympy.Add(*[trace.weights[i, j] for j in trace.allowed(i)])
            want = p_sink * trace.step("row_dot")[i, 0] if sink else sympy.S.Zero
            v.zero(row - want, f"row {_label(trace, i)}")
            ok &= v.ok
            said = nt.dot(_s("p", "sink,i"), _s("D", "i")) if sink else nt.zero
            lines.append(Line(f"row {_label(trace, i)}: ", nt.rel(nt.sigma(nt.sym("dS")), "=", said),
                              f" ({v.how()})"))
            if not v.ok and counter is None:
                counter = {"row": p.tokens[i]}
        if p.n > MAX_EXACT:
            lines.append(Line(f"rows past the first {MAX_EXACT} not checked (they are the same identity)"))
        checks = tuple(lines)
    statement = Line("every row of the gradient of the logits dS = P ∘ (dP − D) sums to 0, ",
                     nt.rel(nt.sigma(_s("dS", "ij")), "=", nt.zero), " (with a sink logit: to ",
                     nt.dot(_s("p", "sink,i"), _s("D", "i")), ", minus the row's share of d_sink)")
    return Proof("d-logits-rows-sum-to-zero", ok, statement, general, checks or (), counter)


# ------------------------------------------------------------------ d-V-column-sums

@lru_cache(maxsize=None)
def _general_column_sums() -> tuple[bool, tuple[Line, ...]]:
    n, m, d = 3, 2, 2
    P = sympy.Matrix(n, m, lambda i, j: sympy.Symbol(f"p{i}{j}", real=True))
    dO = sympy.Matrix(n, d, lambda i, c: sympy.Symbol(f"g{i}{c}", real=True))
    dV = P.T * dO
    free = all(sympy.expand(sum(dV[j, c] for j in range(m))
                            - sum(sum(P[i, j] for j in range(m)) * dO[i, c] for i in range(n))) == 0
               for c in range(d))
    s = sympy.Matrix(n, m, lambda i, j: sympy.Symbol(f"s{i}{j}", real=True))
    W = sympy.Matrix(n, m, lambda i, j: softmax(list(s.row(i)))[j])
    dVs = W.T * dO
    soft = all(is_zero(sum(dVs[j, c] for j in range(m)) - sum(dO[i, c] for i in range(n))) for c in range(d))
    ok = free and soft
    return ok, (
        Line(nt.rel(_dV_sum(), "=", nt.sigma(nt.sigma(nt.times(_s("P", "ij"), _s("dO", "ic")), "i")), "=",
                    _weighted_dO()), " for any P and dO "
             f"(SymPy on a 3×2 P and 3×2 dO of symbols: {'verified' if free else 'FAILED'})"),
        Line("when every row's weights sum to 1 (the softmax, no sink, every row attends) this is ",
             nt.sigma(_s("dO", "ic"), "i"), f" (SymPy with the softmax written out: {'verified' if soft else 'FAILED'}); "
             "with a sink the weights of row i sum to ", nt.rel(nt.minus(nt.one, _s("p", "sink,i")), "<", nt.one),
             ", and ", nt.rel(_dV_sum(), "=", nt.sigma(nt.dot(Group(nt.minus(nt.one, _s("p", "sink,i"))),
                                                                 _s("dO", "ic")), "i")), " instead"),
    )


def d_V_column_sums(trace: Trace | None = None) -> Proof:
    """1ᵀdV = (P·1)ᵀdO: the column sums of dV are those of dO when the rows of P sum to 1."""
    ok, general = _general_column_sums()
    checks = _no_backward(trace)
    counter = None
    if checks is None and trace is not None:
        p, lines = trace.problem, []
        plain = p.sink is None and all(trace.allowed(i) for i in range(p.n))
        v = _Verdict()
        dV, dO, W = trace.step("d_V"), trace.step("d_output"), trace.step("weights")
        for c in range(min(p.d_v, MAX_EXACT)):
            if _small(trace):
                left = sympy.Add(*[dV[j, c] for j in range(p.m)])
                if plain:
                    right = sympy.Add(*[dO[i, c] for i in range(p.n)])
                else:
                    right = sympy.Add(*[sympy.Add(*[W[i, j] for j in trace.allowed(i)]) * dO[i, c]
                                        for i in range(p.n)])
                v.zero(left - right, f"column {c}")
            else:
                terms = [("d_V", j, c, 1.0) for j in range(p.m)]
                ball = _ball_sum(trace, terms)
                for i in range(p.n):
                    weights = trace.enclosure("weights", i, BALL_BITS)
                    d_out = trace.enclosure("d_output", i, BALL_BITS)[c]
                    with precision(BALL_BITS):
                        weight = sum((weights[j] for j in trace.allowed(i)), flint.arb(0)) \
                            if not plain else flint.arb(1)
                        ball -= weight * d_out
                v.ball(ball, f"column {c}")
            if not v.ok and counter is None:
                counter = {"column": c}
        ok &= v.ok
        if plain:
            lines.append(Line("every column c: ", nt.rel(_dV_sum(), "=", nt.sigma(_s("dO", "ic"), "i")),
                              f" ({v.how()})"))
        else:
            why = ("a sink logit: each row's weights sum to 1 − p_sink,i < 1" if p.sink is not None
                   else "a row attends no key: its weights sum to 0")
            lines.append(Line(f"{why}, so the column sums of dV are not those of dO; what holds, "
                              "every column c: ", nt.rel(_dV_sum(), "=", _weighted_dO()), f" ({v.how()})"))
        checks = tuple(lines)
    statement = Line("the column sums of ", nt.rel(nt.sym("dV"), "=", nt.dot(nt.T(nt.sym("P")), nt.sym("dO"))),
                     " equal those of dO (every row's weights summing to 1; in general ",
                     nt.rel(_dV_sum(), "=", _weighted_dO()), ")")
    return Proof("d-V-column-sums", ok, statement, general, checks or (), counter)


# -------------------------------------------------------------- d-Q-K-inner-products

@lru_cache(maxsize=None)
def _general_inner() -> tuple[bool, tuple[Line, ...]]:
    n, m, d = 2, 3, 2
    Q = sympy.Matrix(n, d, lambda i, c: sympy.Symbol(f"q{i}{c}", real=True))
    K = sympy.Matrix(m, d, lambda j, c: sympy.Symbol(f"k{j}{c}", real=True))
    G = sympy.Matrix(n, m, lambda i, j: sympy.Symbol(f"g{i}{j}", real=True))   # dS'
    S = Q * K.T

    def inner(A: sympy.Matrix, B: sympy.Matrix) -> sympy.Expr:
        return sympy.expand(sum(A[i, j] * B[i, j] for i in range(A.rows) for j in range(A.cols)))
    left, right, middle = inner(G * K, Q), inner(G.T * Q, K), inner(G, S)
    ok = sympy.expand(left - middle) == 0 and sympy.expand(right - middle) == 0
    x, y, a, b, phi = sympy.symbols("x y a b phi", real=True)
    R = sympy.Matrix([[sympy.cos(phi), -sympy.sin(phi)], [sympy.sin(phi), sympy.cos(phi)]])
    kept = sympy.simplify(((R * sympy.Matrix([x, y])).T * (R * sympy.Matrix([a, b])))[0] - (x * a + y * b)) == 0
    ok_all = ok and kept
    return ok_all, (
        Line("⟨dQ, Q⟩ = ", nt.sigma(nt.times(Group(nt.sigma(nt.times(_s("dS'", "ij"), _s("K", "jc")))), _s("Q", "ic")),
                                    "ic"),
             " = ", nt.sigma(nt.times(_s("dS'", "ij"), Sub(Group(nt.times(nt.sym("Q"), nt.T(nt.sym("K")))),
                                                          (nt.sym("i"), nt.sym("j")))), "ij"),
             " = ⟨dS', S⟩, and ⟨dK, K⟩ = ",
             nt.sigma(nt.times(Group(nt.sigma(nt.times(_s("dS'", "ij"), _s("Q", "ic")), "i")), _s("K", "jc")), "jc"),
             " = ⟨dS', S⟩ likewise, for any dS', Q and K "
             f"(SymPy on a 2×2 Q, 3×2 K and 2×3 dS' of symbols: {'verified' if ok else 'FAILED'})"),
        Line("with RoPE the scores are ", nt.dot(_s("Q", "rot"), nt.T(_s("K", "rot"))),
             ", so the identity holds on the rotated ones; and each row of dQ is turned back by the same "
             "rotation as its query (", nt.T(nt.sym("R")), " is orthogonal: "
             f"⟨Ru, Rv⟩ = ⟨u, v⟩, SymPy: {'verified' if kept else 'FAILED'}), so ⟨dQ, Q⟩ = ⟨dQ_rot, Q_rot⟩ too"),
    )


def d_Q_K_inner_products(trace: Trace | None = None) -> Proof:
    """⟨dQ, Q⟩ = ⟨dK, K⟩ = ⟨dS', S⟩ (the scores are bilinear in Q and K)."""
    ok, general = _general_inner()
    checks = _no_backward(trace)
    counter = None
    if checks is None and trace is not None:
        p, lines = trace.problem, []
        suffix = "_rot" if p.rope is not None else ""
        qn, kn = "Q" + suffix, "K" + suffix
        dq, dk = "d_Q" + suffix, "d_K" + suffix
        v = _Verdict()
        # proved exactly from its parts (dQ = dS'·K, dK = dS'ᵀ·Q, S = Q·Kᵀ) and an identity, or else whole
        structural = _small(trace) and inner_products_structurally(trace, qn, kn, dq, dk)
        if _small(trace) and not structural:
            def inner(a: str, b: str, rows: int, cols: int) -> sympy.Expr:
                A, B = trace.step(a), trace.step(b)
                return sympy.Add(*[A[i, c] * B[i, c] for i in range(rows) for c in range(cols)])
            S, dS = trace.step("scores"), trace.step("d_scores")
            middle = sympy.Add(*[dS[i, j] * S[i, j] for i in range(p.n) for j in trace.allowed(i)])
            v.zero(inner(dq, qn, p.n, p.d_k) - middle, f"⟨{dq}, {qn}⟩ − ⟨dS', S⟩")
            v.zero(inner(dk, kn, p.m, p.d_k) - middle, f"⟨{dk}, {kn}⟩ − ⟨dS', S⟩")
        elif not structural:
            v.ball(_ball_products(trace, [(dq, qn)], p.n, p.d_k, 1.0)
                   + _ball_products(trace, [(dk, kn)], p.m, p.d_k, -1.0), f"⟨{dq}, {qn}⟩ − ⟨{dk}, {kn}⟩")
        ok &= v.ok
        lines.append(Line(f"⟨{dq}, {qn}⟩ = ⟨{dk}, {kn}⟩ = ⟨dS', S⟩ ({v.how()})"))
        if p.rope is not None:
            w = _Verdict()
            w.ball(_ball_products(trace, [("d_Q", "Q")], p.n, p.d_k, 1.0)
                   + _ball_products(trace, [("d_Q_rot", "Q_rot")], p.n, p.d_k, -1.0), "⟨dQ, Q⟩ − ⟨dQ_rot, Q_rot⟩")
            ok &= w.ok
            lines.append(Line(f"and on the unrotated queries: ⟨d_Q, Q⟩ = ⟨d_Q_rot, Q_rot⟩ ({w.how()})"))
        if not ok:
            counter = {"inner products": "differ"}
        checks = tuple(lines)
    statement = Line("⟨dQ, Q⟩ = ⟨dK, K⟩, both equal to ⟨dS', S⟩ (with RoPE: on the rotated queries and keys)")
    return Proof("d-Q-K-inner-products", ok, statement, general, checks or (), counter)


# --------------------------------------------------------------- row-dot-is-dO-dot-O

@lru_cache(maxsize=None)
def _general_row_dot() -> tuple[bool, tuple[Line, ...]]:
    m, d = 3, 2
    p = symbol_vector("p", m)
    V = sympy.Matrix(m, d, lambda j, c: sympy.Symbol(f"v{j}{c}", real=True))
    g = symbol_vector("g", d)
    dP = [sum(g[c] * V[j, c] for c in range(d)) for j in range(m)]
    O = [sum(p[j] * V[j, c] for j in range(m)) for c in range(d)]  # noqa: E741
    ok = sympy.expand(sum(p[j] * dP[j] for j in range(m)) - sum(g[c] * O[c] for c in range(d))) == 0
    P, dO, c = _s("P", "ij"), _s("dO", "ic"), "c"
    return ok, (Line(nt.rel(_s("D", "i"), "=", nt.sigma(nt.times(P, _s("dP", "ij"))), "=",
                            nt.sigma(nt.times(P, nt.sigma(nt.times(dO, _s("V", "jc")), c))), "=",
                            nt.sigma(nt.times(dO, nt.sigma(nt.times(P, _s("V", "jc")))), c), "=",
                            nt.sigma(nt.times(dO, _s("O", "ic")), c)),
                     ", for any weights (a sink's too: it has no value row) "
                     f"(SymPy on 3 weights, a 3×2 V and dO of symbols: {'verified' if ok else 'FAILED'})"),)


def row_dot_is_dO_dot_O(trace: Trace | None = None) -> Proof:
    """FlashAttention-2's D = rowsum(dO ∘ O): the same D as Σ_j P_ij dP_ij."""
    ok, general = _general_row_dot()
    checks = _no_backward(trace)
    counter = None
    if checks is None and trace is not None:
        p, lines = trace.problem, []
        D, dO, O = trace.step("row_dot"), trace.step("d_output"), trace.step("output")  # noqa: E741
        for i in _rows(trace):
            v = _Verdict()
            v.zero(D[i, 0] - sympy.Add(*[dO[i, c] * O[i, c] for c in range(p.d_v)]), f"row {_label(trace, i)}")
            ok &= v.ok
            lines.append(Line(f"row {_label(trace, i)}: ", _row_dot(), f" ({v.how()})"))
            if not v.ok and counter is None:
                counter = {"row": p.tokens[i]}
        checks = tuple(lines)
    statement = Line(nt.rel(_s("D", "i"), "=", nt.sigma(nt.dot(_s("P", "ij"), _s("dP", "ij")))), " equals ",
                     nt.dot(_s("dO", "i"), _s("O", "i")), " (FlashAttention-2's D = rowsum(dO ∘ O))")
    return Proof("row-dot-is-dO-dot-O", ok, statement, general, checks or (), counter)


#: name -> function(trace, claims) -> Proof, registered in symattn.facts.FACTS (claims are not
#: read: a person's figures for the backward steps are judged by ``symattn check``)
BACKWARD_FACTS: dict[str, Callable[[Trace | None, Any], Proof]] = {
    "d-logits-rows-sum-to-zero": lambda t, c: d_logits_rows_sum_to_zero(t),
    "d-V-column-sums": lambda t, c: d_V_column_sums(t),
    "d-Q-K-inner-products": lambda t, c: d_Q_K_inner_products(t),
    "row-dot-is-dO-dot-O": lambda t, c: row_dot_is_dO_dot_O(t),
    "gradient-is-sympy-derivative": lambda t, c: gradient_is_sympy_derivative(t),
    "finite-difference-converges": lambda t, c: finite_difference_converges(t),
}
