"""The backward pass of attention as steps of the one Trace (the ``backward`` key).

With P the weights, O the output, dO = dL/dO (given, O − T, or ones) and z the logits the
softmax takes (``Trace.logit_step``), the gradient is, step by step (FlashAttention-2,
Algorithm 2, in exact arithmetic)::

    lse[i]       = max_j z_ij + log row_sum_i         the log-sum-exp FlashAttention saves
    loss         = ½ Σ (O − T)²  or  Σ O              when the loss is known
    d_output     = dO
    d_V          = Pᵀ·dO
    d_weights    = dO·Vᵀ                              (dP)
    row_dot[i]   = Σ_j P_ij·dP_ij   (= dO_i·O_i)      (D)
    d_logits     = P ∘ (dP − D)                       (dS: the softmax's Jacobian diag(p) − p pᵀ on a row)
    d_scores     = scale · d_logits                   (times 1 − tanh²(b/c) with a soft-cap; ALiBi's
                                                       bias is a constant and passes dS through)
    d_Q          = d_scores·K       d_K = d_scoresᵀ·Q (with RoPE: through K_rot and Q_rot, then
                                                       each row turned back by its angle: d_Q_rot, d_K_rot)
    d_sink       = −Σ_i P_sink,i·D_i                  with a sink logit (its column has no value row)
    d_W_q = Xᵀ·d_Q,  d_W_k = X_kvᵀ·d_K,  d_W_v = X_kvᵀ·d_V
    d_X          = d_Q·W_qᵀ (+ d_K·W_kᵀ + d_V·W_vᵀ in self-attention; else d_X_kv holds those)

A masked key has P = 0, so dS = 0 there exactly.  Entries are exact (``symattn.trace.expsums``:
sums of exponentials over powers of the row's denominator, so exact zeros are seen); numbers are
arb balls of whole matrices at the precision asked, certified by the same loop as every step.
"""

from __future__ import annotations

from fractions import Fraction
from functools import wraps
from typing import Any, Callable, TypeVar

import flint
import sympy

from symattn.engine.engine import Engine
from symattn.numbers.precision import precision
from symattn.problem.keys.backward import Backward, Loss
from symattn.trace.backward_balls import PARTIAL_STEPS, backward_balls
from symattn.trace.expsums import ExpSum, Grad, Key, RowFrac, total
from symattn.trace.source import AddStep, TraceView
from symattn.vocab import StepName

#: the backward steps in the order the Trace holds them (those a problem has)
BACKWARD_STEP_ORDER = StepName.backward()


F = TypeVar("F", bound=Callable[..., Any])


def cache(method: F) -> F:
    """Memoise a method per instance (functools.cache would keep every trace alive)."""
    store_name = "_memo_" + method.__name__

    @wraps(method)
    def memoised(self, *args):
        store = self.__dict__.setdefault(store_name, {})
        if args not in store:
            store[args] = method(self, *args)
        return store[args]
    return memoised  # type: ignore[return-value]


def _fraction(q: flint.fmpq) -> Fraction:
    return Fraction(int(q.p), int(q.q))


