"""Facts about online softmax and KV-cache decoding.

``online-softmax-equals-softmax``: FlashAttention's block-by-block recurrence
(running maximum, rescale factors, running sums and outputs) ends in the plain
softmax weights and output, for every split of the keys into blocks.  In general:
a SymPy identity for two blocks on symbols (the running maxima m1, m2 are left as
free symbols: the identity holds for any of them, the maximum is chosen only so no
exponent is positive), and more blocks are the same step again with everything
seen so far as the first block.  On a problem: the recurrence run exactly for every
split of its keys (all 2^(m−1) of them for m ≤ 6, else the problem's own tiles or
blocks of 2), compared with the trace's weights and output.

``kv-cache-equals-causal-row``: a decode step (its query against the cache of the
keys and values of tokens 0..t) gives the weights and output of row t of full
causal attention: the causal mask sends the keys after t to weight e^(−∞) = 0.

Claimed figures (``Claims``: weights and/or output) are judged against the online
(or decoded) result at the precision they are written, so a figure computed
without rescaling is refused with a counterexample.
"""

from __future__ import annotations

from itertools import combinations

import sympy

from symattn.numbers.certify import certify
from symattn.numbers.compare import compare, equal
from symattn.facts.claims import Claims
from symattn.facts.proof import Line, Proof
from symattn.facts.softmax_facts import same
from symattn.facts.symbolic import is_zero
from symattn.trace.online import Online
from symattn.trace.trace import Trace

#: rows checked exactly on an instance, and the key count up to which every split is tried
MAX_CHECKED_ROWS = 8
ALL_SPLITS_UP_TO = 6


def _within(claimed, exact: sympy.Expr) -> bool:
    """A written figure agrees with an exact value at the precision it was written."""
    if claimed.half == 0:
        return equal(claimed.value, exact)
    return compare(abs(claimed.value - exact), claimed.half) <= 0


def _judge_claims(trace: Trace, claims: Claims | None, values, what: str,
                  checks: list[Line], counter: dict | None) -> tuple[bool, dict | None]:
    """Compare claimed weights/output with ``values(name, i, j)`` (the online or decoded result)."""
    ok = True
    if claims is None:
        return ok, counter
    for name in ("weights", "output"):
        if getattr(claims, name) is None:
            continue
        for i, row in enumerate(claims.entries(name)):
            exact_row = [values(name, i, j) for j in range(len(row))]
            if exact_row[0] is None:
                continue
            bad = [j for j, (c, e) in enumerate(zip(row, exact_row)) if not _within(c, e)]
            token = trace.problem.tokens[i]
            if not bad:
                checks.append(Line.written(f"claimed {name} row {token!r}: {', '.join(c.text for c in row)} agree "
                                   f"with {what} as written", rf"\hat{{{name[0].upper()}}}_{{{i}}} \checkmark"))
                continue
            ok = False
            j = bad[0]
            shown = str(certify(exact_row[j], 6))
            checks.append(Line.written(f"claimed {name}[{token}, {j}] = {row[j].text}, but {what} gives {shown}",
                               rf"\hat{{{name[0].upper()}}}_{{{i},{j}}} = {row[j].text} \ne {shown}"))
            if counter is None:
                counter = {"row": token, "step": name, "column": j, "claimed": row[j].text,
                           "exact": shown}
    return ok, counter


# ------------------------------------------------------------ online-softmax-equals-softmax

