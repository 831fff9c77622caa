"""The document's sections for online softmax (tiles) and KV-cache decoding (decode).

Built from the Trace's public API like the rest of the derivation
(``document.build``): the online section shows the running maximum, rescale
factors, running sums and outputs, then works one row block by block with its
numbers, as the lesson works the 'cats' row with the max-subtraction trick; the
decode section shows each decode step (cache, scores, weights, output) beside the
no-cache reference and the work counts.  Every number is a certified decimal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from symattn.document import handforms as hf
from symattn.document.blocks import (
    Approx, Block, Chain, Exact, Exp, Frac, Int, Math, Neg, Note, Product, Row, Section, Sub,
    Sum, Sym, Words, elide,
)
from symattn.steps import spec

if TYPE_CHECKING:
    from symattn.document.build import _Builder

SHOWN_DECODE_STEPS = 3     # more decode steps (or running outputs) than this: the first two and the last


def variant_sections(builder: "_Builder") -> list[Section]:
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


def _e(t, i: int, j: int, k: int) -> Math:
    """e^(x_j − x_k) as a person writes it: e^(−8/√3), 1 for e^0."""
    scores = t.step("scores")
    form = hf.scaled(t, scores[i, j] - scores[i, k])
    return Int(1) if form == Int(0) else Exp(form)


def online_section(b: "_Builder") -> Section:
    t, p = b.t, b.p
    blocks = _blocks(t)
    split = " | ".join(_keys_text(t, keys) for keys in blocks)
    children: list[Block] = [Note((
        f"Online softmax (FlashAttention) reads the keys in {len(blocks)} blocks: {split}. Each row keeps a "
        "running maximum m, a running sum l and a running output O. A block that raises the maximum first "
        "multiplies l and O by ", Exp(Sum((Sym("m", "old"), Neg(Sym("m", "new"))))),
        " (the rescale factor), then adds its own keys' exponentials against the new maximum. After the last "
        "block, O / l is the output and e^(x − m) / l are the weights, exactly (fact "
        "online-softmax-equals-softmax)."))]
    scores = t.step("scores")

    def running_max(i: int, k: int) -> Math:      # the maximum as the lesson writes it: 12/√3
        best = t.online.states(i)[k].best
        return Exact(sympy.S.NegativeInfinity) if best is None else hf.scaled(t, scores[i, best])

    for name, symbol in (("running_max", Sym("m")), ("rescale", Words("rescale")),
                         ("running_sum", Sym("l"))):
        children.append(b.matrix(name, symbol, col_labels=True, caption=spec(name, p).meaning,
                                 exact=running_max if name == "running_max" else None))
    for k in elide(list(range(len(blocks))), SHOWN_DECODE_STEPS):
        if k is None:
            children.append(Note(("⋮ (the running outputs of the blocks between, as above)",)))
            continue
        name = f"running_output_{k}"
        children.append(b.matrix(name, Sub(Sym("O"), (Int(k),)), caption=spec(name, p).meaning))
    children += worked_row(b, b.softmax_rows[0])
    return Section("online", "Online softmax, block by block", tuple(children),
                   formula=b.formula("running_sum"))


def worked_row(b: "_Builder", i: int) -> list[Block]:
    """Row i block by block: m, the rescale factor, l and O with their numbers."""
    t, p = b.t, b.p
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
        top = t.step("scores")[i, state.best]
        out.append(Note((f"Block {k} ({keys}): the largest scaled score seen so far is key "
                         f"'{p.key_tokens[state.best]}', ",
                         Chain((m_k, Approx(hf.scaled(t, top), m_dec[k])), ("=",)), ".")))
        previous = states[k - 1].best if k else None
        if k == 0:
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
        if alpha is not None:
            if alpha == Int(1):
                out.append(Note(("The maximum did not grow: the rescale factor is ",
                                 Chain((Exp(Sum((Sub(Sym("m"), (Int(k - 1),)), Neg(m_k)))), Int(1)),
                                       ("=",)), ".")))
            else:
                out.append(Note(("The maximum grew, so the earlier sums shrink by ",
                                 Chain((Exp(Sum((Sub(Sym("m"), (Int(k - 1),)), Neg(m_k)))),
                                        Approx(alpha, b.dec("rescale")[i][k])), ("=",)), ".")))
            parts_l.append(Product((alpha, Sub(Sym("l"), (Int(k - 1),)))))
            parts_O.append(Product((alpha, Sub(Sym("O"), (Int(k - 1),)))))
        else:
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

def decode_section(b: "_Builder") -> Section:
    t, p = b.t, b.p
    from symattn.decode import work_counts

    P = p.prefill
    prompt = ", ".join(p.tokens[:P])
    children: list[Block] = [Note((
        f"The first {P} token{'s' if P != 1 else ''} ({prompt}) are the prompt: their keys and values are "
        "computed once and cached. Each later token is one decode step: only its own row x_t is projected "
        "(q_t, k_t, v_t), k_t and v_t are appended to the caches, and q_t attends over the cache. Decoding "
        "is causal, so the steps above, with the causal mask, are the no-cache reference: each decode "
        "step's weights and output equal that row, exactly (fact kv-cache-equals-causal-row).",))]
    positions = list(range(P, p.n))
    shown = positions if len(positions) <= SHOWN_DECODE_STEPS else elide(positions, SHOWN_DECODE_STEPS)
    for pos in shown:
        if pos is None:
            children.append(Note(("⋮ (the steps between follow the same pattern)",)))
            continue
        token = p.tokens[pos]
        children.append(Note((f"Decode step {pos}, token '{token}': the cache now holds {pos + 1} keys "
                              f"({', '.join(p.tokens[:pos + 1])}).",)))
        for part, symbol in (("q", Sub(Sym("q"), (Int(pos),))),
                             ("K_cache", Sub(Sym("K"), (Int(pos),))),
                             ("V_cache", Sub(Sym("V"), (Int(pos),))),
                             ("scores", Sub(Sym("s"), (Int(pos),))),
                             ("weights", Sub(Sym("a"), (Int(pos),))),
                             ("output", Sub(Sym("o"), (Int(pos),)))):
            name = f"decode_{pos}_{part}"
            numbers = part in ("weights", "output")    # long fractions of exponentials: decimals only
            children.append(b.matrix(name, symbol, col_labels=part in ("scores", "weights"),
                                     caption=spec(name, p).meaning, decimals=not numbers,
                                     exact=(lambda i, j, name=name: b.dec(name)[i][j]) if numbers else None))
        children.append(Note((f"The same as row '{token}' of the causal weights and output above: ",
                              Row(tuple(b.dec("weights")[pos][j] for j in range(pos + 1))), " and ",
                              Row(b.dec("output")[pos]), ".")))
    w = work_counts(p)
    sizes = list(range(P + 1, p.n + 1))
    plus = " + ".join(str(s) for s in sizes)
    squares = " + ".join(f"{s}²" for s in sizes)
    children.append(Note((
        f"Work for the {w.steps} decode step{'s' if w.steps != 1 else ''}, counted from the sizes (the prompt "
        "costs the same either way): projected rows (q, k, v) "
        f"{w.projection_rows_with_cache} with the cache (3 per step) against "
        f"{w.projection_rows_without_cache} without (3·({plus})); score dot products "
        f"{w.score_interactions_with_cache} with the cache ({plus}) against "
        f"{w.score_interactions_without_cache} without ({squares}: every step recomputes the whole "
        f"score matrix); the cache ends with {w.cache_elements} numbers per layer and head "
        f"(L·(d_k + d_v) = {p.n}·({p.d_k} + {p.d_v})).",)))
    return Section("decode", "KV-cache decoding", tuple(children))