class BackwardSteps:
    """The backward steps of one trace: exact entries and arb balls, built on demand."""

    def __init__(self, trace: TraceView, engine: Engine) -> None:
        self.trace, self.engine = trace, engine
        p = self.problem = trace.problem
        assert p.backward is not None
        self.spec: Backward = p.backward
        self.rope = p.rope
        self.projected = p.projected
        self.cross = "X_kv" in p.inputs
        e = engine
        self.Qu = e.rotated["Q_rot"] if self.rope is not None else e.Q      # what makes the scores
        self.Ku = e.rotated["K_rot"] if self.rope is not None else e.K
        rational_scale = p.scale.is_Rational
        self.unit = sympy.S.One if rational_scale else p.scale
        self._scale_factor = _fraction(e.scale_rational) if e.scale_rational is not None else Fraction(1)
        self._fast_rows = e.plain and e.scores.rational is not None
        self._balls: dict[int, dict[str, flint.arb_mat]] = {}
        self._partial: dict[tuple[int, str], flint.arb_mat] = {}
        self._retried: set[int] = set()

    # -- what the trace shows ------------------------------------------------------------
    def names(self) -> list[str]:
        p, names = self.problem, []
        for step in BACKWARD_STEP_ORDER:
            name = step.value             # the Trace's names stay plain strings
            if name == "loss" and not self.spec.has_loss:
                continue
            if name in (StepName.D_Q_ROT, StepName.D_K_ROT) and self.rope is None:
                continue
            if name == "d_sink" and p.sink is None:
                continue
            if name.startswith("d_W") or name == "d_X":
                if not self.projected:
                    continue
            if name == "d_X_kv" and not self.cross:
                continue
            names.append(name)
        return names

    def add_steps(self, add: AddStep) -> None:
        p = self.problem
        tok, keys = p.tokens, p.key_tokens
        dk = tuple(str(c) for c in range(p.d_k))
        dv = tuple(str(c) for c in range(p.d_v))
        dm = tuple(str(c) for c in range(p.d_model or 0))
        layout: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
            "lse": (tok, ("lse",)), "loss": (("L",), ("L",)), "d_output": (tok, dv), "d_V": (keys, dv),
            "d_weights": (tok, keys), "row_dot": (tok, ("D",)), "d_logits": (tok, keys),
            "d_scores": (tok, keys), "d_Q_rot": (tok, dk), "d_K_rot": (keys, dk), "d_Q": (tok, dk),
            "d_K": (keys, dk), "d_sink": (("sink",), ("sink",)), "d_W_q": (dm, dk), "d_W_k": (dm, dk),
            "d_W_v": (dm, dv), "d_X": (tok, dm), "d_X_kv": (keys, dm)}
        for name in self.names():
            rows, cols = layout[name]
            entry = self.exact_entry(name)
            add(name, (len(rows), len(cols)), rows, cols, entry, _Numbers(self, name, len(cols)))

    # -- exact entries -------------------------------------------------------------------
    def exact_entry(self, name: str) -> Callable[[int, int], sympy.Expr]:
        if name == "lse":
            return lambda i, j: self.lse(i)
        grad = getattr(self, "_" + name)
        return lambda i, j: grad(i, j).to_sympy(self.unit)

    def lse(self, i: int) -> sympy.Expr:
        e = self.engine
        r = e.rows[i].argmax
        top = sympy.S.Zero if r is None else e.logit(i, r) if not e.plain else \
            e.scale * e.scores.exact(i, r)
        return top + sympy.log(e.row_sum(i))

    @cache
    def key(self, i: int, j: int) -> Key:
        """The exponent of exp[i, j] (j = -1: the sink's) as (a, b) = unit·a + b."""
        e = self.engine
        r = e.rows[i].argmax
        if self._fast_rows and r is not None:
            scores = e.scores.rational
            assert scores is not None
            top = _fraction(scores[i, r])
            if j >= 0:
                return (_fraction(scores[i, j]) - top) * self._scale_factor, sympy.S.Zero
            sink = self.problem.sink
            assert sink is not None
            if self.unit == 1 and sink.is_Rational:
                return -top * self._scale_factor + Fraction(int(sink.p), int(sink.q)), sympy.S.Zero
            return -top * self._scale_factor, sink
        return Fraction(0), e.sink_exponent(i) if j < 0 else e.exponent(i, j)

    @cache
    def Z(self, i: int) -> ExpSum:
        keys = [(self.key(i, j), sympy.S.One) for j in self.engine.rows[i].allowed]
        if self.problem.sink is not None:
            keys.append((self.key(i, -1), sympy.S.One))
        return ExpSum.of(keys)

    def const(self, i: int, c: sympy.Expr) -> Grad:
        return Grad({i: RowFrac(self.Z(i), ExpSum.constant(c), 0)})

    @cache
    def P(self, i: int, j: int) -> Grad:
        if j >= 0 and not self.engine.is_allowed(i, j):
            return Grad({})
        return Grad({i: RowFrac(self.Z(i), ExpSum({self.key(i, j): sympy.S.One}), 1)})

    @cache
    def output(self, i: int, c: int) -> Grad:
        V = self.engine.V
        return total(self.P(i, j).times(V.exact(j, c)) for j in self.engine.rows[i].allowed)

    @cache
    def _d_output(self, i: int, c: int) -> Grad:
        spec = self.spec
        if spec.loss is Loss.GRAD_OUTPUT:
            assert spec.grad_output is not None
            return self.const(i, spec.grad_output.exact(i, c))
        if spec.loss is Loss.SUM:
            return self.const(i, sympy.S.One)
        assert spec.target is not None
        return self.output(i, c) - self.const(i, spec.target.exact(i, c))

    def _loss(self, i: int, j: int) -> Grad:
        p = self.problem
        if self.spec.loss is Loss.SUM:
            return total(self.output(r, c) for r in range(p.n) for c in range(p.d_v))
        return total((self._d_output(r, c) * self._d_output(r, c)).times(sympy.Rational(1, 2))
                     for r in range(p.n) for c in range(p.d_v))

    @cache
    def _d_weights(self, i: int, j: int) -> Grad:
        V = self.engine.V
        return total(self._d_output(i, c).times(V.exact(j, c)) for c in range(self.problem.d_v))

    @cache
    def _row_dot(self, i: int, j: int) -> Grad:
        return total(self.P(i, k) * self._d_weights(i, k) for k in self.engine.rows[i].allowed)

    @cache
    def _d_logits(self, i: int, j: int) -> Grad:
        if not self.engine.is_allowed(i, j):
            return Grad({})
        return self.P(i, j) * (self._d_weights(i, j) - self._row_dot(i, 0))

    def chain_factor(self, i: int, j: int) -> sympy.Expr:
        """d logit / d score at (i, j): the scale, times 1 − tanh²(b/c) with a soft-cap."""
        p, e = self.problem, self.engine
        if p.softcap is None:
            return p.scale
        before = e.biased(i, j) if p.alibi is not None else p.scale * e.scores.exact(i, j)
        return p.scale * (1 - sympy.tanh(before / p.softcap) ** 2)

    @cache
    def _d_scores(self, i: int, j: int) -> Grad:
        return self._d_logits(i, j).times(self.chain_factor(i, j))

    @cache
    def _used_dQ(self, i: int, c: int) -> Grad:
        return total(self._d_scores(i, j).times(self.Ku.exact(j, c)) for j in range(self.problem.m))

    @cache
    def _used_dK(self, j: int, c: int) -> Grad:
        return total(self._d_scores(i, j).times(self.Qu.exact(i, c)) for i in range(self.problem.n))

    def _d_Q_rot(self, i: int, c: int) -> Grad:
        return self._used_dQ(i, c)

    def _d_K_rot(self, j: int, c: int) -> Grad:
        return self._used_dK(j, c)

    def _turned_back(self, rotated: Callable[[int, int], Grad], position: int, i: int, c: int) -> Grad:
        """Row i of a gradient of rotated vectors, turned back by −φ (the rotation's transpose)."""
        assert self.rope is not None
        for pair, (a, b) in enumerate(self.rope.pairs()):
            if c in (a, b):
                phi = self.rope.angle(position, pair)
                cos, sin = sympy.cos(phi), sympy.sin(phi)
                if c == a:
                    return rotated(i, a).times(cos) + rotated(i, b).times(sin)
                return rotated(i, b).times(cos) - rotated(i, a).times(sin)
        return rotated(i, c)

    @cache
    def _d_Q(self, i: int, c: int) -> Grad:
        if self.rope is None:
            return self._used_dQ(i, c)
        return self._turned_back(self._used_dQ, self.rope.positions[i], i, c)

    @cache
    def _d_K(self, j: int, c: int) -> Grad:
        if self.rope is None:
            return self._used_dK(j, c)
        return self._turned_back(self._used_dK, self.rope.key_positions[j], j, c)

    @cache
    def _d_V(self, j: int, c: int) -> Grad:
        return total(self.P(i, j) * self._d_output(i, c) for i in range(self.problem.n))

    def _d_sink(self, i: int, j: int) -> Grad:
        return total((self.P(r, -1) * self._row_dot(r, 0)).times(sympy.S.NegativeOne)
                     for r in range(self.problem.n))

    def _input(self, name: str):
        return self.engine.inputs[name]

    def _d_W_q(self, a: int, c: int) -> Grad:
        X = self._input("X")
        return total(self._d_Q(i, c).times(X.exact(i, a)) for i in range(self.problem.n))

    def _d_W_k(self, a: int, c: int) -> Grad:
        X = self._input("X_kv" if self.cross else "X")
        return total(self._d_K(j, c).times(X.exact(j, a)) for j in range(self.problem.m))

    def _d_W_v(self, a: int, c: int) -> Grad:
        X = self._input("X_kv" if self.cross else "X")
        return total(self._d_V(j, c).times(X.exact(j, a)) for j in range(self.problem.m))

    def _kv_paths(self, j: int, a: int) -> Grad:
        p, Wk, Wv = self.problem, self._input("W_k"), self._input("W_v")
        return total([*(self._d_K(j, c).times(Wk.exact(a, c)) for c in range(p.d_k)),
                      *(self._d_V(j, c).times(Wv.exact(a, c)) for c in range(p.d_v))])

    def _d_X(self, i: int, a: int) -> Grad:
        Wq = self._input("W_q")
        query = total(self._d_Q(i, c).times(Wq.exact(a, c)) for c in range(self.problem.d_k))
        return query if self.cross else query + self._kv_paths(i, a)

    def _d_X_kv(self, j: int, a: int) -> Grad:
        return self._kv_paths(j, a)

    # -- numbers -----------------------------------------------------------------------
    def matrices(self, prec: int) -> dict[str, flint.arb_mat]:
        """Every backward step as an arb matrix at ``prec`` bits (computed once per precision)."""
        if prec not in self._balls:
            with precision(prec):
                self._balls[prec] = backward_balls(self, prec)
        return self._balls[prec]

    def step_matrix(self, name: str, prec: int) -> flint.arb_mat:
        """One step's matrix at ``prec`` bits.  At twice a precision already made (the
        certification loop's retry of the few entries the first left) only what the step
        needs is computed: the whole set again cost as much as the rest of the backward."""
        held = self._balls.get(prec)
        if held is not None and name in held:
            return held[name]
        retry = prec // 2 in self._balls or prec // 2 in self._retried
        if not retry or name not in PARTIAL_STEPS:
            return self.matrices(prec)[name]
        self._retried.add(prec)
        key = (prec, name)
        if key not in self._partial:
            with precision(prec):
                self._partial[key] = backward_balls(self, prec, only=name)[name]
        return self._partial[key]

    def known_row(self, name: str, i: int) -> list:
        """Rationals known without a ball: dO and dP when they are rational, and dS = 0 where masked."""
        e, cols = self.engine, None
        if name in ("d_logits", "d_scores"):
            return [None if e.is_allowed(i, j) else flint.fmpq(0) for j in range(self.problem.m)]
        if name == "d_output" and self.spec.loss is not Loss.HALF_SQUARED_ERROR:
            cols = self.rational_dO()
        elif name == "d_weights" and self.rational_dO() is not None and e.V.rational is not None:
            cols = self.rational_dP()
        width = {"d_output": self.problem.d_v, "d_weights": self.problem.m}.get(name)
        if cols is None:
            count = self._width(name)
            return [None] * count
        assert width is not None
        return [cols[i, j] for j in range(width)]

    def _width(self, name: str) -> int:
        p = self.problem
        return {"lse": 1, "loss": 1, "d_output": p.d_v, "d_V": p.d_v, "d_weights": p.m, "row_dot": 1,
                "d_logits": p.m, "d_scores": p.m, "d_Q_rot": p.d_k, "d_K_rot": p.d_k, "d_Q": p.d_k,
                "d_K": p.d_k, "d_sink": 1, "d_W_q": p.d_k, "d_W_k": p.d_k, "d_W_v": p.d_v,
                "d_X": p.d_model or 0, "d_X_kv": p.d_model or 0}[name]

    @cache
    def rational_dO(self) -> flint.fmpq_mat | None:
        p = self.problem
        if self.spec.loss is Loss.SUM:
            return flint.fmpq_mat(p.n, p.d_v, [1] * (p.n * p.d_v))
        if self.spec.loss is Loss.GRAD_OUTPUT:
            assert self.spec.grad_output is not None
            return self.spec.grad_output.rational
        return None

    @cache
    def rational_dP(self) -> flint.fmpq_mat:
        dO, V = self.rational_dO(), self.engine.V.rational
        assert dO is not None and V is not None
        return dO * V.transpose()

    def symbols(self) -> frozenset:
        found = set(self.problem.free_symbols)
        for matrix in (self.spec.grad_output, self.spec.target):
            if matrix is not None and matrix.general is not None:
                found |= matrix.general.free_symbols
        return frozenset(found)


class _Numbers:
    """One backward step's numbers for the engine (the StepNumbers interface)."""

    def __init__(self, source: BackwardSteps, name: str, cols: int) -> None:
        self.source, self.name, self.cols = source, name, cols

    def symbols(self) -> frozenset:
        return self.source.symbols()

    def known_row(self, i: int) -> list:
        return self.source.known_row(self.name, i)

    def balls(self, i: int, prec: int) -> list:
        matrix = self.source.step_matrix(self.name, prec)
        return [matrix[i, j] for j in range(self.cols)]