def _general_online() -> tuple[bool, tuple[Line, ...]]:
    x = sympy.symbols("x0:4", real=True)
    v = sympy.symbols("v0:4", real=True)
    m1, m2 = sympy.symbols("m1 m2", real=True)
    l1 = sympy.exp(x[0] - m1) + sympy.exp(x[1] - m1)
    o1 = v[0] * sympy.exp(x[0] - m1) + v[1] * sympy.exp(x[1] - m1)
    alpha = sympy.exp(m1 - m2)
    l2 = alpha * l1 + sympy.exp(x[2] - m2) + sympy.exp(x[3] - m2)
    o2 = alpha * o1 + v[2] * sympy.exp(x[2] - m2) + v[3] * sympy.exp(x[3] - m2)
    total = sympy.Add(*[sympy.exp(s) for s in x])
    ok_w = all(is_zero(sympy.exp(x[j] - m2) / l2 - sympy.exp(x[j]) / total) for j in range(4))
    ok_o = is_zero(o2 / l2 - sympy.Add(*[v[j] * sympy.exp(x[j]) for j in range(4)]) / total)
    # a sink σ: the state starts at m = σ, ℓ = 1, O = 0 (vLLM), or σ is folded in at the end
    # (gpt-oss): both end in the sink softmax e^(x_j)/(Σ e^(x_k) + e^σ)
    sigma = sympy.Symbol("sigma", real=True)
    with_sink = total + sympy.exp(sigma)
    l1s = sympy.exp(sigma - m1) + l1            # ℓ_(−1) = 1 rescaled by e^(σ − m1), then block 0
    l2s = alpha * l1s + sympy.exp(x[2] - m2) + sympy.exp(x[3] - m2)
    folded = l2 + sympy.exp(sigma - m2)
    ok_s = all(is_zero(sympy.exp(x[j] - m2) / l2s - sympy.exp(x[j]) / with_sink) for j in range(4)) \
        and is_zero(o2 / l2s - sympy.Add(*[v[j] * sympy.exp(x[j]) for j in range(4)]) / with_sink) \
        and is_zero(l2s - folded)
    ok = ok_w and ok_o and ok_s
    lines = (
        Line.written("two blocks {x0, x1} | {x2, x3} with running maxima m1, m2 (any reals): "
             "ℓ1 = e^(x0−m1) + e^(x1−m1), ℓ2 = e^(m1−m2)·ℓ1 + e^(x2−m2) + e^(x3−m2), "
             "O2 likewise with v; then e^(x_j−m2)/ℓ2 = softmax(x)_j and O2/ℓ2 = Σ_j softmax(x)_j v_j "
             f"(SymPy: {'verified' if ok else 'FAILED'})",
             r"\frac{e^{x_j - m_2}}{e^{m_1 - m_2}\ell_1 + \sum_{j \in 2} e^{x_j - m_2}} = "
             r"\frac{e^{x_j}}{\sum_k e^{x_k}}"),
        Line.written("with a sink logit σ: starting the state at m = σ, ℓ = 1, O = 0 (so block 0 rescales "
             "by e^(σ − m1)) gives ℓ2 = e^(m1−m2)·(e^(σ−m1) + ℓ1) + … = ℓ2 + e^(σ − m2), the same "
             "denominator as folding e^(σ − m_last) in at the end; then e^(x_j−m2)/ℓ2 = "
             "e^(x_j)/(Σ_k e^(x_k) + e^σ), the sink softmax, and O2/ℓ2 its output "
             f"(SymPy: {'verified' if ok_s else 'FAILED'})",
             r"\frac{e^{x_j - m_2}}{e^{m_1 - m_2}(e^{\sigma - m_1} + \ell_1) + \sum_{j \in 2} e^{x_j - m_2}}"
             r" = \frac{e^{x_j}}{\sum_k e^{x_k} + e^{\sigma}}"),
        Line.written("more blocks: block b + 1 is the same step with blocks 0..b as the first block, so by "
             "induction every split gives the softmax; masked keys are left out of every sum "
             "(e^(−∞) = 0) and a block with nothing seen yet contributes ℓ = 0, O = 0",
             r"\ell_{b+1} = e^{m_b - m_{b+1}} \ell_b + \sum_{j \in b+1} e^{x_j - m_{b+1}}"),
    )
    return ok, lines


def _splits(m: int, own: tuple[tuple[int, int], ...] | None) -> list[tuple[tuple[int, int], ...]]:
    """Every split of m keys into blocks (m ≤ ALL_SPLITS_UP_TO), else the problem's own."""
    if m <= ALL_SPLITS_UP_TO:
        out = []
        for k in range(m):
            for points in combinations(range(1, m), k):
                edges = [0, *points, m]
                out.append(tuple(zip(edges[:-1], edges[1:])))
        return out
    if own is not None:
        return [own]
    return [tuple((s, min(s + 2, m)) for s in range(0, m, 2))]


def _split_text(blocks: tuple[tuple[int, int], ...], keys: tuple[str, ...]) -> str:
    return " | ".join(", ".join(keys[a:b]) for a, b in blocks)


