"""KV-cache decoding as steps of the one Trace.

``decode = { prefill = P }``: the first P tokens are the prompt (prefilled, their
keys and values cached); every later token t (P ≤ t < n) is one decode step that
projects only its own row x_t into q_t, k_t, v_t, appends k_t and v_t to the
caches (now (t + 1) × d_k and (t + 1) × d_v) and attends from q_t over the cache:

    decode_t_q, decode_t_k, decode_t_v       1 × d      the new token's projections
    decode_t_K_cache, decode_t_V_cache       (t+1) × d  the caches after appending
    decode_t_scores                          1 × (t+1)  q_t · K_cacheᵀ
    decode_t_weights                         1 × (t+1)  softmax(scale · scores)
    decode_t_output                          1 × d_v    weights · V_cache
    decode_work                              1 × 5      the work counts (below), one step

Step names are plain identifiers so ``check`` targets address them
(``decode_4_weights[0, cats]``).  Decoding is causal by construction (a token
attends to itself and the tokens before it), so the key implies
``mask = "causal"``, and the plain steps beside the decode steps are the no-cache
reference: full causal attention.  Fact ``kv-cache-equals-causal-row``: each
decode step's weights and output equal row t of it.  It needs self-attention
from X (the cache holds the projected keys and values of the same sequence).

The work counts (:func:`work_counts`) are exact integers from the sizes; they
count the decode steps only (the prompt is projected and scored the same way
with or without the cache).  The step ``decode_work`` holds them as one row
(columns :data:`WORK_COLUMNS`), so a worksheet can ask for them and ``check``
can check them (``decode_work[work, dots_cached]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import sympy

from symattn.compare import sign
from symattn.errors import ProblemError
from symattn.stepnumbers import ExactNumbers

if TYPE_CHECKING:
    from symattn.problem import Problem
    from symattn.trace import Trace

_PARTS = ("q", "k", "v", "K_cache", "V_cache", "scores", "weights", "output")
WORK_STEP = "decode_work"
#: The columns of ``decode_work``: projected rows and score dot products with and without the
#: cache, and the numbers the cache holds at the end (per layer and head)
WORK_COLUMNS = ("rows_cached", "rows_recomputed", "dots_cached", "dots_recomputed", "cache_elements")


def parse_decode(value: object, problem: "Problem", mask: object) -> int:
    """The prompt length P of ``decode = { prefill = P }`` (checked against the problem)."""
    if not isinstance(value, Mapping):
        raise ProblemError(f"decode is {value!r}: write decode = {{ prefill = P }} (the first P "
                           "tokens are the prompt)")
    unknown = [k for k in value if k != "prefill"]
    if unknown:
        raise ProblemError(f"decode has the unknown key {str(unknown[0])!r}: write "
                           "decode = { prefill = P }")
    P = value.get("prefill")
    if isinstance(P, bool) or not isinstance(P, int) or P < 1:
        raise ProblemError(f"decode prefill is {P!r}: give the prompt length as a whole number "
                           "P ≥ 1 (the first P tokens are prefilled)")
    if "X" not in problem.inputs:
        raise ProblemError("decode needs self-attention from X (with W_q, W_k, W_v): the cache holds "
                           "the keys and values projected from the tokens decoded so far")
    if "X_kv" in problem.inputs:
        raise ProblemError("decode works on self-attention: remove X_kv (a KV cache appends the "
                           "new token's own key and value)")
    if P >= problem.n:
        raise ProblemError(f"decode prefill is {P} but there are {problem.n} tokens: nothing is left "
                           f"to decode; use a prefill below {problem.n}")
    if not (mask is None or mask == "causal" or _is_causal(mask, problem.n)):
        raise ProblemError("decode is causal attention (each new token sees the cache and itself): "
                           "remove the mask or write mask = \"causal\"")
    if problem.sink is not None:
        raise ProblemError("decode with a sink logit is not supported yet: remove decode or sink")
    if problem.free_symbols:
        raise ProblemError("decode needs numbers: each step's maximum must be decided, and symbols "
                           "leave it open; substitute values first (problem.subs)")
    return P


def _is_causal(mask: object, n: int) -> bool:
    """Whether a 0/1 matrix (as a rebuilt problem passes it) is the causal mask."""
    try:
        rows = [list(r) for r in mask]   # type: ignore[union-attr]
        return len(rows) == n and all(len(r) == n and all(int(r[j]) == (1 if j <= i else 0)
                                                          for j in range(n)) for i, r in enumerate(rows))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class WorkCounts:
    """What a course counts for the decode steps t = P..n−1, with and without the cache."""

    prefill: int
    tokens: int                                    # n
    projection_rows_with_cache: int                # 3 per step: q, k, v of the new token
    projection_rows_without_cache: int             # Σ 3(t + 1): every row projected again
    score_interactions_with_cache: int             # Σ (t + 1): the new query against the cache
    score_interactions_without_cache: int          # Σ (t + 1)²: the whole score matrix again
    cache_elements: int                            # n·(d_k + d_v) per layer and head
    cache_elements_per_step: tuple[int, ...]       # (t + 1)·(d_k + d_v) after each step

    @property
    def steps(self) -> int:
        return self.tokens - self.prefill

    @property
    def row(self) -> tuple[int, ...]:
        """The counts in the order of :data:`WORK_COLUMNS` (the step ``decode_work``)."""
        return (self.projection_rows_with_cache, self.projection_rows_without_cache,
                self.score_interactions_with_cache, self.score_interactions_without_cache,
                self.cache_elements)


def work_counts(problem: "Problem") -> WorkCounts:
    """Exact work counts of KV-cache decoding against recomputing full attention every step.

    Without the cache, step t recomputes the (t + 1) × (t + 1) score matrix (the issue's
    4² + 5² + 6² for three steps after a 3-token prompt; the causal half would need
    (t + 1)(t + 2)/2 of them); with it, one query meets t + 1 cached keys (4 + 5 + 6)."""
    if problem.prefill is None:
        raise ProblemError("work counts need decode = { prefill = P }")
    P, n, width = problem.prefill, problem.n, problem.d_k + problem.d_v
    sizes = range(P + 1, n + 1)        # t + 1 for t = P..n−1
    return WorkCounts(P, n, 3 * (n - P), sum(3 * s for s in sizes), sum(sizes),
                      sum(s * s for s in sizes), n * width, tuple(s * width for s in sizes))


class Decode:
    """The decode steps of one trace, built from its exact Q, K, V rows."""

    def __init__(self, trace: "Trace") -> None:
        self.trace = trace
        p = trace.problem
        self.prefill = p.prefill
        self.positions = tuple(range(p.prefill, p.n))
        self.scale_sign = sign(p.scale)
        self._cache: dict[tuple, sympy.Expr] = {}

    def name(self, t: int, part: str) -> str:
        return f"decode_{t}_{part}"

    # -- exact entries ------------------------------------------------------------------
    def score(self, t: int, j: int) -> sympy.Expr:
        """q_t · k_j, written out from the rows of Q and K."""
        key = ("s", t, j)
        if key not in self._cache:
            Q, K = self.trace.step("Q"), self.trace.step("K")
            self._cache[key] = sympy.Add(*[Q[t, c] * K[j, c] for c in range(self.trace.problem.d_k)])
        return self._cache[key]

    def best(self, t: int) -> int:
        """The cached key with the largest scaled score for query t (the first of a tie)."""
        key = ("best", t)
        if key not in self._cache:
            best = 0
            for j in range(1, t + 1):
                if sign(self.score(t, j) - self.score(t, best)) * self.scale_sign > 0:
                    best = j
            self._cache[key] = best
        return self._cache[key]

    def exp(self, t: int, j: int) -> sympy.Expr:
        return sympy.exp(self.trace.problem.scale * (self.score(t, j) - self.score(t, self.best(t))))

    def total(self, t: int) -> sympy.Expr:
        key = ("sum", t)
        if key not in self._cache:
            self._cache[key] = sympy.Add(*[self.exp(t, j) for j in range(t + 1)])
        return self._cache[key]

    def weight(self, t: int, j: int) -> sympy.Expr:
        return self.exp(t, j) / self.total(t)

    def output(self, t: int, c: int) -> sympy.Expr:
        V = self.trace.step("V")
        return sympy.Add(*[V[j, c] * self.exp(t, j) for j in range(t + 1)]) / self.total(t)

    # -- the steps ------------------------------------------------------------------------
    def add_steps(self, add: Callable) -> None:
        p = self.trace.problem
        tok = p.tokens
        dk = tuple(str(c) for c in range(p.d_k))
        dv = tuple(str(c) for c in range(p.d_v))

        def row_of(step: str, t: int) -> Callable[[object, object], sympy.Expr]:
            return lambda i, c: self.trace.step(step)[t, int(c)]

        def rows_of(step: str) -> Callable[[object, object], sympy.Expr]:
            return lambda j, c: self.trace.step(step)[int(j), int(c)]

        for t in self.positions:
            me, cached = (tok[t],), tuple(tok[:t + 1])
            parts: list[tuple[str, tuple[int, int], tuple, tuple, Callable]] = [
                ("q", (1, p.d_k), me, dk, row_of("Q", t)),
                ("k", (1, p.d_k), me, dk, row_of("K", t)),
                ("v", (1, p.d_v), me, dv, row_of("V", t)),
                ("K_cache", (t + 1, p.d_k), cached, dk, rows_of("K")),
                ("V_cache", (t + 1, p.d_v), cached, dv, rows_of("V")),
                ("scores", (1, t + 1), me, cached, lambda i, j, t=t: self.score(t, int(j))),
                ("weights", (1, t + 1), me, cached, lambda i, j, t=t: self.weight(t, int(j))),
                ("output", (1, p.d_v), me, dv, lambda i, c, t=t: self.output(t, int(c))),
            ]
            for part, shape, rows, cols, entry in parts:
                add(self.name(t, part), shape, rows, cols, entry, ExactNumbers(entry, shape[1]))
        counts = work_counts(p).row

        def count(i: object, j: object) -> sympy.Expr:
            return sympy.Integer(counts[int(j)])

        add(WORK_STEP, (1, len(WORK_COLUMNS)), ("work",), WORK_COLUMNS, count, ExactNumbers(count, len(WORK_COLUMNS)))

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(self.name(t, part) for t in self.positions for part in _PARTS) + (WORK_STEP,)
