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
from symattn.facts import notation as nt
from symattn.facts.claims import Claims
from symattn.facts.proof import Line, Proof
from symattn.notation.nodes import Dots, Factor, Group, Math, Neg, Seq, Sub, Sym
from symattn.facts.softmax_facts import same
from symattn.facts.symbolic import is_zero
from symattn.trace.online import Online
from symattn.trace.trace import Trace

#: rows checked exactly on an instance, and the key count up to which every split is tried
MAX_CHECKED_ROWS = 8
ALL_SPLITS_UP_TO = 6


_NEG_INF = Neg(Sym("∞"))
_MASKED = nt.rel(nt.e(_NEG_INF), "=", nt.zero)       # e^(−∞) = 0: a masked key adds nothing
_SINK = nt.sym("σ")


def _x(j: int | str) -> Math:
    return nt.sym("x", j)


def _m(k: int | str) -> Math:
    return nt.sym("m", k)


def _O(k: int) -> Math:
    return nt.sym("O", k)


def _ell(k: int | str | None = None, *, sink: bool = False) -> Math:
    """ℓ_k, a running sum (ℓ̃ with the sink's term)."""
    return Sym("ℓ", None if k is None else str(k), "tilde" if sink else None)


def _ex(a: Math, b: Math) -> Math:
    """e^(a − b): a term rescaled by a running maximum."""
    return nt.e(nt.minus(a, b))


def _softmax_j() -> Math:
    return Sub(nt.fn("softmax", nt.sym("x")), (nt.sym("j"),))


def _last() -> Math:
    """O_last / ℓ_last: the recurrence's end."""
    return nt.frac(nt.sym("O", "last"), _ell("last"))


