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
  and on the unrotated ones too: each row is turned by an orthogonal rotation);
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

from symattn.facts.proof import Line, Proof
from symattn.facts.symbolic import is_zero, softmax, symbol_vector
from symattn.numbers.precision import precision
from symattn.trace.trace import Trace

from symattn.facts.backward_checks import MAX_EXACT, BALL_BITS, Verdict as _Verdict, \
    ball_products as _ball_products, ball_sum as _ball_sum, label as _label, no_backward as _no_backward, \
    rows as _rows, small as _small
from symattn.facts.backward_gradient_facts import finite_difference_converges, gradient_is_sympy_derivative

SMALL_N = (2, 3, 4)


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
        Line("Σ_j p_j (dP_j − D) = D − D·Σ_j p_j = D·(1 − Σ_j p_j) with D = Σ_k p_k dP_k, for any p and dP "
             f"(SymPy, expanded, n = {sizes}: {'verified' if ok_free else 'FAILED'}); "
             "the softmax's weights sum to 1, so the row sums to 0",
             r"\sum_j p_j (dP_j - D) = D\,\bigl(1 - \textstyle\sum_j p_j\bigr) = 0"),
        Line(f"with p = softmax(s) written out, for symbols s and dP, n = {sizes}: the row sum simplifies "
             f"to 0 ({'verified' if ok_soft else 'FAILED'}); a masked key has p = 0 and adds nothing",
             r"\sum_j \operatorname{softmax}(s)_j\,(dP_j - D) \equiv 0"),
        Line("with a sink logit σ the weights of the keys sum to 1 − p_σ, so the row sums to p_σ·D, which is "
             "minus the sink's share −p_σ·D of d_sink: the row with its sink column sums to 0 "
             f"(SymPy, n = {sizes}: {'verified' if ok_sink else 'FAILED'})",
             r"\sum_j dS_{ij} = p_{\sigma,i} D_i = -\frac{\partial L}{\partial \sigma}\Big|_{\text{row } i}"),
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
            said = "p_sink,i·D_i" if sink else "0"
            said_tex = rf"p_{{\sigma,{i}}} D_{{{i}}}" if sink else "0"
            lines.append(Line(f"row {_label(trace, i)}: Σ_j dS = {said} ({v.how()})",
                              rf"\sum_j dS_{{{i}j}} = {said_tex} " + v.tex()))
            if not v.ok and counter is None:
                counter = {"row": p.tokens[i]}
        if p.n > MAX_EXACT:
            lines.append(Line(f"rows past the first {MAX_EXACT} not checked (they are the same identity)",
                              rf"\text{{first {MAX_EXACT} rows}}"))
        checks = tuple(lines)
    statement = Line("every row of the gradient of the logits dS = P ∘ (dP − D) sums to 0 (with a sink "
                     "logit: to p_sink·D_i, minus the row's share of d_sink)",
                     r"\sum_j dS_{ij} = 0 \quad (\text{with a sink: } p_{\sigma,i} D_i)")
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
        Line("Σ_j dV_jc = Σ_j Σ_i P_ij dO_ic = Σ_i (Σ_j P_ij)·dO_ic for any P and dO "
             f"(SymPy on a 3×2 P and 3×2 dO of symbols: {'verified' if free else 'FAILED'})",
             r"\mathbf{1}^\top dV = \mathbf{1}^\top P^\top dO = (P\mathbf{1})^\top dO"),
        Line("when every row's weights sum to 1 (the softmax, no sink, every row attends) this is "
             f"Σ_i dO_ic (SymPy with the softmax written out: {'verified' if soft else 'FAILED'}); "
             "with a sink the weights of row i sum to 1 − p_sink,i < 1, and Σ_j dV_jc = "
             "Σ_i (1 − p_sink,i)·dO_ic instead",
             r"P\mathbf{1} = \mathbf{1} \Rightarrow \mathbf{1}^\top dV = \mathbf{1}^\top dO"),
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
            lines.append(Line(f"every column c: Σ_j dV_jc = Σ_i dO_ic ({v.how()})",
                              r"\mathbf{1}^\top dV = \mathbf{1}^\top dO " + v.tex()))
        else:
            why = ("a sink logit: each row's weights sum to 1 − p_sink,i < 1" if p.sink is not None
                   else "a row attends no key: its weights sum to 0")
            lines.append(Line(f"{why}, so the column sums of dV are not those of dO; what holds, "
                              f"every column c: Σ_j dV_jc = Σ_i (Σ_j P_ij)·dO_ic ({v.how()})",
                              r"\mathbf{1}^\top dV = (P\mathbf{1})^\top dO " + v.tex()))
        checks = tuple(lines)
    statement = Line("the column sums of dV = Pᵀ·dO equal those of dO (every row's weights summing to 1; "
                     "in general Σ_j dV_jc = Σ_i (Σ_j P_ij)·dO_ic)",
                     r"\mathbf{1}^\top dV = (P\mathbf{1})^\top dO = \mathbf{1}^\top dO")
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
        Line("⟨dQ, Q⟩ = Σ_ic (Σ_j dS'_ij K_jc) Q_ic = Σ_ij dS'_ij (Q Kᵀ)_ij = ⟨dS', S⟩, and "
             "⟨dK, K⟩ = Σ_jc (Σ_i dS'_ij Q_ic) K_jc = ⟨dS', S⟩ likewise, for any dS', Q and K "
             f"(SymPy on a 2×2 Q, 3×2 K and 2×3 dS' of symbols: {'verified' if ok else 'FAILED'})",
             r"\langle dS' K, Q\rangle = \operatorname{tr}(K^\top dS'^\top Q) = \langle dS', QK^\top\rangle"
             r" = \langle dS'^\top Q, K\rangle"),
        Line("with RoPE the scores are Q_rot·K_rotᵀ, so the identity holds on the rotated ones; and each "
             "row of dQ is turned back by the same rotation as its query (Rᵀ is orthogonal: "
             f"⟨Ru, Rv⟩ = ⟨u, v⟩, SymPy: {'verified' if kept else 'FAILED'}), so ⟨dQ, Q⟩ = ⟨dQ_rot, Q_rot⟩ too",
             r"\langle R u, R v\rangle = \langle u, v\rangle"),
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
        if _small(trace):
            def inner(a: str, b: str, rows: int, cols: int) -> sympy.Expr:
                A, B = trace.step(a), trace.step(b)
                return sympy.Add(*[A[i, c] * B[i, c] for i in range(rows) for c in range(cols)])
            S, dS = trace.step("scores"), trace.step("d_scores")
            middle = sympy.Add(*[dS[i, j] * S[i, j] for i in range(p.n) for j in trace.allowed(i)])
            v.zero(inner(dq, qn, p.n, p.d_k) - middle, f"⟨{dq}, {qn}⟩ − ⟨dS', S⟩")
            v.zero(inner(dk, kn, p.m, p.d_k) - middle, f"⟨{dk}, {kn}⟩ − ⟨dS', S⟩")
        else:
            v.ball(_ball_products(trace, [(dq, qn)], p.n, p.d_k, 1.0)
                   + _ball_products(trace, [(dk, kn)], p.m, p.d_k, -1.0), f"⟨{dq}, {qn}⟩ − ⟨{dk}, {kn}⟩")
        ok &= v.ok
        lines.append(Line(f"⟨{dq}, {qn}⟩ = ⟨{dk}, {kn}⟩ = ⟨dS', S⟩ ({v.how()})",
                          rf"\langle d{qn}, {qn}\rangle = \langle d{kn}, {kn}\rangle = "
                          r"\langle dS', S\rangle " + v.tex()))
        if p.rope is not None:
            w = _Verdict()
            w.ball(_ball_products(trace, [("d_Q", "Q")], p.n, p.d_k, 1.0)
                   + _ball_products(trace, [("d_Q_rot", "Q_rot")], p.n, p.d_k, -1.0), "⟨dQ, Q⟩ − ⟨dQ_rot, Q_rot⟩")
            ok &= w.ok
            lines.append(Line(f"and on the unrotated queries: ⟨d_Q, Q⟩ = ⟨d_Q_rot, Q_rot⟩ ({w.how()})",
                              r"\langle dQ, Q\rangle = \langle dQ_{\text{rot}}, Q_{\text{rot}}\rangle " + w.tex()))
        if not ok:
            counter = {"inner products": "differ"}
        checks = tuple(lines)
    statement = Line("⟨dQ, Q⟩ = ⟨dK, K⟩, both equal to ⟨dS', S⟩ (with RoPE: on the rotated queries and keys)",
                     r"\langle dQ, Q\rangle = \langle dK, K\rangle = \langle dS', S\rangle")
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
    return ok, (Line("D_i = Σ_j P_ij dP_ij = Σ_j P_ij Σ_c dO_ic V_jc = Σ_c dO_ic Σ_j P_ij V_jc = Σ_c dO_ic O_ic, "
                     "for any weights (a sink's too: it has no value row) "
                     f"(SymPy on 3 weights, a 3×2 V and dO of symbols: {'verified' if ok else 'FAILED'})",
                     r"D_i = \sum_j P_{ij}\,(dO\,V^\top)_{ij} = \sum_c dO_{ic}\,(PV)_{ic} = dO_i \cdot O_i"),)


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
            lines.append(Line(f"row {_label(trace, i)}: D_i = dO_i·O_i ({v.how()})",
                              rf"D_{{{i}}} = dO_{{{i}}} \cdot O_{{{i}}} " + v.tex()))
            if not v.ok and counter is None:
                counter = {"row": p.tokens[i]}
        checks = tuple(lines)
    statement = Line("D_i = Σ_j P_ij·dP_ij equals dO_i·O_i (FlashAttention-2's D = rowsum(dO ∘ O))",
                     r"D_i = \sum_j P_{ij}\, dP_{ij} = dO_i \cdot O_i")
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
