"""Named mistakes: each is the same engine run on a Problem with one named change.

Why: a mistake is diagnosed by *reproducing* it exactly, never by a second
implementation of attention.  Every variant here is a :class:`Problem` built
from the base problem with one change and run through ``attend`` (or a
documented view of such a trace), computed once per problem and reused for
every figure and every student.

========================  =====================================================
code                      the change
========================  =====================================================
``unscaled``              scale c·(1/√d_k) becomes c: the √d_k is forgotten
``scaled-by-d_k``         scale c/√d_k becomes c/d_k (scale 1 becomes 1/d_k)
``scaled-anyway``         scale 1 (a problem that leaves the √d_k out) becomes 1/√d_k;
                          such a problem has no ``unscaled`` mistake
``transposed-scores``     K·Qᵀ instead of Q·Kᵀ: W_q and W_k swapped (or Q and K)
``softmax-over-columns``  the weights of the transposed-scores trace, read
                          transposed: a softmax down each column of the scores
``scaled-after-softmax``  softmax(Q·Kᵀ)/√d_k: the unscaled trace's weights and
                          output times the scale (a documented transformation)
``e-as-2.7``              2.7^x for e^x: the scale times ln 2.7 (same engine)
``values-from-keys``      K used where V belongs (W_v = W_k, or V = K)
``transposed-output``     the output matrix read transposed (square outputs only)
``wrong-step``            the answer is another step's value at the same place
``early-rounding``        ``scaled`` or ``shifted`` rounded to k places before
                          the softmax (a Problem whose Q is the rounded matrix,
                          K the identity and scale 1); the exponentials rounded
                          before the sum (round(exp)/Σ round(exp), rationals
                          from the trace's exp values); or the weights rounded
                          before the output: Σ_j round(w_ij)·V_jc, a product of
                          trace values (the student's own arithmetic)
``mask-after-softmax``    softmax over every key, then the blocked weights set
                          to 0 without renormalising (the unmasked trace's
                          weights, zeroed: a documented view of that trace)
``masked-by-zero``        blocked scores set to 0 instead of −∞ (a Problem whose
                          Q is the scores with 0 where blocked, K the identity,
                          no mask)
``window-off-by-one``     a sliding window of W + 1 keys (``q − kv ≤ W``, as
                          attention-gym counts) or W − 1 keys
========================  =====================================================

Each variant's mistakes are tabled the same way in its own module, which builds them:
RoPE's in :mod:`symattn.check.mistakes.rope`, online softmax's in
:mod:`~symattn.check.mistakes.online`, ALiBi's, the soft-cap's and the sink's in
:mod:`~symattn.check.mistakes.logits`, the backward pass's in
:mod:`~symattn.check.mistakes.backward` (a new variant's mistakes add a row there, not here).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property, partial
from typing import Any, Callable

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.numbers.masked import Masked
from symattn.check.mistakes.backward import BackwardMistakes
from symattn.check.mistakes.logits import logit_variants
from symattn.check.mistakes.rope import rope_variants
from symattn.check.mistakes.online import online_mistakes
from symattn.check.targets import Cell, Index, Source, TargetSpec, resolve
from symattn.exact.parser import Name, Node
from symattn.check.verdict import MistakeCell
from symattn.check.codes import MistakeCode
from symattn.errors import SymattnError
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace, attend
from symattn.vocab import StepName

__all__ = ["Mistake", "Mistakes", "MISTAKE_CODES"]

MISTAKE_CODES = MistakeCode.catalogued()   # the forward's, the variants' and the backward's (BACKWARD_CODES)

_AFTER_SCORES = frozenset(StepName.span(StepName.SCALED, StepName.OUTPUT))
_SOFTMAX = frozenset(StepName.span(StepName.EXP, StepName.OUTPUT))
_AFTER_MASK = frozenset(StepName.span(StepName.MASKED, StepName.OUTPUT))
_AFTER_WEIGHTS = frozenset(StepName.span(StepName.WEIGHTS, StepName.OUTPUT))
_WEIGHTS = frozenset((StepName.WEIGHTS,))
_EARLY_PLACES = (2, 3)       # always tried, besides the places the figure is written at
_MAX_EARLY_PLACES = 6


@dataclass(frozen=True)
class Mistake:
    """One named mistake: which steps it changes and the source to read them from."""

    code: str
    detail: str
    steps: frozenset[str]
    source: Source


def _rebuild(p: Problem, **changes: object) -> Problem:
    """The base problem with some keys changed (inputs as exact matrices)."""
    keys: dict[str, Any] = {k: m.to_sympy() for k, m in p.inputs.items()}   # Problem's keywords
    keys.update(tokens=list(p.tokens), key_tokens=list(p.key_tokens), scale=p.scale,
                mask=_mask_rows(p), **p.variant_keys, rope=p.rope)
    keys.update(changes)
    return Problem(**keys)


def _qk(trace: Trace) -> tuple[sympy.ImmutableMatrix, sympy.ImmutableMatrix]:
    """The queries and keys whose dot products are the scores (the rotated ones with RoPE)."""
    if trace.problem.rope is not None:
        return trace.Q_rot.matrix, trace.K_rot.matrix
    return trace.Q.matrix, trace.K.matrix


def _mask_rows(p: Problem, transpose: bool = False) -> list[list[int]] | None:
    if p.mask is None:
        return None
    m = p.mask.T if transpose else p.mask
    return [[int(m[i, j]) for j in range(m.cols)] for i in range(m.rows)]


def _direct(trace: Trace, Q: object, K: object, **changes: object) -> Problem:
    """A Q, K, V problem from a trace's values (for changes below the projections)."""
    p = trace.problem
    keys: dict[str, Any] = dict(Q=Q, K=K, V=trace.V.matrix, tokens=list(p.tokens),
                                   key_tokens=list(p.key_tokens), scale=p.scale,
                                   mask=_mask_rows(p), **p.variant_keys)
    keys.update(changes)
    return Problem(**keys)