def _decoded() -> Math:
    """softmax(q_t·K_(0..t)ᵀ / √d_k)·V_(0..t) = row t of softmax(Q·Kᵀ / √d_k + M)·V."""
    root = nt.root(nt.sym("d_k"))
    step = nt.times(nt.fn("softmax", nt.frac(nt.dot(nt.sym("q", "t"), nt.T(nt.sym("K", "0..t"))), root)),
                    nt.sym("V", "0..t"))
    full = nt.times(nt.fn("softmax", nt.plus(nt.frac(nt.dot(nt.sym("Q"), nt.T(nt.sym("K"))), root), nt.sym("M"))),
                    nt.sym("V"))
    return nt.rel(step, "=", Sub(Group(full), (nt.sym("t"),)))


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
                checks.append(Line(f"claimed {name} row {token!r}: {', '.join(c.text for c in row)} agree "
                                   f"with {what} as written"))
                continue
            ok = False
            j = bad[0]
            shown = str(certify(exact_row[j], 6))
            checks.append(Line(f"claimed {name}[{token}, {j}] = {row[j].text}, but {what} gives {shown}"))
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
        Line("two blocks {x0, x1} | {x2, x3} with running maxima m1, m2 (any reals): ",
             nt.rel(_ell(1), "=", nt.plus(_ex(_x(0), _m(1)), _ex(_x(1), _m(1)))), ", ",
             nt.rel(_ell(2), "=", nt.plus(nt.times(_ex(_m(1), _m(2)), _ell(1)), _ex(_x(2), _m(2)),
                                          _ex(_x(3), _m(2)))),
             ", ", _O(2), " likewise with v; then ", nt.rel(nt.frac(_ex(_x("j"), _m(2)), _ell(2)), "=", _softmax_j()),
             " and ", nt.rel(nt.frac(_O(2), _ell(2)), "=", nt.sigma(nt.times(_softmax_j(), nt.sym("v", "j")))),
             f" (SymPy: {'verified' if ok else 'FAILED'})"),
        Line("with a sink logit σ: starting the state at ", nt.rel(nt.sym("m"), "=", _SINK), ", ",
             nt.rel(_ell(), "=", nt.one), ", ", nt.rel(nt.sym("O"), "=", nt.zero), " (so block 0 rescales by ",
             _ex(_SINK, _m(1)), ") gives ",
             nt.rel(_ell(2, sink=True), "=",
                    nt.plus(nt.times(_ex(_m(1), _m(2)), Factor(nt.plus(_ex(_SINK, _m(1)), _ell(1)))), Dots()),
                    "=", nt.plus(_ell(2), _ex(_SINK, _m(2)))),
             ", the same denominator as folding ", _ex(_SINK, nt.sym("m", "last")), " in at the end; then ",
             nt.rel(nt.frac(_ex(_x("j"), _m(2)), _ell(2, sink=True)), "=",
                    nt.frac(nt.e(_x("j")), nt.plus(nt.sigma(nt.e(_x("k")), "k"), nt.e(_SINK)))),
             ", the sink softmax, and ", nt.frac(_O(2), _ell(2, sink=True)),
             f" its output (SymPy: {'verified' if ok_s else 'FAILED'})"),
        Line("more blocks: block b + 1 is the same step with blocks 0..b as the first block, so by "
             "induction every split gives the softmax; masked keys are left out of every sum (", _MASKED,
             ") and a block with nothing seen yet contributes ", nt.rel(_ell(), "=", nt.zero), ", ",
             nt.rel(nt.sym("O"), "=", nt.zero)),
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
        checks.append(Line("the problem has symbols: the running maxima are not decided, so only the "
                           "general proof applies"))
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
        checks.append(Line(f"{'every one of the ' + str(count) + ' splits' if count > 1 else 'the split'} "
                           f"of the {p.m} keys into blocks, rows {', '.join(repr(p.tokens[i]) for i in rows)}: "
                           f"the recurrence{'' if rescaled else ' WITHOUT rescaling'} ends in the plain "
                           "weights and output, ", nt.rel(_last(), "=", nt.times(nt.sym("A"), nt.sym("V"))),
                           f" ({'exactly' if not bad_splits else 'NOT equal for ' + str(len(bad_splits)) + ' split(s), first ' + _split_text(bad_splits[0], p.key_tokens)})"))
        if p.tiles is not None and getattr(trace, "online", None) is not None:
            own = trace.online
            sums_ok = all(same(own.recurrence(i, rescaled=rescaled)[0][b], trace.running_sum[i, b])
                          for i in rows for b in range(len(p.tiles)))
            ok &= sums_ok
            checks.append(Line(f"this problem's tiles ({_split_text(p.tiles, p.key_tokens)}): every "
                               "running_sum of the recurrence equals ",
                               nt.rel(_ell("b"), "=", nt.sigma(_ex(_x("j"), _m("b")), "j")),
                               *((" plus the sink term ", _ex(_SINK, _m("b"))) if p.sink is not None else ()),
                               f" over the keys j seen through block b, x the {trace.logit_step} logits and m "
                               "the running_max "
                               f"({'exactly' if sums_ok else 'NOT equal'})"))
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
                 Line("online softmax (running maximum, rescaled running sums and outputs, block by "
                      "block) gives the softmax weights and output, for every split of the keys: ",
                      nt.rel(_last(), "=", nt.times(nt.fn("softmax", nt.sym("S")), nt.sym("V")))),
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
    t = nt.sym("t")
    score_j, scores_to_t = nt.e(nt.s("j")), nt.sigma(nt.e(nt.s("k")), "k≤t")
    return ok, (Line("row t of causal attention has ", _MASKED, " for every key after t, so its softmax "
                     "and its weighted sum of values are those over keys 0..t alone, the cache: ",
                     nt.rel(nt.frac(score_j, nt.plus(scores_to_t, nt.sigma(nt.e(_NEG_INF), "k>t"))), "=",
                            nt.frac(score_j, scores_to_t)),
                     f" (SymPy on s0..s2, t = 1: {'verified' if ok else 'FAILED'})"),
                Line("the cache rows are ", nt.rel(nt.sym("k", "j"), "=", nt.times(_x("j"), nt.sym("W", "k"))),
                     " and ", nt.rel(nt.sym("v", "j"), "=", nt.times(_x("j"), nt.sym("W", "v"))),
                     ", the rows of K and V: appending row t computes nothing the full projection would not"),
                Line("with a sliding window of W keys (Mistral's rolling buffer) the same argument runs "
                     "on the band: row t of windowed attention has ", _MASKED, " for every key outside ",
                     nt.rel(nt.minus(t, nt.sym("W")), "<", nt.sym("j"), "≤", t),
                     ", which are exactly the keys the buffer has evicted, so the buffer of the last ",
                     nt.fn("min", Seq((nt.plus(t, nt.one), nt.sym("W")))), " keys gives row t; ALiBi's bias, "
                     "a soft-cap and a sink term depend only on (t, j) and the step's own logits, the same in both"))


def kv_cache_equals_causal_row(trace: Trace | None = None, claims: Claims | None = None) -> Proof:
    """A decode step's weights and output equal row t of full causal attention."""
    ok, general = _general_decode()
    checks: list[Line] = []
    counter = None
    p = trace.problem if trace is not None else None
    if p is not None and p.prefill is None:
        checks.append(Line("this problem has no decode key: nothing to check on it"))
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
            checks.append(Line(f"decode step {t} ({p.tokens[t]!r}, {held}): its weights and "
                               f"output equal row {p.tokens[t]!r} of {kind} attention "
                               f"({'exactly' if row_ok else 'NOT equal'})"))
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
                 Line("a KV-cache decode step (the new query against the cached keys and values) gives "
                      "the last row of full causal attention (with a sliding window: of windowed "
                      "attention, the cache a rolling buffer of the last W keys): ", _decoded()),
                 general, tuple(checks), counter)
