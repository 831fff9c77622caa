"""Facts about attention variants: a sliding window is a mask; the sink's three forms agree.

As everywhere in facts/, the general argument is an identity SymPy verifies on
symbols, and the instance check rebuilds variant problems (causal attention,
the problem without its sink, the sink as one more key) and runs them through
the same engine, comparing exactly.
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.facts.proof import Line, Proof
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


# ---------------------------------------------------------------- window-is-a-mask

def window_is_a_mask(trace: Trace | None = None) -> Proof:
    """A sliding window is causal attention restricted to the band i − W < j ≤ i and
    renormalised: masking more keys is the same as renormalising over the kept ones."""
    s = sympy.symbols("s0:4", real=True)
    full, kept = _softmax(list(s)), _softmax([s[1], s[2]])
    band_total = full[1] + full[2]
    ok = all(is_zero(kept[k] - full[k + 1] / band_total) for k in range(2))
    general = (Line.written("softmax over the kept keys S ⊆ T equals the softmax over T restricted to S and "
                    "renormalised: e^{s_j}/Σ_S e^{s_k} = (e^{s_j}/Σ_T)/(Σ_S e^{s_k}/Σ_T) "
                    f"(SymPy on s0..s3, S = {{1, 2}}: {'verified' if ok else 'FAILED'})",
                    r"\frac{e^{s_j}}{\sum_{S} e^{s_k}} = "
                    r"\frac{e^{s_j}/\sum_T e^{s_k}}{\sum_{S} e^{s_k}/\sum_T e^{s_k}}"),
               Line.written("the band i − W < j ≤ i lies inside the causal set j ≤ i (and |i − j| < W is "
                    "the whole sequence's band when not causal), so the window is that restriction",
                    r"\{j : i - W < j \le i\} \subseteq \{j : j \le i\}"))
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.window is None:
        checks.append(Line.written("this problem has no sliding window: nothing to check on it",
                           r"\text{no sliding window}"))
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
            checks.append(Line.written(f"row {p.tokens[i]!r}: the window's weights equal the "
                               f"{'causal' if causal else 'unmasked'} weights on keys "
                               f"{', '.join(p.key_tokens[j] for j in band)}, renormalised{with_sink} "
                               f"({'exactly' if row_ok else 'NOT equal'})",
                               rf"\text{{row {i}: }} A^{{W}}_{{ij}} = A_{{ij}} / \sum_{{k \in "
                               rf"\text{{band}}}} A_{{ik}}"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[i]}
    return Proof("window-is-a-mask", ok,
                 Line.written("a sliding window of W keys is causal attention with the band mask "
                      "i − W < j ≤ i: the causal weights restricted to the band and renormalised",
                      r"A^{W} = \operatorname{renormalise}(A^{\text{causal}} \odot \text{band})"),
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
    general = (Line.written("for scores s0, s1, s2 and a sink σ: softmax([s, σ]) without its last entry = "
                    "e^{s_j}/(Σ_k e^{s_k} + e^σ) = softmax(s)_j / (1 + e^{σ − lse(s)}) "
                    f"(SymPy: {'verified' if ok else 'FAILED'})",
                    r"\operatorname{softmax}([s, \sigma])_j = \frac{e^{s_j}}{\sum_k e^{s_k} + e^\sigma}"
                    r" = \frac{\operatorname{softmax}(s)_j}{1 + e^{\sigma - \operatorname{lse}(s)}}"),)
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.sink is None:
        checks.append(Line.written("this problem has no sink: nothing to check on it", r"\text{no sink}"))
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
            checks.append(Line.written(f"row {p.tokens[i]!r}: the weights equal the plain softmax renormalised "
                               f"by 1/(1 + e^(sink − lse)) ({'exactly' if row_ok else 'NOT equal'})",
                               rf"\text{{row {i}: }} A_{{ij}} = \frac{{A^{{0}}_{{ij}}}}"
                               rf"{{1 + e^{{\sigma - \operatorname{{lse}}_i}}}}"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[i]}
    return Proof("sink-forms-agree", ok,
                 Line.written("with a sink logit, concatenate-and-drop, + e^σ in the denominator and "
                      "log-sum-exp renormalisation give the same weights",
                      r"\operatorname{softmax}([s, \sigma])_{:n} = \frac{e^{s}}{\sum e^{s} + e^{\sigma}}"),
                 general, tuple(checks), counter)