def _rational(d: CertifiedDecimal | Masked) -> sympy.Rational:
    assert isinstance(d, CertifiedDecimal), "exp, weights: never −∞ (e^−∞ = 0); scores: only masked"
    return sympy.Rational(d.mantissa, 10**-d.exponent)


class _ScaledSource(Source):
    """Some steps of a trace multiplied by a constant: softmax first, then the scale.

    A documented transformation of trace values: softmax(Q·Kᵀ)·s is the unscaled
    trace's weights times s, and its output is the unscaled output times s.
    """

    def __init__(self, trace: Trace, factor: sympy.Expr, steps: frozenset[str]) -> None:
        super().__init__(trace)
        self.factor, self.steps = factor, steps

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        value = super().exact(name, i, j)
        return self.factor * value if name in self.steps else value

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name not in self.steps:
            return super().decimal(name, i, j, rounding)
        return certify(self.exact(name, i, j), rounding)


class _RoundedExpSource(Source):
    """The softmax finished by hand from exponentials rounded to k places.

    row_sum = Σ_j round(exp_ij), weights = round(exp_ij) / row_sum, output =
    weights·V: exact rationals from the trace's own ``exp`` values (the
    student's arithmetic on rounded numbers), not a second softmax.
    """

    STEPS = frozenset(StepName.span(StepName.ROW_SUM, StepName.OUTPUT))

    def __init__(self, trace: Trace, places: int) -> None:
        super().__init__(trace)
        self.places = places
        self._exp: list[list[Fraction]] | None = None

    def _rounded(self, i: int) -> list[Fraction]:
        if self._exp is None:
            rows = self.trace.exp.decimals(Rounding(places=self.places))
            self._exp = [[Fraction(int(r.p), int(r.q)) for r in map(_rational, row)] for row in rows]
        return self._exp[i]

    def _value(self, name: str, i: int, j: int) -> Fraction | None:
        row = self._rounded(i)
        total = sum(row, Fraction(0))
        if total == 0:
            return None          # every exponential rounded to 0: no such student answer
        if name == "row_sum":
            return total
        if name == "weights":
            return row[j] / total
        V = self.trace.V
        if not V.is_rational:
            return None          # surds in V: the hand product is not a rational; not modelled
        column = (V.fraction(k, j) for k in range(len(row)))   # every one a Fraction: V is rational
        return sum((w * v for w, v in zip(row, column) if v is not None), Fraction(0)) / total

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        if name not in self.STEPS:
            return super().exact(name, i, j)
        value = self._value(name, i, j)
        if value is None:
            raise SymattnError(f"row {i}: rounded exponentials give no rational value here")
        return sympy.Rational(value.numerator, value.denominator)

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name not in self.STEPS:
            return super().decimal(name, i, j, rounding)
        value = self._value(name, i, j)
        if value is None:
            raise SymattnError(f"row {i}: rounded exponentials give no rational value here")
        return certify(value, rounding)