def online_softmax_equals_softmax(trace: Trace | None = None, claims: Claims | None = None, *,
                                  rescaled: bool = True) -> Proof:
    """The online recurrence ends in the plain weights and output, for every block split.
    (``rescaled=False`` runs the recurrence without its rescale factors: the mistake
    ``online-no-rescale``, which the instance check then refutes.)"""
    ok, general = _general_online()
    checks: list[Line] = []
    counter = None
    if trace is not None and trace.problem.free_symbols:
        checks.append(Line.written("the problem has symbols: the running maxima are not decided, so only the "
                           "general proof applies", r"\text{symbols: general proof only}"))
        trace = None
    online = None
    if trace is not None:
        p = trace.problem
        splits = _splits(p.m, p.tiles)
        rows = range(min(p.n, MAX_CHECKED_ROWS))
        bad_splits = []
        for blocks in splits:
            online = Online(trace, blocks)
            for i in rows:
                sums, outs = online.recurrence(i, rescaled=rescaled)
                last = online.states(i)[-1].top
                weights_ok = all(same(online.term(i, j, last) / sums[-1] if trace.is_allowed(i, j)
                                      else sympy.S.Zero, trace.weights[i, j]) for j in range(p.m))
                output_ok = all(same(outs[-1][c] / sums[-1], trace.output[i, c]) for c in range(p.d_v))
                if not (weights_ok and output_ok):
                    ok = False
                    bad_splits.append(blocks)
                    if counter is None:
                        counter = {"row": p.tokens[i], "blocks": _split_text(blocks, p.key_tokens),
                                   "step": "weights" if not weights_ok else "output"}
                    break
        count = len(splits)
        checks.append(Line.written(f"{'every one of the ' + str(count) + ' splits' if count > 1 else 'the split'} "
                           f"of the {p.m} keys into blocks, rows {', '.join(repr(p.tokens[i]) for i in rows)}: "
                           f"the recurrence{'' if rescaled else ' WITHOUT rescaling'} ends in the plain "
                           f"weights and output "
                           f"({'exactly' if not bad_splits else 'NOT equal for ' + str(len(bad_splits)) + ' split(s), first ' + _split_text(bad_splits[0], p.key_tokens)})",
                           rf"\frac{{O_{{\text{{last}}}}}}{{\ell_{{\text{{last}}}}}} = A V \text{{ for {count} split(s)}}"))
        if p.tiles is not None and getattr(trace, "online", None) is not None:
            own = trace.online
            sums_ok = all(same(own.recurrence(i, rescaled=rescaled)[0][b], trace.running_sum[i, b])
                          for i in rows for b in range(len(p.tiles)))
            ok &= sums_ok
            checks.append(Line.written(f"this problem's tiles ({_split_text(p.tiles, p.key_tokens)}): every "
                               "running_sum of the recurrence equals Σ over the keys seen of "
                               f"e^({trace.logit_step} − running_max)"
                               f"{' plus the sink term e^(s − running_max)' if p.sink is not None else ''} "
                               f"({'exactly' if sums_ok else 'NOT equal'})",
                               r"\ell_b = \sum_{j \le b} e^{x_j - m_b}"))
            if not sums_ok and counter is None:
                counter = {"step": "running_sum"}
        source = trace.online if getattr(trace, "online", None) is not None else Online(trace, splits[-1])

        def values(name: str, i: int, j: int) -> sympy.Expr | None:
            if i >= p.n:
                return None
            sums, outs = source.recurrence(i)
            if name == "weights":
                return source.term(i, j, source.states(i)[-1].top) / sums[-1] \
                    if trace.is_allowed(i, j) else sympy.S.Zero
            return outs[-1][j] / sums[-1]

        claims_ok, counter = _judge_claims(trace, claims, values, "online softmax", checks, counter)
        ok &= claims_ok
    return Proof("online-softmax-equals-softmax", ok,
                 Line.written("online softmax (running maximum, rescaled running sums and outputs, block by "
                      "block) gives the softmax weights and output, for every split of the keys",
                      r"\frac{O_{\text{last}}}{\ell_{\text{last}}} = \operatorname{softmax}(S) V"),
                 general, tuple(checks), counter)


# ------------------------------------------------------------ kv-cache-equals-causal-row

