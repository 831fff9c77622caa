"""Multi-head results as a document: each head's weights and output, the concatenation,
concat·W_o and the averaged weights, every number a certified decimal.

``multihead.py`` computes (each head through the one engine); this module only
decides what a reader sees, so text, LaTeX, JSON and HTML list the same sections.
``heads_json`` is the numeric contract of ``symattn heads --format json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.numbers.masked import Masked
from symattn.document.blocks import (
    Chain, Decimal, Document, Exact, Frac, Int, LabelledMatrix, Math, Note, Section, Sqrt, Sub, Sym,
    Words, elide,
)
from symattn.document.build.trace import DocumentOptions, variant_step_sections
from symattn.heads.heads import MultiHeadResult
from symattn.numbers.compare import equal
from symattn.heads.keys import alibi_default_slope_values, alibi_slope_exponents
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace
from symattn.vocab import StepName

__all__ = ["build_heads_document", "heads_json", "kind_of", "variant_words", "variant_steps"]

#: the steps of plain attention; a head's other steps come from its variant keys
PLAIN_STEPS = frozenset(StepName.plain())

LIMIT = 12   # larger matrices elide their middle rows and columns


def kind_of(result: MultiHeadResult) -> str:
    """multi-head (one key/value head per query head), multi-query (one shared) or grouped-query."""
    p = result.problem
    return "multi-head" if p.kv_heads == p.heads else "multi-query" if p.kv_heads == 1 else "grouped-query"


def _matrix(step: str, symbol, decimals: Sequence[Sequence[CertifiedDecimal | Masked]], row_labels, col_labels,
            caption: str) -> LabelledMatrix:
    n, m = len(decimals), len(decimals[0]) if decimals else 0
    rows, cols = tuple(elide(range(n), LIMIT)), tuple(elide(range(m), LIMIT))
    cells = tuple(tuple(Decimal(d) for d in row) for row in decimals)
    return LabelledMatrix(step=step, symbol=symbol, exact=None, decimals=cells, rows=rows, cols=cols,
                          row_labels=tuple(row_labels), col_labels=tuple(col_labels), shape=(n, m),
                          caption=caption)


def _eq(name: Sym, value) -> Chain:
    return Chain((name, value), ("=",))


def variant_words(problem: Problem, head: int, heads: int) -> list[str]:
    """What a head's variant keys do, in words (one phrase per key; none for plain attention)."""
    p, out = problem, []
    if p.prefill is not None:
        out.append(f"KV-cache decoding after a {p.prefill}-token prompt (causal)")
    elif p.mask is not None:
        out.append(f"mask: {p.mask_description}")
    if p.rope is not None:
        out.append(f"RoPE, {p.rope.layout} pairs, θ = {', '.join(map(sympy.sstr, p.rope.theta))}")
    if p.alibi is not None:
        slope = sympy.sstr(p.alibi.slope)
        paper = (not p.alibi.slope.free_symbols and
                 equal(p.alibi.slope, alibi_default_slope_values(heads)[head]))
        form = "−slope·|i − j|" if p.alibi.symmetric else "−slope·(i − j)"
        exponent = alibi_slope_exponents(heads)[head]
        out.append(f"ALiBi slope {slope}"
                   + (f" (the paper's default 2^({str(exponent).replace('-', '−')}) for query head {head} "
                      f"of {heads})" if paper else "")
                   + f", bias {form}")
    if p.softcap is not None:
        out.append(f"soft-cap c = {sympy.sstr(p.softcap)}: capped = c·tanh(logit / c)")
    if p.sink is not None:
        out.append(f"sink logit s = {sympy.sstr(p.sink)}: each row's weights sum to less than 1")
    if p.tiles is not None:
        blocks = "; ".join(f"{a}–{b - 1}" if b - a > 1 else str(a) for a, b in p.tiles)
        out.append(f"online softmax over the key blocks {blocks}")
    return out


def variant_steps(trace: Trace) -> list[str]:
    """The steps a head's variant keys add (a sliding window's ``masked`` counts as one)."""
    names = [n for n in trace.step_names if n not in PLAIN_STEPS]
    if trace.problem.window is not None:
        names.insert(0, "masked")
    return names


