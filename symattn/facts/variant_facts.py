"""Facts about attention variants: a sliding window is a mask; the sink's three forms agree.

As everywhere in facts/, the general argument is an identity SymPy verifies on
symbols, and the instance check rebuilds variant problems (causal attention,
the problem without its sink, the sink as one more key) and runs them through
the same engine, comparing exactly.
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.facts.notation import e, entry, fn, frac, minus, one, p as prob, rel, row, s as score, sigma, sup, sym
from symattn.facts.proof import Line, Proof
from symattn.notation.nodes import Chain, Int, Math, SigmaSum, Sub, Sum
from symattn.facts.softmax_facts import same
from symattn.facts.symbolic import is_zero
from symattn.problem.keys.mask import window_allows
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

#: rows checked exactly on an instance (each row is a handful of SymPy identities)
MAX_CHECKED_ROWS = 8


def _rebuild(p: Problem, **changes: object) -> Problem:
    """The same inputs with some keys changed (the sink and mask kept unless changed)."""
    keys: dict[str, Any] = {k: m.to_sympy() for k, m in p.inputs.items()}   # Problem checks them
    keys.update(tokens=list(p.tokens),
                key_tokens=None if p.key_tokens == p.tokens else list(p.key_tokens),
                scale=p.scale, mask=p.mask_value, **p.variant_keys, rope=p.rope)
    keys.update(changes)
    return Problem(**keys)


def _softmax(scores: list[sympy.Expr]) -> list[sympy.Expr]:
    total = sympy.Add(*[sympy.exp(x) for x in scores])
    return [sympy.exp(x) / total for x in scores]


def _band() -> Chain:
    """i − W < j ≤ i, the window's band."""
    return rel(minus(sym("i"), sym("W")), "<", sym("j"), "≤", sym("i"))


def _at(x: Math, index: str) -> Sub:
    """x_j: one entry of a vector-valued formula, softmax(s)_j."""
    return Sub(x, (sym(index),))


def _windowed(i: int) -> Sub:
    """A^W_ij: row i's weights under the window."""
    return Sub(sup(sym("A"), sym("W")), (Int(i), sym("j")))


# ---------------------------------------------------------------- window-is-a-mask

