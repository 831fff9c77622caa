"""Online softmax (FlashAttention's tiling) as steps of the one Trace.

``tiles = B`` splits the keys into blocks of B (the last one shorter);
``tiles = [s1, s2, …]`` splits them before the keys s1 < s2 < ….  Each query row
then reads its keys block by block, as FlashAttention does, keeping three running
quantities per block b (the row's allowed keys seen so far, blocks 0..b):

    running_max[i, b]      m_b = max of the logits (scaled scores) seen so far
    rescale[i, b]          α_b = e^(m_(b−1) − m_b)   (1 for the first block)
    running_sum[i, b]      ℓ_b = α_b·ℓ_(b−1) + Σ_(j in block b) e^(x_j − m_b)
    running_output_b[i, c] O_b = α_b·O_(b−1) + Σ_(j in block b) e^(x_j − m_b)·V[j, c]

and finishes with weights e^(x_j − m_last)/ℓ_last and output O_last/ℓ_last, equal
to the plain steps (fact ``online-softmax-equals-softmax``).

Why these shapes: running_max, rescale and running_sum are one number per row and
block, so n × blocks matrices whose columns read left to right as the algorithm
runs.  The running output is a d_v-vector per row and block, so it is one n × d_v
step per block (``running_output_0``, ``running_output_1``, …): each reads like
the plain ``output`` and the last one divided by the last running sum *is* it.

The exact entries are the closed forms (ℓ_b = Σ over the keys seen of
e^(x_j − m_b)); the recurrence above is what the document writes out with
numbers and what the fact proves equal to them.  Masked keys are skipped; a row
whose first blocks hold no allowed key has m = −∞, ℓ = 0 and O = 0 there, and the
first rescale after that is e^(−∞) = 0 (FlashAttention starts from m = −∞, ℓ = 0;
FlexAttention treats a −∞ maximum as 0 before exponentiating, so no −∞ − (−∞)
arises).  Blocks are 0-based, as rows and columns are everywhere.

The x_j are the *logits* the plain softmax takes (``Trace.logit_step``): the scaled
scores, or with ALiBi the biased ones and with a soft-cap the capped ones, so the
online steps run on exactly what the softmax runs on (the running maximum is
decided on the logits before the cap: tanh is increasing).

With a sink logit s (gpt-oss), the sink *initialises* the running state before
block 0, as vLLM's Triton attention kernel does (``M = sink``, ``L = 1``, O = 0):
m_(−1) = s, ℓ_(−1) = e^(s − s) = 1, O_(−1) = 0.  Every running maximum is then the
larger of s and the logits seen, block 0 gets the rescale factor e^(s − m_0) (1 when
the sink stays the maximum), and every running sum carries the sink's term
e^(s − m_b); O never does (the sink has no value row).  So O_last/ℓ_last and
e^(x_j − m_last)/ℓ_last are the sink softmax's output and weights.  Folding the sink
in at the end instead (ℓ_last + e^(s − m_last), as OpenAI's gpt-oss Triton kernel
does) gives the same ℓ_last: the fact ``online-softmax-equals-softmax`` proves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, SupportsInt

import sympy

from symattn.numbers.compare import sign
from symattn.trace.stepnumbers import ExactNumbers
from symattn.trace.source import AddStep, TraceView

NEG_INF = sympy.S.NegativeInfinity

#: the "key" index of the sink logit in a BlockState's best (it has no key column)
SINK = -1

@dataclass(frozen=True)
class BlockState:
    """Row i after block b: the allowed keys seen so far, those new in this block, and the
    key of the running maximum (None while no allowed key has been seen; :data:`SINK`
    while the sink logit is the largest)."""

    seen: tuple[int, ...]
    new: tuple[int, ...]
    best: int | None

    @property
    def top(self) -> int:
        """``best`` where a term is taken: once a key (or the sink) has been seen it is set."""
        assert self.best is not None, "no key and no sink seen yet: no running maximum"
        return self.best


def _ints(entry: Callable[[int, int], sympy.Expr]) -> Callable[[SupportsInt, SupportsInt], sympy.Expr]:
    """An entry function that also takes SymPy's Integer indices (ImmutableMatrix passes them)."""
    return lambda i, j: entry(int(i), int(j))