class _RoundedWeightsSource(Source):
    """The output computed from weights rounded to k places: Σ_j round(w_ij)·V_jc.

    A documented transformation of trace values (the student's own product of
    rounded weights and V), not a second softmax: the weights come from the trace.
    """

    def __init__(self, trace: Trace, places: int) -> None:
        super().__init__(trace)
        self.places = places
        self._weight_rows: dict[int, list[sympy.Rational]] = {}   # not Source._rows (a cache)

    def _weights(self, i: int) -> list[sympy.Rational]:
        if not self._weight_rows:
            for r, row in enumerate(self.trace.weights.decimals(Rounding(places=self.places))):
                self._weight_rows[r] = [_rational(d) for d in row]
        return self._weight_rows[i]

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        if name != "output":
            return super().exact(name, i, j)
        V = self.trace.V
        return sympy.Add(*[w * V[k, j] for k, w in enumerate(self._weights(i))])

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name != "output":
            return super().decimal(name, i, j, rounding)
        return certify(self.exact(name, i, j), rounding)


class _ZeroedAfterSoftmaxSource(Source):
    """Softmax over every key, then the blocked weights set to 0, not renormalised.

    A documented view of the unmasked trace: weights[i, j] is its weight where the
    base problem allows key j and 0 where it blocks it; output = Σ_j weights·V
    (the rows now sum to less than 1).
    """

    STEPS = _AFTER_WEIGHTS

    def __init__(self, unmasked: Trace, base: Trace) -> None:
        super().__init__(unmasked)
        self.base = base

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        if name == "weights":
            return self.trace.weights[i, j] if self.base.is_allowed(i, j) else sympy.S.Zero
        if name == "output":
            V, W = self.trace.V, self.trace.weights
            return sympy.Add(*[W[i, k] * V[k, j] for k in range(self.trace.problem.m)
                               if self.base.is_allowed(i, k)])
        return super().exact(name, i, j)

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name == "weights" and self.base.is_allowed(i, j):
            return super().decimal(name, i, j, rounding)
        if name in self.STEPS:
            return certify(self.exact(name, i, j), rounding)
        return super().decimal(name, i, j, rounding)


