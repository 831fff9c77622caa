"""KV-cache decoding as steps of the one Trace.

``decode = { prefill = P }``: the first P tokens are the prompt (prefilled, their
keys and values cached); every later token t (P ≤ t < n) is one decode step that
projects only its own row x_t into q_t, k_t, v_t, appends k_t and v_t to the
caches and attends from q_t over the cache:

    decode_t_q, decode_t_k, decode_t_v       1 × d      the new token's projections
    decode_t_K_cache, decode_t_V_cache       L_t × d    the caches after appending
    decode_t_scores                          1 × L_t    q_t · K_cacheᵀ
    decode_t_logits                          1 × L_t    with ALiBi or a soft-cap only
    decode_t_weights                         1 × L_t    softmax of the logits
    decode_t_output                          1 × d_v    weights · V_cache
    decode_work                              1 × 5      the work counts (below), one step

Step names are plain identifiers so ``check`` targets address them
(``decode_4_weights[0, cats]``).  Decoding is causal by construction (a token
attends to itself and the tokens before it), so the key implies
``mask = "causal"``: L_t = t + 1.  With a causal sliding window
``mask = { window = W }`` the cache is Mistral's rolling buffer: it keeps only the
last W keys and values, so L_t = min(t + 1, W) and the cache shown is the one after
eviction (keys t − W + 1..t).  The plain steps beside the decode steps are the
no-cache reference: full attention with the same mask.  Fact
``kv-cache-equals-causal-row``: each decode step's weights and output equal row t
of it.  It needs self-attention from X (the cache holds the projected keys and
values of the same sequence).

Each decode step is a Problem of its own worked by the one engine (:meth:`Decode.engine`):
Q = [q_t], K and V the cache, with the trace's scale, sink and soft-cap, so its scores,
logits, weights and output are the engine's (exact entries and certified balls), never
recomputed here.  ALiBi's bias −slope·(t − j) uses the absolute positions of the query (t)
and of each cached key (j), not the key's slot in the buffer: the step's problem gets them
as ``alibi.positions`` and ``alibi.key_positions``.

The work counts (:func:`work_counts`) are exact integers from the sizes; they
count the decode steps only (the prompt is projected and scored the same way
with or without the cache).  The step ``decode_work`` holds them as one row
(columns :data:`WORK_COLUMNS`), so a worksheet can ask for them and ``check``
can check them (``decode_work[work, dots_cached]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, SupportsInt

import sympy

from symattn.engine.engine import Engine
from symattn.engine.extra import StepNumbers
from symattn.errors import ProblemError
from symattn.problem.keys.mask import causal_window_width
from symattn.trace.stepnumbers import ExactNumbers
from symattn.trace.steps import logit_step
from symattn.trace.source import AddStep, TraceView

from symattn.problem.problem import Problem

_PARTS = ("q", "k", "v", "K_cache", "V_cache", "scores", "logits", "weights", "output")
WORK_STEP = "decode_work"
#: The columns of ``decode_work``: projected rows and score dot products with and without the
#: cache, and the numbers the cache holds at the end (per layer and head)
WORK_COLUMNS = ("rows_cached", "rows_recomputed", "dots_cached", "dots_recomputed", "cache_elements")


def cache_keys(problem: "Problem", t: int) -> tuple[int, ...]:
    """The keys in the cache at decode step t, after eviction: 0..t, or the last W of them."""
    assert problem.mask is not None      # decoding is causal: a decode problem has a mask
    return tuple(j for j in range(problem.n) if problem.mask[t, j])


@dataclass(frozen=True)
class WorkCounts:
    """What a course counts for the decode steps t = P..n−1, with and without the cache."""

    prefill: int
    tokens: int                                    # n
    projection_rows_with_cache: int                # 3 per step: q, k, v of the new token
    projection_rows_without_cache: int             # Σ 3(t + 1): every row projected again
    score_interactions_with_cache: int             # Σ L_t: the new query against the cache
    score_interactions_without_cache: int          # Σ (t + 1)²: the whole score matrix again
    cache_elements: int                            # min(n, W)·(d_k + d_v) per layer and head
    cache_elements_per_step: tuple[int, ...]       # L_t·(d_k + d_v) after each step
    window: int | None = None                      # W of a rolling buffer (None: causal)

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
    (t + 1)(t + 2)/2 of them); with it, one query meets the L_t cached keys (4 + 5 + 6;
    with a sliding window of W, L_t = min(t + 1, W) and the cache never holds more)."""
    if problem.prefill is None:
        raise ProblemError("work counts need decode = { prefill = P }")
    P, n, width = problem.prefill, problem.n, problem.d_k + problem.d_v
    steps = range(P, n)
    cached = [len(cache_keys(problem, t)) for t in steps]      # L_t after eviction
    assert problem.mask is not None      # decoding is causal: a decode problem has a mask
    window = causal_window_width(problem.mask.tolist(), n)
    return WorkCounts(P, n, 3 * (n - P), sum(3 * (t + 1) for t in steps), sum(cached),
                      sum((t + 1) ** 2 for t in steps), cached[-1] * width,
                      tuple(size * width for size in cached), None if window == n else window)