def window_is_a_mask(trace: Trace | None = None) -> Proof:
    """A sliding window is causal attention restricted to the band i − W < j ≤ i and
    renormalised: masking more keys is the same as renormalising over the kept ones."""
    s = sympy.symbols("s0:4", real=True)
    full, kept = _softmax(list(s)), _softmax([s[1], s[2]])
    band_total = full[1] + full[2]
    ok = all(is_zero(kept[k] - full[k + 1] / band_total) for k in range(2))
    general = (Line("softmax over the kept keys S (a subset of T) equals the softmax over T restricted to S and "
                    "renormalised: ", rel(frac(e(score("j")), sigma(e(score("k")), "S")), "=",
                                          frac(prob("j"), sigma(prob("k"), "S"))),
                    " with ", rel(prob("j"), "=", frac(e(score("j")), sigma(e(score("k")), "T"))),
                    f" (SymPy on s0..s3, S = {{1, 2}}: {'verified' if ok else 'FAILED'})"),
               Line("the band ", _band(), " lies inside the causal set ", rel(sym("j"), "≤", sym("i")),
                    " (and ", rel(fn("abs", minus(sym("i"), sym("j"))), "<", sym("W")), " is "
                    "the whole sequence's band when not causal), so the window is that restriction"))
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.window is None:
        checks.append(Line("this problem has no sliding window: nothing to check on it"))
    elif trace is not None and p is not None and p.window is not None:
        width, causal = p.window
        wider = _rebuild(p, mask="causal" if causal else None)
        outer = Trace(wider)
        with_sink = " (with the sink's share)" if p.sink is not None else ""
        for i in range(min(p.n, MAX_CHECKED_ROWS)):
            band = [j for j in range(p.m) if window_allows(i, j, width, causal)]
            total = sympy.Add(*[outer.weights[i, k] for k in band])
            if p.sink is not None:   # the sink keeps its share of the row: 1 − Σ_k A_ik
                total += 1 - sympy.Add(*[outer.weights[i, k] for k in outer.allowed(i)])
            row_ok = all(same(trace.weights[i, j], outer.weights[i, j] / total if j in band else 0)
                         for j in range(p.m))
            ok &= row_ok
            checks.append(Line(f"row {p.tokens[i]!r}: the window's weights equal the "
                               f"{'causal' if causal else 'unmasked'} weights on keys "
                               f"{', '.join(p.key_tokens[j] for j in band)}, renormalised{with_sink}, ",
                               rel(_windowed(i), "=", frac(entry("A", i, "j"), sigma(entry("A", i, "k"), "k∈band"))),
                               f" ({'exactly' if row_ok else 'NOT equal'})"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[i]}
    return Proof("window-is-a-mask", ok,
                 Line("a sliding window of W keys is causal attention with the band mask ", _band(),
                      ": the causal weights restricted to the band and renormalised"),
                 general, tuple(checks), counter)


# ---------------------------------------------------------------- sink-forms-agree

def sink_forms_agree(trace: Trace | None = None) -> Proof:
    """Three forms of softmax with a sink logit σ give the same weights: append σ as a column,
    softmax, drop it; add e^σ to every denominator; renormalise the plain softmax by
    1/(1 + e^(σ − lse))."""
    s = sympy.symbols("s0:3", real=True)
    sigma = sympy.Symbol("sigma", real=True)
    dropped = _softmax([*s, sigma])[:3]
    total = sympy.Add(*[sympy.exp(x) for x in s])
    plus = [sympy.exp(x) / (total + sympy.exp(sigma)) for x in s]
    lse = sympy.log(total)
    renorm = [w / (1 + sympy.exp(sigma - lse)) for w in _softmax(list(s))]
    ok = all(is_zero(a - b) and is_zero(a - c) for a, b, c in zip(dropped, plus, renorm))
    sink = sym("σ")
    general = (Line("for scores s0, s1, s2 and a sink σ, the first entries of softmax([s, σ]): ",
                    rel(_at(fn("softmax", row([score(), sink])), "j"), "=",
                        frac(e(score("j")), Sum((SigmaSum(e(score("k")), "k"), e(sink)))), "=",
                        frac(_at(fn("softmax", score()), "j"), Sum((one, e(minus(sink, fn("lse", score()))))))),
                    f" (SymPy: {'verified' if ok else 'FAILED'})"),)
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.sink is None:
        checks.append(Line("this problem has no sink: nothing to check on it"))
    elif trace is not None and p is not None and p.sink is not None:
        plain = Trace(_rebuild(p, sink=None))
        # the logits the softmax takes: the scaled scores, or after ALiBi's bias and the soft-cap
        logits = trace.step(trace.logit_step)
        for i in range(min(p.n, MAX_CHECKED_ROWS)):
            keys = trace.allowed(i)
            # e^(σ − lse_i) written as e^σ / Σ_k e^(x_k): the same number, with no logarithm
            # for the exact zero test to see through
            sink_share = sympy.exp(p.sink) / sympy.Add(*[sympy.exp(logits[i, k]) for k in keys])
            row_ok = all(same(trace.weights[i, j], plain.weights[i, j] / (1 + sink_share)
                              if j in keys else 0) for j in range(p.m))
            ok &= row_ok
            checks.append(Line(f"row {p.tokens[i]!r}: the weights equal the plain softmax renormalised by ",
                               frac(one, Sum((one, e(minus(sym("σ"), sym("lse", i)))))),
                               f" ({'exactly' if row_ok else 'NOT equal'})"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[i]}
    return Proof("sink-forms-agree", ok,
                 Line("with a sink logit, concatenate-and-drop, + ", e(sym("σ")), " in the denominator and "
                      "log-sum-exp renormalisation give the same weights"),
                 general, tuple(checks), counter)
