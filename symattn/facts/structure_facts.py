"""Facts about attention as a whole: temperature limits, the convex hull of
the values, Var(q·k) = d_k, the causal prefix property and permutation
equivariance.

Concrete checks rebuild variant problems (a causal mask, a prefix, permuted
tokens) and run them through the same engine, then compare exactly.
"""

from __future__ import annotations

from functools import cmp_to_key, lru_cache

import sympy

from symattn.numbers.compare import compare, sign
from symattn.facts.claims import Claims, decimal_text
from symattn.facts.notation import (dot, e, entry, fn, frac, minus, one, rel, root, sigma, sym, times,
                                    zero)
from symattn.facts.notation import p as prob, s as score
from symattn.facts.moments import expectation, normal_moments, uniform_moments
from symattn.facts.proof import Line, Proof
from symattn.notation.hand import hand
from symattn.notation.nodes import Factor, Int, Math, Neg, Row, Seq, Sym, Words
from symattn.facts.softmax_facts import allowed, dec, same
from symattn.facts.symbolic import has_symbols, is_zero, softmax, symbol_vector, symbolic_trace
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace


def rebuild(problem: Problem, rows: list[int] | None = None, key_rows: list[int] | None = None,
            mask: object = "keep") -> Problem:
    """The same inputs with query rows / key rows selected or reordered, through Problem.

    ``rows`` picks the query rows (and, for self-attention, the key rows too);
    ``mask`` is "keep" (the given mask, reindexed), None, "causal" or a 0/1 list.
    """
    p = problem
    rows = list(range(p.n)) if rows is None else rows
    key_rows = (rows if p.n == p.m and "X_kv" not in p.inputs else list(range(p.m))) \
        if key_rows is None else key_rows
    pick = lambda M, r: sympy.ImmutableMatrix([list(M.row(i)) for i in r])  # noqa: E731
    if p.projected:
        inputs = {"X": pick(p.X, rows), "W_q": p.W_q, "W_k": p.W_k, "W_v": p.W_v}
        if "X_kv" in p.inputs:
            inputs["X_kv"] = pick(p.X_kv, key_rows)
    else:
        inputs = {"Q": pick(p.Q_given, rows), "K": pick(p.K_given, key_rows),
                  "V": pick(p.V_given, key_rows)}
    if mask == "keep":
        mask = None if p.mask is None else [[int(p.mask[a, b]) for b in key_rows] for a in rows]
    same_seq = p.key_tokens == p.tokens
    rope = None if p.rope is None else p.rope.picked(rows, key_rows)   # each row keeps its position
    return Problem(**inputs, scale=p.scale, mask=mask, **p.variant_keys, rope=rope, tokens=[p.tokens[i] for i in rows],
                   key_tokens=None if same_seq else [p.key_tokens[j] for j in key_rows])


def sup_sq(x):
    """x² (a square written as a superscript)."""
    from symattn.facts.notation import sup, num
    return sup(x, num(2))


def _mean(values: list[sympy.Expr]) -> sympy.Expr:
    return sympy.Add(*values) / len(values)


_half, _third = sympy.Rational(1, 2), sympy.Rational(1, 3)


def _row(*items: object) -> Row:
    """[a, b, c]: exact values in their hand forms (1/2, not 0.5), nodes as they are."""
    return Row(tuple(x if isinstance(x, Math) else hand(sympy.Integer(x) if isinstance(x, int) else x)
                      for x in items))


# ---------------------------------------------------------- temperature-limits

