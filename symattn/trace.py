"""Trace and Step: the named exact steps of one attention computation.

``attend(problem)`` returns a :class:`Trace` whose steps are, in order,

    [X W_q W_k W_v [X_kv]] Q K V scores scaled [masked] shifted exp row_sum weights output

Each :class:`Step` is an exact SymPy immutable matrix on demand
(``step.matrix``, ``step[i, j]``), certified decimals on demand
(``step.decimals(digits)``), and mpmath numbers at any precision.  Rows
and columns are addressed by token name or by 0-based index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Callable, Iterator, Sequence

import flint
import mpmath
import sympy

from symattn.certify import (CertifiedDecimal, Rounding, certify, guard_prec,
                             round_ball, round_rational)
from symattn.engine import NEG_INF, Engine, ExactMatrix
from symattn.errors import CertificationError, SymattnError
from symattn.problem import Problem
from symattn.render import forms

#: Bits beyond which a step's certification gives up (with a clear error).
MAX_PREC_BITS = 1 << 20

Index = int | str


class IndexError_(SymattnError, IndexError):
    """A row or column named by a token that the step does not have."""


@dataclass(frozen=True)
class StepInfo:
    """How a step is written: its formula in text and LaTeX, and what it means."""

    formula: str
    latex: str
    meaning: str


@dataclass(eq=False)
class Step:
    """One named step of the trace: exact entries, certified decimals, labels."""

    name: str
    info: StepInfo
    shape: tuple[int, int]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    _exact: Callable[[int, int], sympy.Expr] = field(repr=False)
    _trace: "Trace" = field(repr=False)
    _rational: Callable[[int, int], Fraction | None] | None = field(default=None, repr=False)

    # -- addressing -------------------------------------------------------------
    def _index(self, key: Index, labels: Sequence[str], axis: str) -> int:
        if isinstance(key, bool):
            raise IndexError_(f"{self.name}: {axis} index {key!r} is not a number or a token name")
        if isinstance(key, int):
            size = len(labels)
            if -size <= key < size:
                return key % size
            raise IndexError_(f"{self.name} has {size} {axis}s; {axis} {key} is out of range (0..{size - 1})")
        if isinstance(key, str):
            if key in labels:
                return labels.index(key)
            if key.strip().lstrip("-").isdigit():
                return self._index(int(key), labels, axis)
            raise IndexError_(f"{self.name} has no {axis} named {key!r}; its {axis}s are {', '.join(labels)}")
        raise IndexError_(f"{self.name}: {axis} index {key!r} is not a number or a token name")

    def row_index(self, key: Index) -> int:
        """The 0-based row of a token name or index."""
        return self._index(key, self.row_labels, "row")

    def col_index(self, key: Index) -> int:
        """The 0-based column of a token name or index."""
        return self._index(key, self.col_labels, "column")

    def __getitem__(self, key: Index | tuple[Index, Index]) -> sympy.Expr | sympy.ImmutableMatrix:
        """``step[i, j]`` is an exact entry; ``step[i]`` is row i as a 1×c matrix."""
        if isinstance(key, tuple):
            i, j = key
            return self._exact(self.row_index(i), self.col_index(j))
        i = self.row_index(key)
        return sympy.ImmutableMatrix([[self._exact(i, j) for j in range(self.shape[1])]])

    # -- exact values -----------------------------------------------------------
    @cached_property
    def matrix(self) -> sympy.ImmutableMatrix:
        """The whole step as an exact SymPy immutable matrix (built on demand)."""
        r, c = self.shape
        return sympy.ImmutableMatrix(r, c, lambda i, j: self._exact(i, j))

    def rows(self) -> Iterator[list[sympy.Expr]]:
        for i in range(self.shape[0]):
            yield [self._exact(i, j) for j in range(self.shape[1])]

    # -- numbers ------------------------------------------------------------------
    def decimals(self, rounding: Rounding | int) -> list[list[CertifiedDecimal | object]]:
        """Every entry correctly rounded, proved with ball arithmetic (NEG_INF where masked)."""
        return self._trace._certify_step(self, _as_rounding(rounding))

    def decimal(self, i: Index, j: Index, rounding: Rounding | int) -> CertifiedDecimal | object:
        """One entry correctly rounded (certified)."""
        ri, cj = self.row_index(i), self.col_index(j)
        return self._trace._certify_entries(self, _as_rounding(rounding), {ri: [cj]})[ri][cj]

    def to_mpmath(self, dps: int) -> mpmath.matrix:
        """The step as an mpmath matrix, each entry correctly rounded to ``dps`` digits."""
        rounding = Rounding(digits=dps)
        rows = self.decimals(rounding)
        with mpmath.workdps(dps):
            return mpmath.matrix([[_to_mpf(d) for d in row] for row in rows])

    def __repr__(self) -> str:
        return f"<Step {self.name} {self.shape[0]}×{self.shape[1]}: {self.info.formula}>"

    def __str__(self) -> str:
        return sympy.pretty(self.matrix, use_unicode=True)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython plain-text display
        p.text(f"{self.name} = {self.info.formula}  ({self.shape[0]}×{self.shape[1]})\n{self}")


def _to_mpf(d: object) -> mpmath.mpf:
    if d is NEG_INF:
        return mpmath.mpf("-inf")
    return mpmath.mpf(d.mantissa) * mpmath.power(10, d.exponent)


def _as_rounding(rounding: Rounding | int) -> Rounding:
    if isinstance(rounding, Rounding):
        return rounding
    if isinstance(rounding, int) and not isinstance(rounding, bool):
        return Rounding(digits=rounding)
    raise SymattnError(f"rounding must be a number of significant digits or a Rounding, got {rounding!r}")


_SOFTMAX_STEPS = ("exp", "row_sum", "weights", "output")


class Trace:
    """The named exact steps of attention for one :class:`Problem`."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.engine = engine = Engine(problem)
        p = problem
        tok, keys = p.tokens, p.key_tokens
        dk_cols = tuple(str(c) for c in range(p.d_k))
        dv_cols = tuple(str(c) for c in range(p.d_v))
        steps: list[Step] = []

        def add(name: str, formula: str, latex: str, meaning: str, shape: tuple[int, int],
                rows: tuple[str, ...], cols: tuple[str, ...], exact: Callable[[int, int], sympy.Expr],
                rational: Callable[[int, int], Fraction | None] | None = None) -> None:
            steps.append(Step(name, StepInfo(formula, latex, meaning), shape, rows, cols,
                              exact, self, rational))

        def matrix_step(name: str, formula: str, latex: str, meaning: str, mat: ExactMatrix,
                        rows: tuple[str, ...], cols: tuple[str, ...]) -> None:
            add(name, formula, latex, meaning, (mat.rows, mat.cols), rows, cols, mat.exact,
                mat.fraction if mat.is_rational else None)

        if p.projected:
            dm_cols = tuple(str(c) for c in range(p.d_model))
            kv_tokens = keys
            matrix_step("X", "X", "X", "the token embeddings, one row per token",
                        engine.inputs["X"], tok, dm_cols)
            for w, role in (("W_q", "queries"), ("W_k", "keys"), ("W_v", "values")):
                cols = dv_cols if w == "W_v" else dk_cols
                matrix_step(w, w, f"W_{{{w[-1]}}}", f"the learned projection to {role}",
                            engine.inputs[w], dm_cols, cols)
            if "X_kv" in engine.inputs:
                matrix_step("X_kv", "X_kv", r"X_{kv}", "the embeddings the keys and values come from",
                            engine.inputs["X_kv"], kv_tokens, dm_cols)
            src = "X_kv" if "X_kv" in engine.inputs else "X"
            src_tex = r"X_{kv}" if src == "X_kv" else "X"
            matrix_step("Q", "Q = X·W_q", r"Q = X W_q", "what each token is looking for",
                        engine.Q, tok, dk_cols)
            matrix_step("K", f"K = {src}·W_k", rf"K = {src_tex} W_k", "what each token offers",
                        engine.K, keys, dk_cols)
            matrix_step("V", f"V = {src}·W_v", rf"V = {src_tex} W_v", "what each token passes on",
                        engine.V, keys, dv_cols)
        else:
            matrix_step("Q", "Q (given)", "Q", "the queries", engine.Q, tok, dk_cols)
            matrix_step("K", "K (given)", "K", "the keys", engine.K, keys, dk_cols)
            matrix_step("V", "V (given)", "V", "the values", engine.V, keys, dv_cols)

        n, m = p.n, p.m
        matrix_step("scores", "scores = Q·Kᵀ", r"S = Q K^\top",
                    "how well query i matches key j (dot products)", engine.scores, tok, keys)
        scale = p.scale
        rational_scale = engine.scale_rational

        def scaled_exact(i: int, j: int) -> sympy.Expr:
            return scale * engine.scores.exact(i, j)

        def scaled_rational(i: int, j: int) -> Fraction | None:
            if rational_scale is None or not engine.scores.is_rational:
                return None
            return Fraction(int(rational_scale.p), int(rational_scale.q)) * engine.scores.fraction(i, j)

        scaled_formula = f"scaled = {forms.scale_formula(p)}"
        scaled_latex = (r"\frac{S}{\sqrt{d_k}}" if p.default_scale
                        else rf"{sympy.latex(scale)} \cdot S")
        add("scaled", scaled_formula, scaled_latex,
            "scores scaled so they do not grow with the width d_k", (n, m), tok, keys,
            scaled_exact, scaled_rational)
        if p.mask is not None:
            add("masked", "masked = scaled, −∞ where the mask blocks",
                r"\tilde S = \text{scaled}, -\infty \text{ where blocked}",
                "blocked positions get −∞, so their weight is exactly 0", (n, m), tok, keys,
                lambda i, j: scaled_exact(i, j) if engine.is_allowed(i, j) else sympy.S.NegativeInfinity,
                lambda i, j: scaled_rational(i, j) if engine.is_allowed(i, j) else None)
        add("shifted", "shifted = scaled − max of its row",
            r"\text{scaled}_{ij} - \max_k \text{scaled}_{ik}",
            "the stability trick: the same weights, no large exponents", (n, m), tok, keys,
            engine.shifted, self._shifted_rational)
        add("exp", "exp = e^shifted", r"e^{\text{shifted}}", "positive, in (0, 1], 1 at the row maximum",
            (n, m), tok, keys, engine.exp)
        add("row_sum", "row_sum = Σ_j exp", r"\sum_j e^{\text{shifted}_{ij}}",
            "the softmax denominator of each row", (n, 1), tok, ("Σ",),
            lambda i, j: engine.row_sum(i))
        add("weights", "weights = exp / row_sum", r"A = \operatorname{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)",
            "how much each query takes from each key; each row sums to 1", (n, m), tok, keys,
            engine.weight)
        add("output", "output = weights·V", r"O = A V",
            "each token's weighted average of the value rows", (n, p.d_v), tok, dv_cols,
            engine.output)
        self._steps = {s.name: s for s in steps}

    def _shifted_rational(self, i: int, j: int) -> Fraction | None:
        e = self.engine
        if not e.is_allowed(i, j) or e.scale_rational is None or not e.scores.is_rational:
            return None
        r = e.rows[i].argmax
        d = e.scores.rational[i, j] - e.scores.rational[i, r]
        return Fraction(int(e.scale_rational.p), int(e.scale_rational.q)) * Fraction(int(d.p), int(d.q))

    # -- access -------------------------------------------------------------------
    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(self._steps)

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps.values())

    def step(self, name: str) -> Step:
        try:
            return self._steps[name]
        except KeyError:
            raise SymattnError(
                f"no step named {name!r}; the steps are {', '.join(self._steps)}") from None

    def __getitem__(self, name: str) -> Step:
        return self.step(name)

    def __getattr__(self, name: str) -> Step:
        steps = self.__dict__.get("_steps")
        if steps is not None and name in steps:
            return steps[name]
        raise AttributeError(name)

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps.values())

    def __repr__(self) -> str:
        return f"<Trace of {self.problem!r}: {' '.join(self._steps)}>"

    # -- certification ------------------------------------------------------------
    def _certify_step(self, step: Step, rounding: Rounding) -> list[list]:
        r, c = step.shape
        return self._certify_entries(step, rounding, {i: list(range(c)) for i in range(r)})

    def _certify_entries(self, step: Step, rounding: Rounding,
                         wanted: dict[int, list[int]]) -> dict[int, dict[int, object]] | list[list]:
        """Certified decimals of the wanted entries: exact where rational, else by arb."""
        result: dict[int, dict[int, object]] = {i: {} for i in wanted}
        pending: dict[int, list[int]] = {}
        for i, cols in wanted.items():
            for j in cols:
                value = self._exactly_roundable(step, i, j)
                if value is not None:
                    result[i][j] = value(rounding)
                else:
                    pending.setdefault(i, []).append(j)
        prec = guard_prec(rounding)
        tried_exact: set[tuple[int, int]] = set()
        while pending:
            if prec > MAX_PREC_BITS:
                i, cols = next(iter(pending.items()))
                raise CertificationError(
                    f"could not prove the rounding of {step.name}[{i}, {cols[0]}] at {rounding} "
                    f"within {MAX_PREC_BITS} bits")
            still: dict[int, list[int]] = {}
            for i, cols in pending.items():
                balls = self.engine.balls(step.name, i, prec)
                for j in cols:
                    ball = balls[j]
                    if ball is NEG_INF:
                        result[i][j] = NEG_INF
                        continue
                    decided = round_ball(ball, rounding)
                    if (i, j) not in tried_exact and (
                            decided is None or _may_equal(ball, decided)):
                        # on a rounding boundary, or possibly a terminating decimal:
                        # settle it with the exact value when that is algebraic
                        tried_exact.add((i, j))
                        decided = self._certify_if_algebraic(step, i, j, rounding) or decided
                    if decided is None:
                        still.setdefault(i, []).append(j)
                    else:
                        result[i][j] = decided
            self.engine.forget(prec)
            pending, prec = still, prec * 2
        if len(wanted) == step.shape[0] and all(len(c) == step.shape[1] for c in wanted.values()):
            return [[result[i][j] for j in range(step.shape[1])] for i in range(step.shape[0])]
        return result

    def _exactly_roundable(self, step: Step, i: int, j: int):
        """A rounding function for entries known to be rational, without any ball."""
        if step._rational is not None:
            q = step._rational(i, j)
            if q is not None:
                return lambda rounding: round_rational(q, rounding)
        engine = self.engine
        if step.name in ("masked", "shifted") and not engine.is_allowed(i, j):
            return lambda rounding: NEG_INF
        if step.name in ("exp", "weights", "row_sum"):
            if step.name != "row_sum" and not engine.is_allowed(i, j):
                return lambda rounding: round_rational(0, rounding)
            if step.name == "exp" and j in engine.top_group(i):
                return lambda rounding: round_rational(1, rounding)
            if engine.algebraic and engine.softmax_is_rational(i):
                count = len(engine.rows[i].allowed)
                value = Fraction(1, count) if step.name == "weights" else Fraction(count)
                return lambda rounding: round_rational(value, rounding)
        return None

    def _certify_if_algebraic(self, step: Step, i: int, j: int, rounding: Rounding):
        """An undecided ball may sit on a boundary: round the exact value when it is algebraic."""
        if step.name in _SOFTMAX_STEPS:
            exact = self.engine.algebraic_value(step.name, i, j)
            return None if exact is None else certify(exact, rounding)
        return certify(step._exact(i, j), rounding)


def _may_equal(ball, decided: CertifiedDecimal) -> bool:
    """Whether the ball still admits the rounded decimal itself as the exact value."""
    q = decided.as_fraction()
    return bool(ball.overlaps(flint.arb(flint.fmpq(q.numerator, q.denominator))))


def attend(problem: Problem | None = None, **inputs: object) -> Trace:
    """Compute attention exactly: ``attend(problem)`` or ``attend(X=..., W_q=..., ...)``."""
    if problem is None:
        problem = Problem(**inputs)
    elif inputs:
        raise SymattnError("give either a Problem or keyword inputs to attend(), not both")
    return Trace(problem)