class Online:
    """The online-softmax steps of one trace, built from its exact scores, scale and V."""

    def __init__(self, trace: TraceView, blocks: tuple[tuple[int, int], ...] | None = None) -> None:
        """``blocks``: another split of the keys than the problem's tiles (the fact tries them all)."""
        self.trace = trace
        p = trace.problem
        blocks = blocks if blocks is not None else p.tiles
        assert blocks is not None        # no split given: the Trace builds Online only for tiles
        self.blocks: tuple[tuple[int, int], ...] = blocks
        self.scale_sign = sign(p.scale)
        self.sink = p.sink
        #: the logits before any cap decide the order (tanh is increasing)
        self._order_step = "biased" if p.alibi is not None else "scaled"
        self._states: dict[int, tuple[BlockState, ...]] = {}
        self._cache: dict[tuple, sympy.Expr] = {}

    # -- the algorithm's bookkeeping, decided exactly ------------------------------------
    def _pre(self, i: int, j: int) -> sympy.Expr:
        """Key j's logit before any cap, or the sink logit (j = SINK)."""
        return self.sink if j == SINK else self.trace.step(self._order_step)[i, j]

    def _greater(self, i: int, j: int, k: int) -> bool:
        """logit[i, j] > logit[i, k], exactly (either may be the sink)."""
        if self._order_step == "scaled" and SINK not in (j, k):
            scores = self.trace.step("scores")     # the scale's sign flips the scores' order
            a, b = scores.fraction(i, j), scores.fraction(i, k)
            diff = sign(scores[i, j] - scores[i, k]) if a is None or b is None else (a > b) - (a < b)
            return diff * self.scale_sign > 0
        x, y = self._pre(i, j), self._pre(i, k)
        if x.is_Rational and y.is_Rational:
            return bool(x > y)
        return sign(x - y) > 0

    def states(self, i: int) -> tuple[BlockState, ...]:
        """Row i block by block: what has been seen and where the running maximum is."""
        if i not in self._states:
            allowed = set(self.trace.allowed(i))
            seen: list[int] = []
            best: int | None = None if self.sink is None else SINK
            out = []
            for start, end in self.blocks:
                new = tuple(j for j in range(start, end) if j in allowed)
                for j in new:
                    if best is None or self._greater(i, j, best):
                        best = j
                seen.extend(new)
                out.append(BlockState(tuple(seen), new, best))
            self._states[i] = tuple(out)
        return self._states[i]

    def block_keys(self, b: int) -> tuple[str, ...]:
        start, end = self.blocks[b]
        return tuple(self.trace.problem.key_tokens[start:end])

    # -- exact pieces --------------------------------------------------------------------
    def value(self, i: int, j: int) -> sympy.Expr:
        """x_j: key j's logit (the entry of the softmax's logit step), or the sink logit."""
        return self.sink if j == SINK else self.trace.logit(i, j)

    def exponent(self, i: int, j: int, k: int) -> sympy.Expr:
        """x_j − x_k, exactly (scale·(scores[i, j] − scores[i, k]) for plain logits)."""
        if self.trace.logit_step == "scaled" and SINK not in (j, k):
            scores = self.trace.step("scores")
            return self.trace.problem.scale * (scores[i, j] - scores[i, k])
        if j == k:
            return sympy.S.Zero
        x, y = self.value(i, j), self.value(i, k)
        difference = x - y
        return sympy.expand(difference) if self.trace.problem.softcap is None else difference

    def term(self, i: int, j: int, k: int) -> sympy.Expr:
        """e^(x_j − x_k): key j's exponential against the running maximum at key k."""
        key = ("e", i, j, k)
        if key not in self._cache:
            self._cache[key] = sympy.exp(self.exponent(i, j, k))
        return self._cache[key]

    def running_max(self, i: int, b: int) -> sympy.Expr:
        best = self.states(i)[b].best
        return NEG_INF if best is None else self.value(i, best)

    def rescale(self, i: int, b: int) -> sympy.Expr:
        state = self.states(i)[b]
        if b == 0:      # the sink's initial state m = s, ℓ = 1 meets block 0's maximum
            return sympy.S.One if self.sink is None else self.term(i, SINK, state.top)
        old = self.states(i)[b - 1].best
        if old is None:
            return sympy.S.Zero          # e^(−∞): nothing seen before, nothing to rescale
        return self.term(i, old, state.top)

    def sink_term(self, i: int, b: int) -> sympy.Expr:
        """The sink's term e^(s − m_b) of running_sum[i, b] (0 without a sink)."""
        return sympy.S.Zero if self.sink is None else self.term(i, SINK, self.states(i)[b].top)

    def running_sum(self, i: int, b: int) -> sympy.Expr:
        key = ("l", i, b)
        if key not in self._cache:
            state = self.states(i)[b]
            self._cache[key] = sympy.Add(*[self.term(i, j, state.top) for j in state.seen],
                                         self.sink_term(i, b))
        return self._cache[key]

    def running_output(self, b: int) -> Callable[[int, int], sympy.Expr]:
        def entry(i: int, c: int) -> sympy.Expr:
            key = ("O", i, b, c)
            if key not in self._cache:
                V, state = self.trace.step("V"), self.states(i)[b]
                self._cache[key] = sympy.Add(*[V[j, c] * self.term(i, j, state.top)
                                               for j in state.seen])
            return self._cache[key]

        return entry

    # -- the recurrence as FlashAttention runs it (what the fact checks) -----------------
    def recurrence(self, i: int, *, rescaled: bool = True, places: int | None = None
                   ) -> tuple[list[sympy.Expr], list[list[sympy.Expr]]]:
        """Row i's running sums and outputs built block by block: ℓ_b = α_b·ℓ_(b−1) +
        Σ_new e^(x_j − m_b), O_b likewise.  Two named mistakes run the same recurrence
        changed: ``rescaled=False`` takes every α as 1 (online-no-rescale); ``places=k``
        rounds every exponential (α and the new terms) to k places first (early-rounding)."""
        sums, outs, _ = self.run(i, rescaled=rescaled, places=places)
        return sums, outs

    def run(self, i: int, *, rescaled: bool = True, places: int | None = None
            ) -> tuple[list[sympy.Expr], list[list[sympy.Expr]], dict[int, sympy.Expr]]:
        """:meth:`recurrence`, and each key's coefficient in the last running sum (its
        weight times ℓ_last: e^(x_j − m_last) when rescaled; the sink's under :data:`SINK`)."""
        key = ("run", i, rescaled, places)
        if key in self._cache:
            return self._cache[key]
        V = self.trace.step("V")
        d_v = self.trace.problem.d_v

        def rounded(x: sympy.Expr) -> sympy.Expr:
            if places is None or x.is_Integer:
                return x
            from symattn.numbers.certify import Rounding, certify

            f = certify(x, Rounding(places=places)).as_fraction()
            return sympy.Rational(f.numerator, f.denominator)

        sums: list[sympy.Expr] = []
        outs: list[list[sympy.Expr]] = []
        coeffs: dict[int, sympy.Expr] = {}
        # the sink's initial state ℓ = e^(s − s) = 1 (its coefficient is under SINK)
        total = sympy.S.Zero if self.sink is None else sympy.S.One
        if self.sink is not None:
            coeffs[SINK] = sympy.S.One
        out = [sympy.S.Zero] * d_v
        for b, state in enumerate(self.states(i)):
            alpha = rounded(self.rescale(i, b)) if rescaled else sympy.S.One
            fresh = [rounded(self.term(i, j, state.top)) for j in state.new]
            total = alpha * total + sympy.Add(*fresh)
            out = [alpha * out[c] + sympy.Add(*[V[j, c] * e for j, e in zip(state.new, fresh)])
                   for c in range(d_v)]
            coeffs = {j: alpha * e for j, e in coeffs.items()}
            coeffs.update(zip(state.new, fresh))
            sums.append(total)
            outs.append(out)
        self._cache[key] = (sums, outs, coeffs)
        return sums, outs, coeffs

    # -- the steps ------------------------------------------------------------------------
    def add_steps(self, add: AddStep) -> None:
        """Add running_max, rescale, running_sum and running_output_b to the trace."""
        p = self.trace.problem
        rows, count = p.tokens, len(self.blocks)
        cols = tuple(str(b) for b in range(count))
        dv_cols = tuple(str(c) for c in range(p.d_v))
        for name, entry in (("running_max", _ints(self.running_max)), ("rescale", _ints(self.rescale)),
                            ("running_sum", _ints(self.running_sum))):
            add(name, (p.n, count), rows, cols, entry, ExactNumbers(entry, count))
        for b in range(count):
            entry = _ints(self.running_output(b))
            add(f"running_output_{b}", (p.n, p.d_v), rows, dv_cols, entry, ExactNumbers(entry, p.d_v))

    @property
    def step_names(self) -> tuple[str, ...]:
        return ("running_max", "rescale", "running_sum",
                *(f"running_output_{b}" for b in range(len(self.blocks))))
