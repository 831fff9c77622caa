"""The document's sections for online softmax (tiles) and KV-cache decoding (decode).

Built from the Trace's public API like the rest of the derivation
(``document.build``): the online section shows the running maximum, rescale
factors, running sums and outputs, then works one row block by block with its
numbers, as the lesson works the 'cats' row with the max-subtraction trick; the
decode section shows each decode step (cache, scores, weights, output) beside the
no-cache reference and the work counts.  Every number is a certified decimal.
"""

from __future__ import annotations


import sympy

from symattn.document import handforms as hf
from symattn.document.blocks import (
    Approx, Block, Chain, Exact, Exp, Frac, Int, Math, Neg, Note, Product, Row, Section, Sub,
    Sum, Sym, Words, elide,
)
from symattn.document.build.section import SectionBuilder
from symattn.trace.online import SINK
from symattn.trace.steps import spec

SHOWN_DECODE_STEPS = 3     # more decode steps (or running outputs) than this: the first two and the last


def variant_sections(builder: SectionBuilder) -> list[Section]:
    """The sections a variant adds after the output (none for a plain problem)."""
    t = builder.t
    out = []
    if "running_max" in t.step_names:
        out.append(online_section(builder))
    if any(name.startswith("decode_") for name in t.step_names):
        out.append(decode_section(builder))
    return out


# ---------------------------------------------------------------- online softmax

def _blocks(t) -> list[tuple[int, ...]]:
    """The key indices of each block (the problem's tiles)."""
    return [tuple(range(a, b)) for a, b in t.problem.tiles]


def _keys_text(t, keys) -> str:
    return ", ".join(t.problem.key_tokens[j] for j in keys)


def _value_form(t, i: int, j: int) -> Math:
    """x_j as written: key j's logit (2/√3, 3/2 − 1/2, 2·tanh(…)), or the sink logit."""
    return hf.number(t.problem.sink) if j == SINK else hf.logit(t, i, j)


def _e(t, i: int, j: int, k: int) -> Math:
    """e^(x_j − x_k) as a person writes it: e^(−8/√3), 1 for e^0 (either may be the sink)."""
    p = t.problem
    if j == k:
        return Int(1)
    if t.logit_step == "scaled" and SINK not in (j, k):
        scores = t.step("scores")
        form = hf.scaled(t, scores[i, j] - scores[i, k])
        return Int(1) if form == Int(0) else Exp(form)
    value = t.online.exponent(i, j, k)
    if value == 0:
        return Int(1)
    if value.is_Rational:
        return Exp(hf.number(value))
    if p.softcap is None and p.alibi is not None and SINK not in (j, k):
        scores = t.step("scores")
        bias = t.step("bias")[i, j] - t.step("bias")[i, k]
        form = hf.scaled(t, scores[i, j] - scores[i, k])
        return Exp(form if bias == 0 else Sum((form, hf.number(bias))) if form != Int(0)
                   else hf.number(bias))
    first = _value_form(t, i, j)
    return Exp(Neg(_value_form(t, i, k)) if first == Int(0) else Sum((first, Neg(_value_form(t, i, k)))))