class Decode:
    """The decode steps of one trace, built from its exact Q, K, V rows."""

    def __init__(self, trace: TraceView) -> None:
        self.trace = trace
        p = trace.problem
        assert p.prefill is not None     # the Trace builds Decode only for a decode problem
        self.prefill: int = p.prefill
        self.positions = tuple(range(p.prefill, p.n))
        #: ALiBi or a soft-cap: the softmax takes logits other than scale·scores (a step)
        self.has_logits = logit_step(p) != "scaled"
        self._engines: dict[int, Engine] = {}

    def name(self, t: int, part: str) -> str:
        return f"decode_{t}_{part}"

    def cache(self, t: int) -> tuple[int, ...]:
        """The cached keys (absolute positions) step t attends over, after eviction."""
        return cache_keys(self.trace.problem, t)

    # -- each step is a problem of its own, through the one engine -------------------------
    def engine(self, t: int) -> Engine:
        """Step t as its own Problem: the query q_t over the cached keys and values, with the
        same scale, sink and soft-cap, and ALiBi by absolute positions (q at t, the cached keys
        at theirs), worked by the one engine."""
        if t not in self._engines:
            p = self.trace.problem
            cache = self.cache(t)
            Q, K, V = (self.trace.step(name) for name in ("Q", "K", "V"))
            variants = p.variant_keys       # the sink, the soft-cap, ALiBi: the softmax's variants
            if p.alibi is not None:
                variants["alibi"] = {**p.alibi.value, "positions": [t], "key_positions": list(cache)}
            step = Problem(Q=[[Q[t, c] for c in range(p.d_k)]], K=[[K[j, c] for c in range(p.d_k)] for j in cache],
                           V=[[V[j, c] for c in range(p.d_v)] for j in cache], scale=p.scale,
                           tokens=[p.tokens[t]], key_tokens=[p.tokens[j] for j in cache], **variants)
            self._engines[t] = Engine(step)
        return self._engines[t]

    def _part(self, t: int, part: str) -> tuple[Callable[[int, int], sympy.Expr], StepNumbers]:
        """The exact entries and the numbers of one softmax-side part of step t, from its engine
        (made when first asked for: the Trace is still being built when the steps are added)."""
        def exact(i: int, j: int) -> sympy.Expr:
            e = self.engine(t)
            entry = {"scores": e.scores.exact, "logits": e.logit, "weights": e.weight, "output": e.output}[part]
            return entry(0, int(j))
        return exact, _EngineRow(lambda: self.engine(t), part)

    # -- the steps ------------------------------------------------------------------------
    def parts(self) -> tuple[str, ...]:
        return tuple(part for part in _PARTS if part != "logits" or self.has_logits)

    def add_steps(self, add: AddStep) -> None:
        p = self.trace.problem
        tok = p.tokens
        dk = tuple(str(c) for c in range(p.d_k))
        dv = tuple(str(c) for c in range(p.d_v))

        def row_of(step: str, t: int) -> Callable[[SupportsInt, SupportsInt], sympy.Expr]:
            return lambda i, c: self.trace.step(step)[t, int(c)]

        def rows_of(step: str, cache: tuple[int, ...]) -> Callable[[SupportsInt, SupportsInt], sympy.Expr]:
            return lambda k, c: self.trace.step(step)[cache[int(k)], int(c)]

        for t in self.positions:
            cache = self.cache(t)
            me, cached, size = (tok[t],), tuple(tok[j] for j in cache), len(cache)

            parts: dict[str, tuple[tuple[int, int], tuple, tuple, Callable]] = {
                "q": ((1, p.d_k), me, dk, row_of("Q", t)),
                "k": ((1, p.d_k), me, dk, row_of("K", t)),
                "v": ((1, p.d_v), me, dv, row_of("V", t)),
                "K_cache": ((size, p.d_k), cached, dk, rows_of("K", cache)),
                "V_cache": ((size, p.d_v), cached, dv, rows_of("V", cache)),
            }
            for part in self.parts():
                if part in parts:
                    shape, rows, cols, entry = parts[part]
                    add(self.name(t, part), shape, rows, cols, entry, ExactNumbers(entry, shape[1]))
                    continue
                exact, numbers = self._part(t, part)
                width = p.d_v if part == "output" else size
                add(self.name(t, part), (1, width), me, dv if part == "output" else cached, exact, numbers)
        counts = work_counts(p).row

        def count(i: object, j: SupportsInt) -> sympy.Expr:
            return sympy.Integer(counts[int(j)])

        add(WORK_STEP, (1, len(WORK_COLUMNS)), ("work",), WORK_COLUMNS, count, ExactNumbers(count, len(WORK_COLUMNS)))

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(self.name(t, part) for t in self.positions for part in self.parts()) + (WORK_STEP,)


class _EngineRow:
    """A decode step's numbers: row 0 of one step of its own engine (the StepNumbers interface)."""

    def __init__(self, engine: Callable[[], Engine], part: str) -> None:
        self._engine, self.part = engine, part

    @property
    def engine(self) -> Engine:
        return self._engine()

    @property
    def step(self) -> str:
        return self.engine.logit_step if self.part == "logits" else self.part

    def symbols(self) -> frozenset:
        return self.engine.symbols_of(self.step)

    def known_row(self, i: int) -> list:
        return self.engine.known_row(self.step, 0)

    def balls(self, i: int, prec: int) -> list:
        return self.engine.balls(self.step, 0, prec)
