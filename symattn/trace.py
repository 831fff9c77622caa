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
from functools import cached_property
from typing import Callable, Iterator, Sequence

import mpmath
import sympy

from symattn.certify import CertifiedDecimal, Rounding
from symattn.engine import NEG_INF, Engine, ExactMatrix
from symattn.errors import SymattnError
from symattn.problem import Problem
from symattn.render import forms
from symattn.stepcert import certify_entries

Index = int | str


class IndexError_(SymattnError, IndexError):
    """A row or column named by a token that the step does not have."""


class StepNameError(SymattnError, AttributeError):
    """``trace.weight``: no step of that name (the message lists the steps)."""


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
        rounding = _as_rounding(rounding)
        r, c = self.shape
        found = certify_entries(self._trace.engine, self.name, self._exact, rounding,
                                {i: list(range(c)) for i in range(r)})
        return [[found[i][j] for j in range(c)] for i in range(r)]

    def decimal(self, i: Index, j: Index, rounding: Rounding | int) -> CertifiedDecimal | object:
        """One entry correctly rounded (certified)."""
        ri, cj = self.row_index(i), self.col_index(j)
        found = certify_entries(self._trace.engine, self.name, self._exact, _as_rounding(rounding),
                                {ri: [cj]})
        return found[ri][cj]

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

    def heading(self) -> str:
        """``weights = exp / row_sum  (3×3)``: the step's name and formula, said once."""
        formula = self.info.formula
        said = formula if formula.split(" ", 1)[0] == self.name else f"{self.name}: {formula}"
        return f"{said}  ({self.shape[0]}×{self.shape[1]})"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython plain-text display
        p.text(f"{self.heading()}\n{self}")

    def _repr_latex_(self) -> str:
        """Jupyter: the step as typeset math, exact beside certified decimals."""
        from symattn.render.latex import step_repr_latex

        return step_repr_latex(self)


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
                rows: tuple[str, ...], cols: tuple[str, ...],
                exact: Callable[[int, int], sympy.Expr]) -> None:
            steps.append(Step(name, StepInfo(formula, latex, meaning), shape, rows, cols, exact, self))

        def matrix_step(name: str, formula: str, latex: str, meaning: str, mat: ExactMatrix,
                        rows: tuple[str, ...], cols: tuple[str, ...]) -> None:
            add(name, formula, latex, meaning, (mat.rows, mat.cols), rows, cols, mat.exact)

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

        def scaled_exact(i: int, j: int) -> sympy.Expr:
            return scale * engine.scores.exact(i, j)

        scaled_formula = f"scaled = {forms.scale_formula(p)}"
        scaled_latex = (r"\frac{S}{\sqrt{d_k}}" if p.default_scale
                        else rf"{sympy.latex(scale)} \cdot S")
        add("scaled", scaled_formula, scaled_latex,
            "scores scaled so they do not grow with the width d_k", (n, m), tok, keys, scaled_exact)
        if p.mask is not None:
            add("masked", "masked = scaled, −∞ where the mask blocks",
                r"\tilde S = \text{scaled}, -\infty \text{ where blocked}",
                "blocked positions get −∞, so their weight is exactly 0", (n, m), tok, keys,
                lambda i, j: scaled_exact(i, j) if engine.is_allowed(i, j) else sympy.S.NegativeInfinity)
        add("shifted", "shifted = scaled − max of its row",
            r"\text{scaled}_{ij} - \max_k \text{scaled}_{ik}",
            "the stability trick: the same weights, no large exponents", (n, m), tok, keys,
            engine.shifted)
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
        except (KeyError, TypeError):
            raise StepNameError(self._no_step(name)) from None

    def _no_step(self, name: object) -> str:
        import difflib

        close = difflib.get_close_matches(str(name), list(self._steps), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        return f"no step named {name!r}{hint} the steps are {', '.join(self._steps)}"

    def __getitem__(self, name: str) -> Step:
        return self.step(name)

    def __getattr__(self, name: str) -> Step:
        steps = self.__dict__.get("_steps")
        if steps is not None and name in steps:
            return steps[name]
        if steps is None or name.startswith("_"):  # Python's own probes (__copy__, _repr_html_)
            raise AttributeError(name)
        raise StepNameError(f"Trace has no attribute {name!r}: {self._no_step(name)}")

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps.values())

    def _repr_latex_(self) -> str:
        """Jupyter: every step as typeset math (IPython is not needed to call this)."""
        from symattn.render.latex import trace_repr_latex

        return trace_repr_latex(self)

    def _repr_pretty_(self, p, cycle) -> None:
        """IPython's plain-text display: the terminal derivation."""
        from symattn.render.text import render_text

        p.text(repr(self) if cycle else render_text(self))

    def __repr__(self) -> str:
        return f"<Trace of {self.problem!r}: {' '.join(self._steps)}>"

    def __str__(self) -> str:
        """``print(trace)``: the derivation as the terminal shows it."""
        from symattn.render.text import render_text

        return render_text(self)


def attend(problem: Problem | None = None, **inputs: object) -> Trace:
    """Compute attention exactly: ``attend(problem)`` or ``attend(X=..., W_q=..., ...)``."""
    if problem is None:
        problem = Problem(**inputs)
    elif inputs:
        raise SymattnError("give either a Problem or keyword inputs to attend(), not both")
    return Trace(problem)