def temperature_limits(trace: Trace | None = None) -> Proof:
    """Scale × τ: τ → ∞ gives the argmax (ties split equally), τ → 0 the uniform average."""
    tau = sympy.Symbol("tau", positive=True)
    a, b = sympy.symbols("a b", positive=True)
    s3 = symbol_vector("s", 3)
    cases = [([0, -a, -b], sympy.oo, [1, 0, 0]), ([0, 0, -a], sympy.oo, [sympy.Rational(1, 2)] * 2 + [0]),
             (s3, 0, [sympy.Rational(1, 3)] * 3)]
    ok = all([sympy.limit(w, tau, where) for w in softmax([tau * x for x in s])] == want
             for s, where, want in cases)
    tau_, M_ = sym("τ"), sym("M")
    general = (
        Line("write ", rel(fn("p_j", tau_), "=", frac(e(times(tau_, score("j"))), sigma(e(times(tau_, score("k"))), "k")),
                           "=", frac(e(times(tau_, minus(score("j"), M_))), sigma(e(times(tau_, minus(score("k"), M_))), "k"))),
             " with ", rel(M_, "=", fn("max", score())), ": each term with ", rel(score("k"), "<", M_),
             " tends to 0 as ", rel(tau_, "→", sym("∞")), ", each with ", rel(score("k"), "=", M_),
             " is 1, so p → 1/#ties on the maxima; as ", rel(tau_, "→", zero), " every ",
             rel(e(times(tau_, minus(score("k"), M_))), "→", one), ", so ", rel(prob(), "→", frac(one, sym("n"))),
             " and the output → the mean of V"),
        Line("SymPy's limit: ", rel(score(), "=", _row(0, Neg(sym("a")), Neg(sym("b"))), "→", _row(1, 0, 0)), "; ",
             rel(score(), "=", _row(0, 0, Neg(sym("a"))), "→", _row(_half, _half, 0)), "; any s, ",
             rel(tau_, "→", zero), ": ", rel(prob(), "→", _row(_third, _third, _third)),
             f" ({'agrees' if ok else 'DISAGREES'})"),
    )
    checks, limits = [], {}
    if trace is not None and has_symbols(trace):
        checks.append(Line("not checked on this problem: with symbols the order of the scores is open "
                           "(substitute numbers, or see the general argument)"))
    elif trace is not None:
        V = trace.V.matrix
        logit = trace.logit_step
        if logit != "scaled":       # say which logits τ multiplies: the ones the softmax takes
            after = {"biased": "after ALiBi's bias", "capped": "after the soft-cap"}[logit]
            checks.append(Line(
                f"τ multiplies the logits the softmax takes, here the {logit} ones ({after}), as a "
                "sampling temperature divides them: ",
                rel(fn("p", tau_), "=", fn("softmax", dot(tau_, Words(logit)))), "; the limits below are "
                "of that (a τ on the scores before the bias or the cap would be another family)"))
        for i in range(trace.problem.n):
            keys = allowed(trace, i)
            top = sorted(trace.ties(i))
            hot = [sympy.Rational(1, len(top)) if j in top else 0 for j in keys]
            cold = [sympy.Rational(1, len(keys))] * len(keys)
            if len(keys) <= 4:  # SymPy's limit as a second opinion on small rows
                w = softmax([tau * x for x in _by_sign([trace.shifted[i, j] for j in keys])])
                ok &= [sympy.limit(x, tau, sympy.oo) for x in w] == hot
                ok &= [sympy.limit(x, tau, 0) for x in w] == cold
            out_hot = [_mean([V[j, c] for j in top]) for c in range(V.cols)]
            out_cold = [_mean([V[j, c] for j in keys]) for c in range(V.cols)]
            names = [trace.problem.key_tokens[j] for j in top]
            limits[trace.problem.tokens[i]] = {
                "keys": [trace.problem.key_tokens[j] for j in keys],
                "weights_hot": [str(x) for x in hot], "weights_cold": [str(x) for x in cold],
                "output_hot": [sympy.sstr(x) for x in out_hot],
                "output_cold": [sympy.sstr(x) for x in out_cold]}
            checks.append(Line(
                f"row {trace.problem.tokens[i]!r}: ", rel(tau_, "→", Sym("∞")), ": weights → ", _row(*hot),
                f" (max at {', '.join(names)}), output → ", _row(*out_hot), "; ", rel(tau_, "→", zero),
                ": weights → ", _row(*cold), ", output → mean of V = ", _row(*out_cold)))
    return Proof("temperature-limits", ok,
                 Line("as the scale grows the weights tend to the argmax (ties split equally); "
                      "as it shrinks to 0 they tend to uniform and the output to the mean of V: ",
                      rel(fn("softmax", times(sym("τ"), score())), "→", fn("argmax", score())), " as τ → ∞, ",
                      rel(fn("softmax", times(sym("τ"), score())), "→", frac(one, sym("n"))), " as τ → 0"),
                 general, tuple(checks), data={"limits": limits} if limits else {})