def build_heads_document(result: MultiHeadResult, rounding: Rounding | int = 3) -> Document:
    """The multi-head result as a document (certified decimals at ``rounding``)."""
    rounding = rounding if isinstance(rounding, Rounding) else Rounding(digits=rounding)
    p = result.problem
    plural = lambda k, word: f"{k} {word}{'s' * (k != 1)}"  # noqa: E731
    intro = Note((f"{p.title + ': ' if p.title else ''}{kind_of(result)} attention, "
                  f"{plural(p.heads, 'query head')} over {plural(p.kv_heads, 'key/value head')} "
                  f"(head i uses key/value head i // {p.group}); queries {', '.join(p.tokens)}, "
                  f"keys {', '.join(p.key_tokens)}. Each head is an ordinary attention worked by the "
                  f"engine; decimals are correctly rounded to {_precision(rounding)}, certified with "
                  "ball arithmetic.",))
    sections = [Section("problem", "Problem", (intro,), numbered=False)]
    for h, trace in enumerate(result.traces):
        hp = trace.problem
        words = variant_words(hp, h, p.heads)
        about = Note((f"Query head {h} reads key/value head {p.kv_of[h]}: ",
                      _eq(Sym("d", "k"), Int(hp.d_k)), ", ", _eq(Sym("d", "v"), Int(hp.d_v)),
                      ", scale ", _scale(hp), "." + (f" Variants: {'; '.join(words)}." if words else "")))
        weights = _matrix("weights", Sub(Sym("A"), (Int(h),)), trace.weights.decimals(rounding),
                          hp.tokens, hp.key_tokens, f"the attention weights of head {h}")
        output = _matrix("output", Sub(Sym("O"), (Int(h),)), trace.output.decimals(rounding),
                         hp.tokens, [str(c) for c in range(hp.d_v)], f"the output of head {h}, weights·V")
        sections.append(Section(f"head-{h}", f"Head {h}", (about, weights, output)))
        options = DocumentOptions(rounding=rounding, limit=LIMIT)
        for section in variant_step_sections(trace, options):   # the head's own variant steps
            sections.append(replace(section, key=f"head-{h}-{section.key}", sub=True,
                                    title=f"Head {h}: {section.title}"))
    labels = [f"h{h}.{c}" for h, d in enumerate(p.d_v) for c in range(d)]
    concat = _matrix("concat", Words("concat"), result.concat_decimals(rounding), p.tokens, labels,
                     f"the head outputs side by side, [O_0 | … | O_{p.heads - 1}] (columns h.c: head h, column c)")
    sections.append(Section("concat", "Concatenation", (concat,)))
    if p.W_o is not None:
        out = _matrix("output", Sym("O"), result.output_decimals(rounding), p.tokens,
                      [str(c) for c in range(p.W_o.cols)], "the concatenation times W_o")
        sections.append(Section("output", "Output: concat·W_o", (out,)))
    average = _matrix("average weights", Sym("A", accent=None, sub="mean"),
                      result.average_weights_decimals(rounding), p.tokens, p.key_tokens,
                      "the mean of the heads' weights")
    sections.append(Section("average", "Averaged weights", (
        Note(("The mean over the query heads, as nn.MultiheadAttention reports with "
              "average_attn_weights=True.",)), average)))
    title = p.title or f"{kind_of(result)[:1].upper()}{kind_of(result)[1:]} attention"
    return Document(title, tuple(sections), meta={"kind": "heads"})


def _precision(r: Rounding) -> str:
    if r.digits is not None:
        return f"{r.digits} significant digit{'s' * (r.digits != 1)}"
    return f"{r.places} decimal place{'s' * (r.places != 1)}"


def heads_json(result: MultiHeadResult, digits: int = 3) -> dict[str, Any]:
    """The machine-readable result (``symattn heads --format json``): exact strings and certified decimals."""
    p, rounding = result.problem, Rounding(digits=digits)

    def both(exact: sympy.MatrixBase, decimals: Sequence[Sequence[CertifiedDecimal | Masked]]) -> dict[str, Any]:
        return {"shape": [exact.rows, exact.cols],
                "exact": [[sympy.sstr(exact[i, j]) for j in range(exact.cols)] for i in range(exact.rows)],
                "decimal": [[str(d) for d in row] for row in decimals]}

    heads = []
    for h, trace in enumerate(result.traces):
        hp = trace.problem
        heads.append({"head": h, "kv_head": p.kv_of[h], "d_k": hp.d_k,
                      "scale": sympy.sstr(hp.scale),
                      "variants": _variants_json(hp),
                      "steps": {name: both(trace.step(name).matrix, trace.step(name).decimals(rounding))
                                for name in variant_steps(trace)},
                      "weights": both(trace.weights.matrix, trace.weights.decimals(rounding)),
                      "output": both(trace.output.matrix, trace.output.decimals(rounding))})
    out = {"digits": digits, "heads": p.heads, "kv_heads": p.kv_heads, "tokens": list(p.tokens),
           "key_tokens": list(p.key_tokens), "per_head": heads,
           "concat": both(result.concat, result.concat_decimals(rounding)),
           "average_weights": both(result.average_weights, result.average_weights_decimals(rounding))}
    if p.W_o is not None:
        out["output"] = both(result.output, result.output_decimals(rounding))
    return out


def _variants_json(p: Problem) -> dict[str, Any]:
    """A head's variant keys as JSON (exact values as strings)."""
    out: dict[str, Any] = {}
    if p.mask is not None and p.prefill is None:
        out["mask"] = (p.mask_value if p.window is not None else
                       "causal" if p.mask_kind == "causal" else [[int(x) for x in row] for row in p.mask.tolist()])
    if p.rope is not None:
        out["rope"] = {"layout": p.rope.layout, "theta": [sympy.sstr(x) for x in p.rope.theta],
                       "positions": list(p.rope.positions), "key_positions": list(p.rope.key_positions)}
    if p.alibi is not None:
        out["alibi"] = {"slope": sympy.sstr(p.alibi.slope), "symmetric": p.alibi.symmetric}
    if p.softcap is not None:
        out["softcap"] = sympy.sstr(p.softcap)
    if p.sink is not None:
        out["sink"] = sympy.sstr(p.sink)
    if p.tiles is not None:
        out["tiles"] = [[a, b] for a, b in p.tiles]
    if p.prefill is not None:
        out["decode"] = {"prefill": p.prefill}
    return out


def _scale(hp: Problem) -> Math:
    """The default scale as the lesson writes it, 1/√d_k (not SymPy's √3/3); any other exactly."""
    if hp.default_scale and hp.d_k > 1 and not sympy.sqrt(hp.d_k).is_Integer:
        return Frac(Int(1), Sqrt(Int(hp.d_k)))
    return Exact(hp.scale)
