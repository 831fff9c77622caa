"""gqa-equals-repeated-heads: grouped-/multi-query attention is multi-head
attention whose key/value heads are repeated for the query heads they serve.

Both sides are built by :mod:`symattn.heads.heads`, every head a Trace of the
one engine, and compared exactly.
"""

from __future__ import annotations

import sympy

from symattn.facts.notation import T, dot, fn, frac, rel, sym, times, words
from symattn.facts.proof import Line, Proof
from symattn.notation.nodes import Math, Sub
from symattn.facts.softmax_facts import same
from symattn.facts.structure_facts import _symbolic_outputs
from symattn.facts.symbolic import symbol_vector
from symattn.heads.heads import MultiHeadProblem, MultiHeadResult
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace


def _as_projection(p: Problem) -> dict:
    """X, W_q, W_k, W_v (and X_kv) giving the problem's Q, K, V exactly.

    A problem with Q, K, V given directly is embedded in d = max(n, m) columns (so a 16-token
    symbolic problem stays within MAX_SYMBOLIC_SIDE): X = [I_n | 0], X_kv = [I_m | 0] and
    W_q, W_k, W_v = Q, K, V with zero rows below them to d rows."""
    if p.projected:
        return {"X": p.X, "W_q": p.W_q, "W_k": p.W_k, "W_v": p.W_v, "X_kv": p.X_kv}
    n, m = p.n, p.m
    d = max(n, m)
    embed = lambda rows: sympy.eye(rows).row_join(sympy.zeros(rows, d - rows))  # noqa: E731
    pad = lambda M: M.col_join(sympy.zeros(d - M.rows, M.cols))  # noqa: E731
    return {"X": embed(n), "X_kv": embed(m), "W_q": pad(p.Q_given), "W_k": pad(p.K_given),
            "W_v": pad(p.V_given)}


def grouped_from(problem: Problem) -> MultiHeadProblem:
    """Two query heads (W_q and W_q with its columns reversed) sharing the problem's key/value head,
    W_o = [I; I] (the sum of the heads)."""
    parts = _as_projection(problem)
    W_q = parts["W_q"]
    flipped = W_q[:, ::-1]
    mask = None if problem.mask is None else [[int(x) for x in r] for r in problem.mask.tolist()]
    W_o = sympy.eye(problem.d_v).col_join(sympy.eye(problem.d_v))
    same_seq = problem.key_tokens == problem.tokens and parts["X_kv"] is None
    return MultiHeadProblem(X=parts["X"], X_kv=parts["X_kv"], q_weights=[W_q, flipped],
                            kv_weights=[(parts["W_k"], parts["W_v"])], W_o=W_o,
                            tokens=problem.tokens, key_tokens=None if same_seq else problem.key_tokens,
                            scale=problem.scale, mask=mask, title=problem.title)


def _concat() -> Math:
    """concat·W_o: the heads' outputs side by side, projected."""
    return dot(words("concat"), sym("W", "o"))


def gqa_equals_repeated_heads(subject: Trace | MultiHeadProblem | None = None) -> Proof:
    """GQA/MQA output = MHA output with each key/value head copied to its query heads."""
    # general: 4 query heads over 2 key/value heads (i // 2), symbolic tokens
    q = [symbol_vector(f"q{h}_", 2) for h in range(4)]
    k = [symbol_vector(f"k{g}_", 2) for g in range(2)]
    v = [symbol_vector(f"v{g}_", 2) for g in range(2)]
    grouped = [_symbolic_outputs(q[h], k[h // 2], v[h // 2]) for h in range(4)]
    k_rep, v_rep = [k[h // 2] for h in range(4)], [v[h // 2] for h in range(4)]
    repeated = [_symbolic_outputs(q[h], k_rep[h], v_rep[h]) for h in range(4)]
    ok = grouped == repeated
    i, g = sym("i"), fn("g", sym("i"))
    general = (Line("query head i of grouped-query attention reads key/value head ",
                    rel(g, "=", fn("floor", frac(times(i, sym("h", "kv")), sym("h")))), "; "
                    "multi-head attention with ", rel(sym("K", "i"), "=", Sub(sym("K"), (g,))), ", ",
                    rel(sym("V", "i"), "=", Sub(sym("V"), (g,))), " computes ",
                    times(fn("softmax", dot(times(sym("Q", "i"), T(sym("K", "i"))), words("scale"))), sym("V", "i")),
                    " on the same triple, so every head output, the concatenation and ", _concat(), " agree. "
                    f"SymPy, 4 query heads over 2 key/value heads on symbols: {'identical' if ok else 'DIFFERENT'}"),)
    checks, counter = [], None
    if subject is not None:
        if isinstance(subject, Trace):
            mhp = grouped_from(subject.problem)
            how = "two query heads (W_q and W_q with reversed columns) sharing this problem's K, V"
        else:
            mhp = subject
            how = f"{mhp.heads} query heads over {mhp.kv_heads} key/value head(s)"
        a, b = MultiHeadResult(mhp), MultiHeadResult(mhp.repeated_kv())
        n = mhp.n
        heads_ok = all(same(x.output[i, c], y.output[i, c])
                       for x, y in zip(a.traces, b.traces)
                       for i in range(n) for c in range(x.problem.d_v))
        out_ok = all(same(a.output[i, c], b.output[i, c]) for i in range(n) for c in range(a.output.cols))
        ok &= heads_ok and out_ok
        checks.append(Line(f"{how}: every head output and ", _concat(), " equal those of multi-head attention "
                           "with the key/value head repeated, exactly") if heads_ok and out_ok
                      else Line(f"{how}: DIFFERENT"))
        if not (heads_ok and out_ok):
            counter = {"heads": mhp.heads, "kv_heads": mhp.kv_heads}
    return Proof("gqa-equals-repeated-heads", ok,
                 Line("multi-query/grouped-query attention equals multi-head attention with repeated "
                      "key/value heads"),
                 general, tuple(checks), counter)