def _general_decode() -> tuple[bool, tuple[Line, ...]]:
    s = sympy.symbols("s0:3", real=True)
    v = sympy.symbols("v0:3", real=True)
    # row t = 1 of causal attention over 3 keys: key 2 is masked (e^(−∞) = 0)
    masked = [sympy.exp(s[0]), sympy.exp(s[1]), sympy.S.Zero]
    total = sympy.Add(*masked)
    cached = [sympy.exp(s[0]), sympy.exp(s[1])]
    ctotal = sympy.Add(*cached)
    ok = all(is_zero(masked[j] / total - cached[j] / ctotal) for j in range(2)) and is_zero(
        sympy.Add(*[v[j] * masked[j] for j in range(3)]) / total
        - sympy.Add(*[v[j] * cached[j] for j in range(2)]) / ctotal)
    return ok, (Line.written("row t of causal attention has e^(−∞) = 0 for every key after t, so its softmax "
                     "and its weighted sum of values are those over keys 0..t alone, the cache (SymPy "
                     f"on s0..s2, t = 1: {'verified' if ok else 'FAILED'})",
                     r"\frac{e^{s_j}}{\sum_{k \le t} e^{s_k} + \sum_{k > t} e^{-\infty}} = "
                     r"\frac{e^{s_j}}{\sum_{k \le t} e^{s_k}}"),
                Line.written("the cache rows are k_j = x_j W_k and v_j = x_j W_v, the rows of K and V: appending "
                     "row t computes nothing the full projection would not",
                     r"K^{\text{cache}}_t = K_{0..t}, \; V^{\text{cache}}_t = V_{0..t}"),
                Line.written("with a sliding window of W keys (Mistral's rolling buffer) the same argument runs "
                     "on the band: row t of windowed attention has e^(−∞) = 0 for every key outside "
                     "t − W < j ≤ t, which are exactly the keys the buffer has evicted, so the buffer "
                     "of the last min(t + 1, W) keys gives row t; ALiBi's bias, a soft-cap and a sink "
                     "term depend only on (t, j) and the step's own logits, the same in both",
                     r"K^{\text{cache}}_t = K_{\max(0, t-W+1)..t}"))


def kv_cache_equals_causal_row(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """A decode step's weights and output equal row t of full causal attention."""
    ok, general = _general_decode()
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.prefill is None:
        checks.append(Line.written("this problem has no decode key: nothing to check on it",
                           r"\text{no decode}"))
    elif trace is not None and p is not None and p.prefill is not None:
        reference = trace  # decode implies its mask (causal, or the window): the plain steps are the reference
        kind = "causal" if p.window is None else f"sliding-window (W = {p.window[0]})"
        prefill = p.prefill
        for t in range(prefill, p.n):
            w, o = trace.step(f"decode_{t}_weights"), trace.step(f"decode_{t}_output")
            cache = trace.decode.cache(t)
            row_ok = all(same(w[0, k], reference.weights[t, j]) for k, j in enumerate(cache)) and all(
                reference.weights[t, j] == 0 for j in range(p.n) if j not in cache) and all(
                same(o[0, c], reference.output[t, c]) for c in range(p.d_v))
            ok &= row_ok
            held = (f"cache of {len(cache)}" if p.window is None else
                    f"rolling cache of {len(cache)}: {', '.join(p.tokens[j] for j in cache)}")
            checks.append(Line.written(f"decode step {t} ({p.tokens[t]!r}, {held}): its weights and "
                               f"output equal row {p.tokens[t]!r} of {kind} attention "
                               f"({'exactly' if row_ok else 'NOT equal'})",
                               rf"\operatorname{{softmax}}(q_{t} K_{{{cache[0]}..{t}}}^\top) = "
                               rf"A^{{\text{{{'causal' if p.window is None else 'window'}}}}}_{{{t}}}"))
            if not row_ok and counter is None:
                counter = {"row": p.tokens[t], "step": t}

        def values(name: str, i: int, j: int) -> sympy.Expr | None:
            if i < prefill or i >= p.n:
                return None
            if name == "weights":
                cache = trace.decode.cache(i)
                return trace.step(f"decode_{i}_weights")[0, cache.index(j)] if j in cache else sympy.S.Zero
            return trace.step(f"decode_{i}_output")[0, j]

        claims_ok, counter = _judge_claims(trace, claims, values, "the decode step", checks, counter)
        ok &= claims_ok
    return Proof("kv-cache-equals-causal-row", ok,
                 Line.written("a KV-cache decode step (the new query against the cached keys and values) gives "
                      "the last row of full causal attention (with a sliding window: of windowed "
                      "attention, the cache a rolling buffer of the last W keys)",
                      r"\operatorname{softmax}\!\left(\tfrac{q_t K_{0..t}^\top}{\sqrt{d_k}}\right) V_{0..t}"
                      r" = \left(\operatorname{softmax}\!\left(\tfrac{QK^\top}{\sqrt{d_k}} + M\right) V\right)_t"),
                 general, tuple(checks), counter)