def online_section(b: SectionBuilder) -> Section:
    t, p = b.t, b.p
    blocks = _blocks(t)
    split = " | ".join(_keys_text(t, keys) for keys in blocks)
    children: list[Block] = [Note((
        f"Online softmax (FlashAttention) reads the keys in {len(blocks)} blocks: {split}. Each row keeps a "
        "running maximum m, a running sum l and a running output O. A block that raises the maximum first "
        "multiplies l and O by ", Exp(Sum((Sym("m", "old"), Neg(Sym("m", "new"))))),
        " (the rescale factor), then adds its own keys' exponentials against the new maximum. After the last "
        "block, O / l is the output and e^(x − m) / l are the weights, exactly (fact "
        "online-softmax-equals-softmax).", *_variant_words(t)))]

    def running_max(i: int, k: int) -> Math:      # the maximum as the lesson writes it: 12/√3
        best = t.online.states(i)[k].best
        return Exact(sympy.S.NegativeInfinity) if best is None else _value_form(t, i, best)

    # soft-capped exponents (e^(c·tanh(x/c) − c·tanh(y/c))) make sums too long to typeset: decimals
    numbers_only = p.softcap is not None

    def shown(name: str) -> dict:
        if not numbers_only:
            return {}
        return {"decimals": False, "exact": lambda i, j, name=name: b.dec(name)[i][j]}

    for name, symbol in (("running_max", Sym("m")), ("rescale", Words("rescale")),
                         ("running_sum", Sym("l"))):
        options = {"exact": running_max} if name == "running_max" else shown(name)
        children.append(b.matrix(name, symbol, col_labels=True, caption=spec(name, p).meaning, **options))
    for k in elide(list(range(len(blocks))), SHOWN_DECODE_STEPS):
        if k is None:
            children.append(Note(("⋮ (the running outputs of the blocks between, as above)",)))
            continue
        name = f"running_output_{k}"
        children.append(b.matrix(name, Sub(Sym("O"), (Int(k),)), caption=spec(name, p).meaning,
                                 **shown(name)))
    children += worked_row(b, b.softmax_rows[0])
    return Section("online", "Online softmax, block by block", tuple(children),
                   formula=b.formula("running_sum"))


def _variant_words(t) -> tuple[str, ...]:
    """What the online section says about the logits and the sink of this problem."""
    p, words = t.problem, []
    if t.logit_step != "scaled":
        words.append(f" The x are the {t.logit_step} logits, the values the softmax takes.")
    if p.sink is not None:
        words.append(" The sink logit s starts every row's state before block 0 (m = s, l = e^(s − s) = 1, "
                     "O = 0, as vLLM's Triton kernel does), so every running maximum is at least s, "
                     "block 0 rescales that start by e^(s − m), and every running sum carries the "
                     "sink's term e^(s − m); the output never does (the sink has no value). Folding "
                     "e^(s − m) in after the last block instead gives the same last running sum.")
    return tuple(words)