class Mistakes:
    """Every named mistake of one problem (the backward pass's: ``mistakes.backward``), built lazily and once."""

    def __init__(self, trace: Trace) -> None:
        self.trace, self.problem = trace, trace.problem
        self._backward = BackwardMistakes(trace, self._attempt)
        self._early: dict[tuple[str, int], Mistake | None] = {}
        self._cells: dict[tuple[str, str, str], list[Cell] | None] = {}
        self._base = Source(trace)   # every target's wrong-step cells: its rows certified once

    # -- the fixed variants ------------------------------------------------------
    def _attempt(self, build: Callable[[], Problem]) -> Trace | None:
        try:
            return attend(build())
        except SymattnError:
            return None    # the change is impossible for this problem (shapes, mask)
        except (ArithmeticError, ValueError, RecursionError):
            return None    # a variant that cannot be built explains nothing (never the figure's
            #                fault: the figure is judged without it)

    @cached_property
    def _swapped(self) -> Trace | None:
        p = self.problem
        if p.projected and "X_kv" not in p.inputs:
            return self._attempt(lambda: _rebuild(p, W_q=p.W_k, W_k=p.W_q))
        if p.n != p.m:
            return None
        t = self.trace
        Q, K = _qk(t)
        return self._attempt(lambda: _direct(t, K, Q, tokens=list(p.key_tokens), key_tokens=list(p.tokens)))

    @cached_property
    def _column_softmax(self) -> Trace | None:
        p, t = self.problem, self.trace
        Q, K = _qk(t)
        return self._attempt(lambda: _direct(t, K, Q, tokens=list(p.key_tokens), key_tokens=list(p.tokens),
                                             mask=_mask_rows(p, transpose=True)))

    @cached_property
    def fixed(self) -> list[Mistake]:
        """The mistakes that do not depend on the figure's precision (where possible)."""
        p = self.problem
        root = sympy.sqrt(p.d_k)
        c = p.scale * root          # the scale is c/√d_k: c is the sharpness (1 by default)
        out: list[Mistake] = []
        unscaled = None
        # c = scale·√d_k and c/d_k = scale/√d_k equal the scale only when d_k = 1 or the scale
        # is 0: decided here, not by sympy.simplify (60 ms a problem, most of a Checker's cost)
        same_scale = p.d_k == 1 or p.scale.is_zero is True
        # a problem with scale 1 leaves the √d_k out on purpose (the lesson's "without it"):
        # there the slip is dividing anyway, and its own trace is the unscaled one
        leaves_scale_out = p.scale == 1
        scalings = ((MistakeCode.SCALED_ANYWAY, f"divided by √d_k = √{p.d_k}, which this problem leaves out",
                     1 / root),
                    (MistakeCode.SCALED_BY_D_K, f"divided by d_k = {p.d_k}, which this problem leaves out",
                     sympy.Rational(1, p.d_k))) if leaves_scale_out else \
                   ((MistakeCode.UNSCALED, "no division by √d_k", c),
                    (MistakeCode.SCALED_BY_D_K, f"divided by d_k = {p.d_k}, not √d_k", c / p.d_k))
        for code, detail, scale in scalings:
            if same_scale:
                continue
            trace = self._attempt(partial(_rebuild, p, scale=scale))
            if trace is not None:
                out.append(Mistake(code, detail, _AFTER_SCORES, Source(trace)))
                unscaled = trace if code == MistakeCode.UNSCALED else unscaled
        if leaves_scale_out and not same_scale:
            unscaled = self.trace
        if self._swapped is not None:
            out.append(Mistake(MistakeCode.TRANSPOSED_SCORES, "K·Qᵀ instead of Q·Kᵀ, or W_q and W_k swapped",
                               frozenset(StepName.span(StepName.SCORES, StepName.OUTPUT)), Source(self._swapped)))
        if self._column_softmax is not None:
            out.append(Mistake(MistakeCode.SOFTMAX_OVER_COLUMNS, "each column sums to 1, not each row",
                               _WEIGHTS, Source(self._column_softmax, _WEIGHTS)))
        if unscaled is not None:
            out.append(Mistake(MistakeCode.SCALED_AFTER_SOFTMAX, "softmax(Q·Kᵀ) divided by √d_k",
                               _AFTER_WEIGHTS, _ScaledSource(unscaled, p.scale / c, _AFTER_WEIGHTS)))
        e_trace = self._attempt(lambda: _rebuild(p, scale=p.scale * sympy.log(sympy.Rational(27, 10))))
        if e_trace is not None:
            out.append(Mistake(MistakeCode.E_AS_2_7, "powers of 2.7 instead of e", _SOFTMAX,
                               Source(e_trace)))
        values = self._values_from_keys()
        if values is not None:
            out.append(Mistake(MistakeCode.VALUES_FROM_KEYS, "K used where V belongs", frozenset(("output",)),
                               Source(values)))
        out += self._mask_mistakes()
        out += [Mistake(code, detail, steps, Source(trace))
                for code, detail, steps, trace in rope_variants(self.trace, self._attempt)]
        out += [Mistake(code, detail, steps, Source(trace))
                for code, detail, steps, trace in logit_variants(self.trace, self._attempt)]
        out += [Mistake(*found) for found in online_mistakes(self.trace, [])]
        out += [Mistake(*found) for found in self._backward.fixed()]
        if p.n == p.d_v:
            out.append(Mistake(MistakeCode.TRANSPOSED_OUTPUT, "the output matrix transposed",
                               frozenset(("output",)), Source(self.trace, frozenset(("output",)))))
        return out

    def _mask_mistakes(self) -> list[Mistake]:
        """The mask applied wrongly: after the softmax, by a 0 score, or a window off by one."""
        p, t = self.problem, self.trace
        if p.mask is None:
            return []
        out: list[Mistake] = []
        unmasked = self._attempt(lambda: _rebuild(p, mask=None))
        if unmasked is not None:
            out.append(Mistake(MistakeCode.MASK_AFTER_SOFTMAX,
                               "softmax over every key, then blocked weights set to 0 "
                               "without renormalising", _ZeroedAfterSoftmaxSource.STEPS,
                               _ZeroedAfterSoftmaxSource(unmasked, t)))
        scores = t.scores.matrix
        zeroed = sympy.Matrix([[scores[i, j] if t.is_allowed(i, j) else 0 for j in range(p.m)]
                               for i in range(p.n)])
        by_zero = self._attempt(lambda: _direct(t, zeroed, sympy.eye(p.m), mask=None))
        if by_zero is not None:
            out.append(Mistake(MistakeCode.MASKED_BY_ZERO, "blocked scores set to 0 instead of −∞",
                               frozenset(StepName.span(StepName.SHIFTED, StepName.OUTPUT)), Source(by_zero)))
        if p.window is not None:
            width, causal = p.window
            for other in (width + 1, width - 1):
                if other < 1:
                    continue
                trace = self._attempt(partial(_rebuild, p, mask={"window": other, "causal": causal}))
                if trace is not None:
                    out.append(Mistake(MistakeCode.WINDOW_OFF_BY_ONE,
                                       f"a window of {other} key{'s' if other != 1 else ''} instead of {width}",
                                       _AFTER_MASK, Source(trace)))
        return out

    def _values_from_keys(self) -> Trace | None:
        p, t = self.problem, self.trace
        if p.d_k != p.d_v:
            return None
        if p.projected:
            return self._attempt(lambda: _rebuild(p, W_v=p.W_k))
        return self._attempt(lambda: _direct(t, *_qk(t), V=t.K.matrix))

    # -- early rounding ---------------------------------------------------------------
    def early(self, step: str, places: int) -> Mistake | None:
        key = (step, places)
        if key not in self._early:
            self._early[key] = self._build_early(step, places)
        return self._early[key]

    def _build_early(self, step: str, places: int) -> Mistake | None:
        t, p = self.trace, self.problem
        detail = f"{step} rounded to {places} place{'s' if places != 1 else ''} first"
        if step == "weights":
            return Mistake(MistakeCode.EARLY_ROUNDING, detail, frozenset(("output",)),
                           _RoundedWeightsSource(t, places))
        if step == "exp":
            return Mistake(MistakeCode.EARLY_ROUNDING, detail, _RoundedExpSource.STEPS,
                           _RoundedExpSource(t, places))
        rounding = Rounding(places=places)
        rows = []
        for i, row in enumerate(t.step(step).decimals(rounding)):
            rows.append([_rational(d) if t.is_allowed(i, j) else 0 for j, d in enumerate(row)])
        identity = sympy.eye(p.m)
        trace = self._attempt(lambda: _direct(t, sympy.Matrix(rows), identity, scale=1))
        if trace is None:
            return None
        later = {"scaled": frozenset(StepName.span(StepName.SHIFTED, StepName.OUTPUT)), "shifted": _SOFTMAX}[step]
        return Mistake(MistakeCode.EARLY_ROUNDING, detail, later, Source(trace))

    def early_for(self, places: int | None) -> list[Mistake]:
        ks = set(_EARLY_PLACES)
        if places is not None and 1 <= places <= _MAX_EARLY_PLACES:
            ks.add(places)
        out = []
        for k in sorted(ks):
            for step in ("scaled", "shifted", "exp", "weights"):
                m = self.early(step, k)
                if m is not None:
                    out.append(m)
            if ("online", k) not in self._early:     # the running sums' exponentials rounded
                found = online_mistakes(self.trace, [k])[1:]
                self._early[("online", k)] = Mistake(*found[0]) if found else None
            if (online := self._early[("online", k)]) is not None:
                out.append(online)
            out += [Mistake(*found) for found in self._backward.early(k)]
        return out

    # -- cells of a target ----------------------------------------------------------
    def _resolve(self, key: str, mistake: Mistake, spec: TargetSpec,
                 shape: tuple[int, int]) -> list[Cell] | None:
        cache_key = (key, mistake.detail, spec.text)
        if cache_key not in self._cells:
            try:
                got_shape, cells = resolve(spec, mistake.source)
                self._cells[cache_key] = cells if got_shape == shape else None
            except (SymattnError, ArithmeticError, ValueError, RecursionError):
                self._cells[cache_key] = None    # the target means nothing in this variant
        return self._cells[cache_key]

    def cells(self, spec: TargetSpec, shape: tuple[int, int],
              places: int | None, codes: frozenset[str] | None = None) -> list[list[MistakeCell]]:
        """For each cell of the target, the mistakes' values there (in report order).
        ``codes``: only these mistakes (the others' variants are not even built)."""
        per_cell: list[list[MistakeCell]] = [[] for _ in range(shape[0] * shape[1])]
        names = spec.steps()
        only_early = codes is not None and codes <= {MistakeCode.EARLY_ROUNDING}
        candidates = [*([] if only_early else self.fixed), *self.early_for(places)]
        for mistake in candidates:
            if not names & mistake.steps or codes is not None and mistake.code not in codes:
                continue
            cells = self._resolve(mistake.code, mistake, spec, shape)
            if cells is not None:
                for k, cell in enumerate(cells):
                    per_cell[k].append(MistakeCell(mistake.code, mistake.detail, cell))
        ref = spec.step_ref
        if ref is not None and (codes is None or MistakeCode.WRONG_STEP in codes):
            self._wrong_steps(spec, ref[0], shape, per_cell)
        return per_cell

    def _wrong_steps(self, spec: TargetSpec, name: str, shape: tuple[int, int],
                     per_cell: list[list[MistakeCell]]) -> None:
        base = self._base
        target_shape = base.shape(name) if base.has(name) else None
        for other in self.trace.step_names:
            if other == name or base.shape(other) != target_shape:
                continue
            other_spec = TargetSpec(spec.text, _renamed(spec, other))
            cells = self._resolve(MistakeCode.WRONG_STEP, Mistake(MistakeCode.WRONG_STEP, f"the {other} step",
                                                        frozenset(), base), other_spec, shape)
            if cells is not None:
                for k, cell in enumerate(cells):
                    per_cell[k].append(MistakeCell(MistakeCode.WRONG_STEP, f"{other} given for {name}", cell))


def _renamed(spec: TargetSpec, other: str) -> Node:
    """The same (indexed) step reference, naming another step."""
    assert isinstance(spec.node, (Name, Index)), "only a step reference is renamed"
    return replace(spec.node, name=other)