def _by_sign(logits: list[sympy.Expr]) -> list[sympy.Expr]:
    """Each logit that is not 0 as ±a with a positive symbol a, its sign decided exactly.

    Why: the limits of softmax(τ·x) depend only on the signs of the x_j (e^{τx} → 0, 1 or ∞),
    and SymPy's limit spends seconds deciding the sign of 5·tanh(2/5) − 5·tanh(1) on its own
    (soft-capped rows); given the certified signs its answer is the same."""
    out: list[sympy.Expr] = []
    for k, x in enumerate(logits):
        which = sign(x)
        out.append(which * sympy.Symbol(f"a{k}", positive=True) if which else sympy.S.Zero)
    return out


# ------------------------------------------------------------------ convex-hull

def convex_hull(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """min_j V[j, c] ≤ output[i, c] ≤ max_j V[j, c] over the allowed keys j."""
    ok = True
    for size in (2, 3):
        w, v = softmax(symbol_vector("s", size)), symbol_vector("v", size)
        out = sympy.Add(*[x * y for x, y in zip(w, v)])
        ok &= is_zero(out - v[0] - sympy.Add(*[x * (y - v[0]) for x, y in zip(w, v)]))
    o, v_j, lo, hi = sym("o"), sym("v", "j"), fn("min", sym("v")), fn("max", sym("v"))
    general: tuple[Line, ...] = (Line(
        rel(o, "=", sigma(times(prob("j"), v_j))), " with ", rel(prob("j"), ">", zero), " and ",
        rel(sigma(prob("j")), "=", one), ", so ", rel(minus(o, lo), "=", sigma(times(prob("j"), minus(v_j, lo))), "≥", zero),
        " and ", rel(minus(hi, o), "=", sigma(times(prob("j"), minus(hi, v_j))), "≥", zero),
        " (the identity verified by SymPy for n = 2, 3)"),)
    on_symbols = symbolic_trace()
    engine_ok = _hull_identity(on_symbols)
    ok &= engine_ok
    general += (Line("the engine on all-symbol Q, K, V (3 tokens): ",
                     rel(minus(entry("O", "i"), entry("V", 0)), "≡",
                         sigma(times(entry("A", "i", "j"), minus(entry("V", "j"), entry("V", 0))))),
                     f" identically ({'verified' if engine_ok else 'FAILED'})"),)
    checks, counter = [], None
    if trace is not None and has_symbols(trace):
        good = _hull_identity(trace)
        ok &= good
        v_first = sym("v", "first")
        checks.append(Line("symbolic values: each output is ", sigma(times(prob("j"), sym("v", "j"))),
                           " with weights summing to 1 (the identity ",
                           rel(minus(sym("o"), v_first), "=", sigma(times(prob("j"), Factor(minus(sym("v", "j"), v_first))))),
                           f" {'holds' if good else 'FAILS'}); with ", rel(prob("j"), ">", zero),
                           " that places it between the smallest and largest value"))
    elif trace is not None:
        V = trace.V.matrix
        claimed = claims.entries("output") if claims is not None and claims.output is not None else None
        for i in range(trace.problem.n):
            keys = allowed(trace, i)
            outside = []
            for c in range(V.cols):
                column = [V[j, c] for j in keys]
                lo, hi = min(column, key=_key), max(column, key=_key)
                if claimed is not None:   # some true value within its rounding as written
                    written = claimed[i][c]
                    value, half = written.value, written.half
                    inside = compare(lo, value + half) <= 0 and compare(value - half, hi) <= 0
                else:
                    value = trace.algebraic_value("output", i, c)
                    value, half = (trace.output[i, c] if value is None else value), 0
                    inside = compare(lo, value) <= 0 <= compare(hi, value)
                ok &= inside
                if not inside:
                    outside.append(c)
                if not inside and counter is None:
                    counter = {"row": trace.problem.tokens[i], "column": c,
                               "min": sympy.sstr(lo), "max": sympy.sstr(hi)}
                    if claimed is not None:
                        counter["claimed"] = written.text
                        if half:
                            counter["within"] = decimal_text(half)
                    else:
                        counter |= {"output": sympy.sstr(value), "decimal": dec(value, 6)}
            shown = [claimed[i][c].text if claimed is not None else dec(trace.output[i, c])
                     for c in range(V.cols)]
            verb = "lies" if not outside else \
                f"does NOT lie (column {', '.join(map(str, outside))})"
            checks.append(Line(f"{'claimed ' if claimed is not None else ''}row {trace.problem.tokens[i]!r}: "
                               f"[{', '.join(shown)}] {verb} between the column minima and maxima of V "
                               f"over its allowed keys"
                               + (" (each within its rounding as written)" if claimed is not None else "")))
    return Proof("convex-hull", ok,
                 Line("each output lies in the convex hull of the value rows (between the column min and "
                      "max of V): ", rel(fn("min_j", entry("V", "j", "c")), "≤", entry("O", "i", "c"), "≤",
                                         fn("max_j", entry("V", "j", "c")))),
                 general, tuple(checks), counter)


_key = cmp_to_key(compare)  # order decided exactly, never by floats


def _hull_identity(trace: Trace) -> bool:
    """o_ic − V[j0, c] = Σ_j A_ij (V[j, c] − V[j0, c]) for each row (j0 its first allowed key)."""
    V = trace.V.matrix
    for i in range(trace.problem.n):
        keys = allowed(trace, i)
        for c in range(V.cols):
            base = V[keys[0], c]
            rhs = sympy.Add(*[trace.weights[i, j] * (V[j, c] - base) for j in keys])
            if not same(trace.output[i, c] - base, rhs):
                return False
    return True


# ------------------------------------------------------------------ variance-d_k

@lru_cache(maxsize=None)
def _variance_facts() -> tuple[bool, sympy.Expr]:
    """The per-term moments (two distributions), the covariance, a direct d_k = 2 case, the sum
    (the moments derived in ``moments``; E factored over independent variables)."""
    normal = normal_moments(2)
    if normal is None:
        return False, sympy.S.Zero
    q, k, q1, k1 = sympy.symbols("q k q1 k1", real=True)
    term_ok = cov_ok = two = True
    for m in (normal, uniform_moments(sympy.sqrt(3), 2)):
        mean, square = m[1], m[2]
        moments = {v: m for v in (q, k, q1, k1)}
        # independent copies have equal moments: Var(q k) = E[q²]E[k²] − (E[q]E[k])²
        term_ok &= mean == 0 and square == 1 and \
            expectation((q * k) ** 2, moments) - expectation(q * k, moments) ** 2 == 1
        cov_ok &= expectation(q * k * q1 * k1, moments) - expectation(q * k, moments) * \
            expectation(q1 * k1, moments) == 0
        two &= expectation((q * k + q1 * k1) ** 2, moments) - expectation(q * k + q1 * k1, moments) ** 2 == 2
    d, i = sympy.Symbol("d_k", integer=True, positive=True), sympy.Symbol("i", integer=True)
    total = sympy.Sum(1, (i, 1, d)).doit()
    return bool(term_ok and cov_ok and two and total == d), total


def variance_d_k(trace: Trace | None = None) -> Proof:
    """Var(q·k) = d_k for independent zero-mean unit-variance entries: why scale by 1/√d_k."""
    ok, total = _variance_facts()
    d = sympy.Symbol("d_k", integer=True, positive=True)
    general = (
        Line("for independent ", sym("q", "i"), ", ", sym("k", "i"), " with mean 0 and variance 1: ",
             rel(fn("E", times(sym("q", "i"), sym("k", "i"))), "=", times(fn("E", sym("q", "i")), fn("E", sym("k", "i"))),
                 "=", zero), " and ",
             rel(fn("Var", times(sym("q", "i"), sym("k", "i"))), "=",
                 minus(times(fn("E", sup_sq(sym("q", "i"))), fn("E", sup_sq(sym("k", "i")))), zero), "=", one),
             " (derived exactly: for ", fn("Normal", Seq((zero, one))), " from its moment generating function ",
             e(frac(sup_sq(sym("s")), sym("2"))), ", its density's total 1 by polar coordinates; for ",
             fn("Uniform", Seq((Neg(root(sym("3"))), root(sym("3"))))), " by integrating the powers of ", sym("x"),
             ": it is not about normality)"),
        Line("distinct terms are independent, so ",
             rel(fn("Cov", Seq((times(sym("q", "i"), sym("k", "i")), times(sym("q", "j"), sym("k", "j"))))), "=", zero),
             " (E of a product of independent factors is the product of their E's) and ",
             rel(fn("Var", dot(sym("q"), sym("k"))), "=", sigma(fn("Var", times(sym("q", "i"), sym("k", "i"))), "i"),
                 "=", sym(sympy.sstr(total))), " (summed over ", rel(sym("i"), "=", Seq((one, Words("…"), sym("d_k")))),
             "; checked directly for ", rel(sym("d_k"), "=", Int(2)), ")"),
        Line("hence ", rel(fn("Var", frac(dot(sym("q"), sym("k")), root(sym("d_k")))), "=",
                           frac(sym("d_k"), sym("d_k")), "=", one),
             ": the scaled scores keep unit variance at any width, "
             "and the softmax does not saturate (\"Attention Is All You Need\", §3.2.1, footnote 4)"),
    )
    checks = []
    if trace is not None:
        p = trace.problem
        var = sympy.nsimplify(p.scale ** 2 * p.d_k) if p.scale.is_Rational else sympy.simplify(p.scale ** 2 * p.d_k)
        checks.append(Line("this problem: ", rel(sym("d_k"), "=", hand(sympy.Integer(p.d_k))), ", ",
                           rel(Words("scale"), "=", hand(p.scale)), ", so random unit-variance ", sym("q"), ", ",
                           sym("k"), " give ", rel(fn("Var", dot(Words("scale"), sym("q"), sym("k"))), "=", hand(var)),
                           *(() if var == 1 else (" (not 1: the scores grow with ", sym("d_k"), ")"))))
    return Proof("variance-d_k", bool(ok),
                 Line(rel(fn("Var", dot(sym("q"), sym("k"))), "=", sym("d_k")),
                      " for independent zero-mean unit-variance entries (the reason for ", root(sym("d_k")), ")"),
                 general, tuple(checks), data={"d_k_symbolic": sympy.sstr(d)})


# ------------------------------------------------------------------ causal-prefix

def _symbolic_causal_outputs(length: int) -> list[sympy.Expr]:
    q, k, v = (symbol_vector(x, length) for x in "qkv")
    outs = []
    for i in range(length):
        w = softmax([q[i] * k[j] for j in range(i + 1)])
        outs.append(sympy.Add(*[w[j] * v[j] for j in range(i + 1)]))
    return outs


def causal_prefix(trace: Trace | None = None) -> Proof:
    """With a causal mask, appending tokens leaves earlier outputs unchanged (a KV cache is exact)."""
    short, longer = _symbolic_causal_outputs(3), _symbolic_causal_outputs(4)
    ok = short == longer[:3]
    general: tuple[Line, ...] = (Line(
        "with a causal mask, ", rel(sym("o", "i"), "=", sigma(times(sym("p", "ij"), sym("v", "j")), "j≤i")), " with ",
        rel(sym("p", "ij"), "=", fn("softmax_j", frac(dot(sym("q", "i"), sym("k", "j")), root(sym("d_k"))))),
        " over j ≤ i only: nothing of a later token enters row i.  SymPy: the causal outputs "
        f"of rows 0–2 built for 3 and for 4 symbolic tokens are {'identical' if ok else 'DIFFERENT'}"),)
    engine_ok = _prefix_check(symbolic_trace(3, 1).problem)[0]
    ok &= engine_ok
    general += (Line("the engine on all-symbol Q, K, V (3 tokens, d = 1), causally masked: the outputs of "
                     f"each prefix equal the first rows of the full outputs ({'verified' if engine_ok else 'FAILED'})"),)
    checks, counter = [], None
    if trace is not None:
        p = trace.problem
        if p.n != p.m or "X_kv" in p.inputs:
            checks.append(Line("not checked here: the causal mask needs self-attention (keys = queries)"))
        else:
            for length, equal_rows in _prefix_check(p)[1]:
                ok &= equal_rows
                checks.append(Line(f"the first {length} token(s) alone, causally masked: outputs of rows "
                                   f"{', '.join(map(repr, p.tokens[:length]))} equal those of all {p.n} "
                                   f"tokens exactly" if equal_rows else f"prefix {length}: DIFFERENT"))
                if not equal_rows:
                    counter = counter or {"prefix": length}
            if p.mask_kind not in (None, "causal"):
                checks.append(Line("(the problem's own mask was replaced by the causal mask)"))
    return Proof("causal-prefix", ok,
                 Line("with a causal mask, appending tokens does not change earlier outputs "
                      "(why a KV cache is exact)"),
                 general, tuple(checks), counter)


def _prefix_check(p: Problem) -> tuple[bool, list[tuple[int, bool]]]:
    """Each prefix, causally masked, through the engine vs the full causal problem."""
    full = Trace(rebuild(p, mask="causal"))
    found = []
    for length in range(1, p.n):
        prefix = Trace(rebuild(p, rows=list(range(length)), mask="causal"))
        found.append((length, all(same(prefix.output[i, c], full.output[i, c])
                                  for i in range(length) for c in range(p.d_v))))
    return all(good for _, good in found), found


# ------------------------------------------------------ permutation-equivariance

def _symbolic_outputs(q, k, v) -> list[sympy.Expr]:
    outs = []
    for i in range(len(q)):
        w = softmax([q[i] * kj for kj in k])
        outs.append(sympy.Add(*[x * y for x, y in zip(w, v)]))
    return outs


def _reversed_check(trace: Trace) -> bool:
    """Reversed queries (and keys/values) through the engine give the reversed output rows."""
    p = trace.problem
    rows = list(reversed(range(p.n)))
    key_rows = rows if p.n == p.m and "X_kv" not in p.inputs else list(reversed(range(p.m)))
    other = Trace(rebuild(p, rows=rows, key_rows=key_rows))
    return all(same(other.output[a, c], trace.output[rows[a], c])
               for a in range(p.n) for c in range(p.d_v))


def permutation_equivariance(trace: Trace | None = None) -> Proof:
    """Permuting the tokens (no positions, the mask permuted with them) permutes the outputs."""
    q, k, v = (symbol_vector(x, 3) for x in "qkv")
    perm = [2, 0, 1]
    base = _symbolic_outputs(q, k, v)
    moved = _symbolic_outputs(*([x[i] for i in perm] for x in (q, k, v)))
    ok = all(moved[a] == base[perm[a]] for a in range(3))
    P_ = sym("P")
    general: tuple[Line, ...] = (Line("softmax of a row is a symmetric function of its keys (Σ does not care about order), "
                    "so permuting keys and values together changes nothing and permuting queries "
                    "permutes the output rows: ",
                    rel(fn("Attn", Seq((times(P_, sym("Q")), times(P_, sym("K")), times(P_, sym("V"))))), "=",
                        times(P_, fn("Attn", Seq((sym("Q"), sym("K"), sym("V")))))),
                    f".  SymPy, 3 symbolic tokens permuted by {perm}: "
                    f"{'output rows permuted exactly' if ok else 'MISMATCH'}"),)
    engine_ok = _reversed_check(symbolic_trace())
    ok &= engine_ok
    general += (Line("the engine on all-symbol Q, K, V (3 tokens): reversing the tokens reverses the output "
                     "rows identically, ", rel(fn("O", times(P_, sym("X"))), "≡", times(P_, fn("O", sym("X")))),
                     f" ({'verified' if engine_ok else 'FAILED'})"),)
    checks, counter = [], None
    if trace is not None:
        p = trace.problem
        rows = list(reversed(range(p.n)))
        good = _reversed_check(trace)
        ok &= good
        checks.append(Line(f"tokens reversed ({', '.join(p.tokens[i] for i in rows)}), the mask permuted "
                           f"with them: the output rows are the old ones reversed, exactly"
                           if good else "reversed tokens: outputs NOT permuted"))
        if p.mask_kind == "causal":
            checks.append(Line("note: the permuted causal mask is no longer causal — a causal mask is how "
                               "order enters attention without positions"))
        if not good:
            counter = {"permutation": rows}
    return Proof("permutation-equivariance", ok,
                 Line("without positions, permuting the tokens permutes the outputs the same way: ",
                      rel(fn("Attn", times(sym("P"), sym("X"))), "=", times(sym("P"), fn("Attn", sym("X"))))),
                 general, tuple(checks), counter)