def worked_row(b: SectionBuilder, i: int) -> list[Block]:
    """Row i block by block: m, the rescale factor, l and O with their numbers."""
    t, p = b.t, b.p
    assert p.tiles is not None           # the online steps exist only with tiles
    online = t.online
    states = online.states(i)
    V = t.step("V")
    token = p.tokens[i]
    out: list[Block] = [Note((f"Row '{token}', block by block:",))]
    l_dec, O_dec, m_dec = b.dec("running_sum")[i], None, b.dec("running_max")[i]
    for k, state in enumerate(states):
        keys = _keys_text(t, range(*p.tiles[k]))
        m_k, l_k, O_k = Sub(Sym("m"), (Int(k),)), Sub(Sym("l"), (Int(k),)), Sub(Sym("O"), (Int(k),))
        O_dec = b.dec(f"running_output_{k}")[i]
        if state.best is None:
            out.append(Note((f"Block {k} ({keys}): every key is masked for '{token}', so nothing is seen yet: ",
                             Chain((m_k, Exact(sympy.S.NegativeInfinity)), ("=",)), ", ",
                             Chain((l_k, Int(0)), ("=",)), ", ", Chain((O_k, Int(0)), ("=",)), ".")))
            continue
        word = "scaled score" if t.logit_step == "scaled" else "logit"
        holder = "the sink logit" if state.best == SINK else f"key '{p.key_tokens[state.best]}'"
        out.append(Note((f"Block {k} ({keys}): the largest {word} seen so far"
                         f"{' (the sink included)' if p.sink is not None else ''} is {holder}, ",
                         Chain((m_k, Approx(_value_form(t, i, state.best), m_dec[k])), ("=",)), ".")))
        previous = states[k - 1].best if k else (SINK if p.sink is not None else None)
        if k == 0 and p.sink is not None:
            alpha = _e(t, i, SINK, state.best)
            why = None
        elif k == 0:
            alpha = None
            why = "This is the first block: nothing to rescale."
        elif previous is None:
            alpha = None
            why = "No key was seen before this block: the earlier sums are 0 (e^(−∞) = 0)."
        else:
            alpha = _e(t, i, previous, state.best)
            why = None
        parts_l: list[Math] = []
        parts_O: list[Math] = []
        start = k == 0 and alpha is not None      # the sink's start m = s, l = 1, O = 0
        if start:
            out.append(Note(("The sink started the state: ",
                             Chain((Sub(Sym("m"), (Int(-1),)), hf.number(p.sink)), ("=",)), ", ",
                             Chain((Sub(Sym("l"), (Int(-1),)), Int(1)), ("=",)), ", ",
                             Chain((Sub(Sym("O"), (Int(-1),)), Int(0)), ("=",)), ".")))
        if alpha is not None:
            if alpha == Int(1):
                out.append(Note(("The maximum did not grow: the rescale factor is ",
                                 Chain((Exp(Sum((Sub(Sym("m"), (Int(k - 1),)), Neg(m_k)))), Int(1)),
                                       ("=",)), ".")))
            else:
                out.append(Note(("The maximum grew, so the earlier sums shrink by ",
                                 Chain((Exp(Sum((Sub(Sym("m"), (Int(k - 1),)), Neg(m_k)))),
                                        Approx(alpha, b.dec("rescale")[i][k])), ("=",)), ".")))
            if start:                              # α·1 for the sum; α·0 adds nothing to O
                parts_l.append(alpha)
            else:
                parts_l.append(Product((alpha, Sub(Sym("l"), (Int(k - 1),)))))
                parts_O.append(Product((alpha, Sub(Sym("O"), (Int(k - 1),)))))
        elif why is not None:                     # no rescale factor: why not
            out.append(Note((why,)))
        for j in state.new:
            e = _e(t, i, j, state.best)
            parts_l.append(e)
            parts_O.append(Product((e, Row(tuple(hf.exact(v) for v in V[j])))))
        masked = [p.key_tokens[j] for j in range(*p.tiles[k]) if j not in state.new]
        skipped = f" (masked: {', '.join(masked)})" if masked else ""
        out.append(Note((f"Running sum{skipped}: ", Chain((l_k, Sum(tuple(parts_l)) if len(parts_l) > 1
                                                           else parts_l[0], l_dec[k]), ("=", "≈")), ".")))
        out.append(Note(("Running output: ", Chain((O_k, Sum(tuple(parts_O)) if len(parts_O) > 1
                                                    else parts_O[0], Row(O_dec)), ("=", "≈")), ".")))
    last = len(states) - 1
    out.append(Note(("After the last block the output is ",
                     Chain((Frac(Sub(Sym("O"), (Int(last),)), Sub(Sym("l"), (Int(last),))),
                            Row(b.dec("output")[i])), ("≈",)),
                     f", row '{token}' of the output above, and the weights ",
                     Row(tuple(b.dec("weights")[i][j] for j in t.allowed(i))),
                     " are those of the softmax: the same exact values.")))
    return out


# ---------------------------------------------------------------- KV-cache decoding

