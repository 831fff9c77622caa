"""Multi-head results as a document: each head's weights and output, the concatenation,
concat·W_o and the averaged weights, every number a certified decimal.

``multihead.py`` computes (each head through the one engine); this module only
decides what a reader sees, so text, LaTeX, JSON and HTML list the same sections.
``heads_json`` is the numeric contract of ``symattn heads --format json``.
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.certify import CertifiedDecimal, Rounding
from symattn.document.blocks import (
    Chain, Decimal, Document, Exact, Int, LabelledMatrix, Note, Section, Sub, Sym, Words, elide,
)
from symattn.multihead import MultiHeadResult

__all__ = ["build_heads_document", "heads_json", "kind_of"]

LIMIT = 12   # larger matrices elide their middle rows and columns


def kind_of(result: MultiHeadResult) -> str:
    """multi-head (one key/value head per query head), multi-query (one shared) or grouped-query."""
    p = result.problem
    return "multi-head" if p.kv_heads == p.heads else "multi-query" if p.kv_heads == 1 else "grouped-query"


def _matrix(step: str, symbol, decimals: list[list[CertifiedDecimal]], row_labels, col_labels,
            caption: str) -> LabelledMatrix:
    n, m = len(decimals), len(decimals[0]) if decimals else 0
    rows, cols = tuple(elide(range(n), LIMIT)), tuple(elide(range(m), LIMIT))
    cells = tuple(tuple(Decimal(d) for d in row) for row in decimals)
    return LabelledMatrix(step=step, symbol=symbol, exact=None, decimals=cells, rows=rows, cols=cols,
                          row_labels=tuple(row_labels), col_labels=tuple(col_labels), shape=(n, m),
                          caption=caption)


def _eq(name: Sym, value) -> Chain:
    return Chain((name, value), ("=",))


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
        about = Note((f"Query head {h} reads key/value head {p.kv_of[h]}: ",
                      _eq(Sym("d", "k"), Int(hp.d_k)), ", ", _eq(Sym("d", "v"), Int(hp.d_v)),
                      ", scale ", Exact(hp.scale), "."))
        weights = _matrix("weights", Sub(Sym("A"), (Int(h),)), trace.weights.decimals(rounding),
                          hp.tokens, hp.key_tokens, f"the attention weights of head {h}")
        output = _matrix("output", Sub(Sym("O"), (Int(h),)), trace.output.decimals(rounding),
                         hp.tokens, [str(c) for c in range(hp.d_v)], f"the output of head {h}, weights·V")
        sections.append(Section(f"head-{h}", f"Head {h}", (about, weights, output)))
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

    def both(exact: sympy.MatrixBase, decimals: list[list[CertifiedDecimal]]) -> dict[str, Any]:
        return {"shape": [exact.rows, exact.cols],
                "exact": [[sympy.sstr(exact[i, j]) for j in range(exact.cols)] for i in range(exact.rows)],
                "decimal": [[str(d) for d in row] for row in decimals]}

    heads = []
    for h, trace in enumerate(result.traces):
        heads.append({"head": h, "kv_head": p.kv_of[h], "d_k": trace.problem.d_k,
                      "scale": sympy.sstr(trace.problem.scale),
                      "weights": both(trace.weights.matrix, trace.weights.decimals(rounding)),
                      "output": both(trace.output.matrix, trace.output.decimals(rounding))})
    out = {"digits": digits, "heads": p.heads, "kv_heads": p.kv_heads, "tokens": list(p.tokens),
           "key_tokens": list(p.key_tokens), "per_head": heads,
           "concat": both(result.concat, result.concat_decimals(rounding)),
           "average_weights": both(result.average_weights, result.average_weights_decimals(rounding))}
    if p.W_o is not None:
        out["output"] = both(result.output, result.output_decimals(rounding))
    return out