def decode_section(b: SectionBuilder) -> Section:
    t, p = b.t, b.p
    from symattn.trace.decode import work_counts

    assert p.prefill is not None         # the decode steps exist only with decode
    P = p.prefill
    prompt = ", ".join(p.tokens[:P])
    reference = "causal" if p.window is None else "sliding-window"
    intro = (f"The first {P} token{'s' if P != 1 else ''} ({prompt}) are the prompt: their keys and values are "
             "computed once and cached. Each later token is one decode step: only its own row x_t is projected "
             "(q_t, k_t, v_t), k_t and v_t are appended to the caches, and q_t attends over the cache. Decoding "
             f"is causal, so the steps above, with the {reference} mask, are the no-cache reference: each decode "
             "step's weights and output equal that row, exactly (fact kv-cache-equals-causal-row).")
    if p.window is not None:
        W = p.window[0]
        intro += (f" With the sliding window W = {W} the cache is a rolling buffer (Mistral): it keeps only "
                  f"the last {W} keys and values, so appending a token evicts the oldest once it is full.")
    if p.alibi is not None:
        intro += (" ALiBi's bias uses absolute positions: the query at t and each cached key at its own "
                  "position j, −slope·(t − j), as in row t of the full logits.")
    if p.sink is not None:
        intro += " The sink's term e^(s − max) joins every step's denominator, as in the full rows."
    children: list[Block] = [Note((intro,))]
    positions = list(range(P, p.n))
    shown = positions if len(positions) <= SHOWN_DECODE_STEPS else elide(positions, SHOWN_DECODE_STEPS)
    for pos in shown:
        if pos is None:
            children.append(Note(("⋮ (the steps between follow the same pattern)",)))
            continue
        token = p.tokens[pos]
        cache = t.decode.cache(pos)
        evicted = cache[0]
        held = f"the cache now holds {len(cache)} keys ({', '.join(p.tokens[j] for j in cache)})"
        if evicted:
            held += f"; {', '.join(p.tokens[:evicted])} evicted"
        children.append(Note((f"Decode step {pos}, token '{token}': {held}.",)))
        for part, symbol in (("q", Sub(Sym("q"), (Int(pos),))),
                             ("K_cache", Sub(Sym("K"), (Int(pos),))),
                             ("V_cache", Sub(Sym("V"), (Int(pos),))),
                             ("scores", Sub(Sym("s"), (Int(pos),))),
                             ("logits", Sub(Sym("z"), (Int(pos),))),
                             ("weights", Sub(Sym("a"), (Int(pos),))),
                             ("output", Sub(Sym("o"), (Int(pos),)))):
            name = f"decode_{pos}_{part}"
            if name not in t.step_names:
                continue
            numbers = part in ("logits", "weights", "output")   # long exact forms: decimals only
            children.append(b.matrix(name, symbol, col_labels=part in ("scores", "logits", "weights"),
                                     caption=spec(name, p).meaning, decimals=not numbers,
                                     exact=(lambda i, j, name=name: b.dec(name)[i][j]) if numbers else None))
        children.append(Note((f"The same as row '{token}' of the {reference} weights and output above: ",
                              Row(tuple(b.dec("weights")[pos][j] for j in cache)), " and ",
                              Row(b.dec("output")[pos]), ".")))
    w = work_counts(p)
    sizes = list(range(P + 1, p.n + 1))
    cached = [len(t.decode.cache(pos)) for pos in positions]
    plus = " + ".join(str(s) for s in cached)
    squares = " + ".join(f"{s}²" for s in sizes)
    children.append(Note((
        f"Work for the {w.steps} decode step{'s' if w.steps != 1 else ''}, counted from the sizes (the prompt "
        "costs the same either way): projected rows (q, k, v) "
        f"{w.projection_rows_with_cache} with the cache (3 per step) against "
        f"{w.projection_rows_without_cache} without (3·({' + '.join(str(s) for s in sizes)})); score dot products "
        f"{w.score_interactions_with_cache} with the cache ({plus}) against "
        f"{w.score_interactions_without_cache} without ({squares}: every step recomputes the whole "
        f"score matrix); the cache ends with {w.cache_elements} numbers per layer and head "
        + (f"(L·(d_k + d_v) = {p.n}·({p.d_k} + {p.d_v})).)" if w.window is None else
           f"(min(L, W)·(d_k + d_v) = {min(p.n, w.window)}·({p.d_k} + {p.d_v}): the rolling buffer "
           f"never holds more than W = {w.window} tokens, and each step meets at most W keys)."),)))
    return Section("decode", "KV-cache decoding", tuple(children))
