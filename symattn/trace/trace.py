"""Trace and Step: the named exact steps of one attention computation.

``attend(problem)`` returns a :class:`Trace` whose steps are, in order,

    [X W_q W_k W_v [X_kv]] Q K V [Q_rot K_rot] scores scaled [bias biased] [capped] [masked]
    shifted exp row_sum weights output

(``bias``/``biased`` with ALiBi, ``capped`` with a soft-cap: the softmax then works
on the last of them, the *logits*; ``Trace.logit_step`` names it.)

Each :class:`Step` is an exact SymPy immutable matrix on demand
(``step.matrix``, ``step[i, j]``), certified decimals on demand
(``step.decimals(digits)``), and mpmath numbers at any precision.  Rows
and columns are addressed by token name or by 0-based index.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import mpmath
import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.numbers.masked import Masked
from symattn.engine.engine import Engine, ExactMatrix
from symattn.engine.extra import StepNumbers
from symattn.errors import SymattnError
from symattn.problem.problem import Problem
from symattn.trace.stepcert import certify_entries
from symattn.trace.backward import BackwardSteps
from symattn.trace.decode import Decode
from symattn.trace.display import Displayable
from symattn.trace.online import Online
from symattn.trace.steps import spec
from symattn.vocab import StepName

Index = int | str

#: the softmax side, whose entries may have an algebraic form (exp, row_sum, weights, output)
_SOFTMAX_SIDE = frozenset(StepName.span(StepName.EXP, StepName.OUTPUT))


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


def _index(name: str, key: Index, labels: Sequence[str], axis: str) -> int:
    """The 0-based row or column of step ``name`` that a token name or an index names."""
    if isinstance(key, bool):
        raise IndexError_(f"{name}: {axis} index {key!r} is not a number or a token name")
    if isinstance(key, int):
        size = len(labels)
        if -size <= key < size:
            return key % size
        raise IndexError_(f"{name} has {size} {axis}s; {axis} {key} is out of range (0..{size - 1})")
    if isinstance(key, str):
        if key in labels:
            return labels.index(key)
        if key.strip().lstrip("-").isdigit():
            return _index(name, int(key), labels, axis)
        raise IndexError_(f"{name} has no {axis} named {key!r}; its {axis}s are {', '.join(labels)}")
    raise IndexError_(f"{name}: {axis} index {key!r} is not a number or a token name")


class _StepSpec(NamedTuple):
    """What a Step is made of, but its Trace (the Trace keeps these, not its Steps)."""
    name: str
    info: StepInfo
    shape: tuple[int, int]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    exact: Callable[[int, int], sympy.Expr]


@dataclass(eq=False)
class Step(Displayable):
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
        return _index(self.name, key, labels, axis)

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
    @property
    def matrix(self) -> sympy.ImmutableMatrix:
        """The whole step as an exact SymPy immutable matrix (built on demand, once per trace)."""
        built = self._trace._matrices.get(self.name)
        if built is None:
            r, c = self.shape
            built = self._trace._matrices[self.name] = sympy.ImmutableMatrix(r, c, lambda i, j: self._exact(i, j))
        return built

    def rows(self) -> Iterator[list[sympy.Expr]]:
        for i in range(self.shape[0]):
            yield [self._exact(i, j) for j in range(self.shape[1])]

    @property
    def is_rational(self) -> bool:
        """Whether every entry is a rational number (inputs, Q, K, V and scores of a rational problem)."""
        matrix = self._trace.engine.matrix(self.name)
        return matrix is not None and matrix.is_rational

    def fraction(self, i: Index, j: Index) -> Fraction | None:
        """An entry as a Fraction, when the step is rational (None otherwise)."""
        matrix = self._trace.engine.matrix(self.name)
        if matrix is None or not matrix.is_rational:
            return None
        return matrix.fraction(self.row_index(i), self.col_index(j))

    # -- numbers ------------------------------------------------------------------
    def decimals(self, rounding: Rounding | int) -> list[list[CertifiedDecimal | Masked]]:
        """Every entry correctly rounded, proved with ball arithmetic (NEG_INF where masked)."""
        rounding = _as_rounding(rounding)
        r, c = self.shape
        found = certify_entries(self._trace.engine, self.name, self._exact, rounding,
                                {i: list(range(c)) for i in range(r)})
        return [list(map(found[i].__getitem__, range(c))) for i in range(r)]

    def row_decimals(self, i: Index, rounding: Rounding | int) -> list[CertifiedDecimal | Masked]:
        """Every entry of one row correctly rounded (certified): the engine works a row at a
        time, so a row costs about what one entry does."""
        ri, c = self.row_index(i), self.shape[1]
        found = certify_entries(self._trace.engine, self.name, self._exact, _as_rounding(rounding),
                                {ri: list(range(c))})
        return [found[ri][j] for j in range(c)]

    def decimal(self, i: Index, j: Index, rounding: Rounding | int) -> CertifiedDecimal | Masked:
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



def _to_mpf(d: CertifiedDecimal | Masked) -> mpmath.mpf:
    if isinstance(d, Masked):        # NEG_INF: Masked has one instance
        return mpmath.mpf("-inf")
    return mpmath.mpf(d.mantissa) * mpmath.power(10, d.exponent)


def _as_rounding(rounding: Rounding | int) -> Rounding:
    if isinstance(rounding, Rounding):
        return rounding
    if isinstance(rounding, int) and not isinstance(rounding, bool):
        return Rounding(digits=rounding)
    raise SymattnError(f"rounding must be a number of significant digits or a Rounding, got {rounding!r}")


class Trace(Displayable):
    """The named exact steps of attention for one :class:`Problem`."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.engine = engine = Engine(problem)
        p = problem
        tok, keys = p.tokens, p.key_tokens
        dk_cols = tuple(str(c) for c in range(p.d_k))
        dv_cols = tuple(str(c) for c in range(p.d_v))
        steps: list[_StepSpec] = []

        def add(name: str, shape: tuple[int, int], rows: tuple[str, ...], cols: tuple[str, ...],
                exact: Callable[[int, int], sympy.Expr], numbers: StepNumbers | None = None) -> None:
            entry = spec(name, p)
            steps.append(_StepSpec(name, StepInfo(entry.formula, entry.latex, entry.meaning), shape, rows, cols,
                                   exact))
            if numbers is not None:   # a variant's step: the engine certifies it from these
                engine.extra[name] = numbers

        def matrix_step(name: str, mat: ExactMatrix, rows: tuple[str, ...], cols: tuple[str, ...]) -> None:
            add(name, (mat.rows, mat.cols), rows, cols, mat.exact)

        if p.projected:
            dm_cols = tuple(str(c) for c in range(p.d_model))
            matrix_step("X", engine.inputs["X"], tok, dm_cols)
            for w in ("W_q", "W_k", "W_v"):
                matrix_step(w, engine.inputs[w], dm_cols, dv_cols if w == "W_v" else dk_cols)
            if "X_kv" in engine.inputs:
                matrix_step("X_kv", engine.inputs["X_kv"], keys, dm_cols)
        matrix_step("Q", engine.Q, tok, dk_cols)
        matrix_step("K", engine.K, keys, dk_cols)
        matrix_step("V", engine.V, keys, dv_cols)
        if p.rope is not None:      # RoPE: the rotated queries and keys make the scores
            matrix_step("Q_rot", engine.rotated["Q_rot"], tok, dk_cols)
            matrix_step("K_rot", engine.rotated["K_rot"], keys, dk_cols)

        n, m = p.n, p.m
        matrix_step("scores", engine.scores, tok, keys)
        scale = p.scale

        def scaled_exact(i: int, j: int) -> sympy.Expr:
            return scale * engine.scores.exact(i, j)

        add("scaled", (n, m), tok, keys, scaled_exact)
        if p.alibi is not None:
            add("bias", (n, m), tok, keys, engine.bias)
            add("biased", (n, m), tok, keys, engine.biased)
        if engine.transform is not None:      # the soft-cap's capped logits
            add(engine.transform.step, (n, m), tok, keys, engine.transformed)
        logit = scaled_exact if engine.plain else engine.logit
        if p.mask is not None:
            add("masked", (n, m), tok, keys,
                lambda i, j: logit(i, j) if engine.is_allowed(i, j) else sympy.S.NegativeInfinity)
        add("shifted", (n, m), tok, keys, engine.shifted)
        add("exp", (n, m), tok, keys, engine.exp)
        add("row_sum", (n, 1), tok, ("Σ",), lambda i, j: engine.row_sum(i))
        add("weights", (n, m), tok, keys, engine.weight)
        add("output", (n, p.d_v), tok, dv_cols, engine.output)
        if p.tiles is not None:      # online softmax: steps built from this trace's entries
            self.online = Online(self)
            self.online.add_steps(add)
        if p.prefill is not None:    # KV-cache decoding, beside the plain causal steps
            self.decode = Decode(self)
            self.decode.add_steps(add)
        if p.backward is not None:   # the gradient, after every forward step
            self.backward = BackwardSteps(self, engine)
            self.backward.add_steps(add)
        # The Trace keeps what its steps are made of and hands out Steps, which hold it; it
        # holds them only weakly, so a plain trace has no reference cycle and is freed as soon
        # as it is dropped (with its engine's caches: 20 MB of fixed-point rows at n = 512),
        # without waiting for the cyclic garbage collector.
        self._specs = {s.name: s for s in steps}
        self._live: weakref.WeakValueDictionary[str, Step] = weakref.WeakValueDictionary()
        self._matrices: dict[str, sympy.ImmutableMatrix] = {}

    # -- access -------------------------------------------------------------------
    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(map(self.step, self._specs))

    def step(self, name: str) -> Step:
        try:
            live = self._live.get(name)
            if live is None:
                live = self._live[name] = Step(*self._specs[name], self)
            return live
        except (KeyError, TypeError):
            raise StepNameError(self._no_step(name)) from None

    def _no_step(self, name: object) -> str:
        import difflib

        close = difflib.get_close_matches(str(name), list(self._specs), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        return f"no step named {name!r}{hint} the steps are {', '.join(self._specs)}"

    def __getitem__(self, name: str) -> Step:
        return self.step(name)

    def __getattr__(self, name: str) -> Step:
        steps = self.__dict__.get("_specs")
        if steps is not None and name in steps:
            return self.step(name)
        if steps is None or name.startswith("_"):  # Python's own probes (__copy__, _repr_html_)
            raise AttributeError(name)
        raise StepNameError(f"Trace has no attribute {name!r}: {self._no_step(name)}")

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    # -- what views and checks need (the Trace is their only contract) -------------
    masked_value = sympy.S.NegativeInfinity
    """The exact value of a blocked position in ``masked`` and ``shifted``."""

    def _row(self, i: Index) -> int:
        return _index("scores", i, self._specs["scores"].row_labels, "row")

    def _key(self, j: Index) -> int:
        return _index("scores", j, self._specs["scores"].col_labels, "column")

    def allowed(self, i: Index) -> tuple[int, ...]:
        """The keys (0-based) row i may attend to: all of them without a mask."""
        return self.engine.rows[self._row(i)].allowed

    def is_allowed(self, i: Index, j: Index) -> bool:
        """Whether query i may attend to key j (False where the mask blocks)."""
        return self.engine.is_allowed(self._row(i), self._key(j))

    @property
    def logit_step(self) -> str:
        """The step the softmax takes: ``scaled``, or ``biased`` (ALiBi), or ``capped``
        (soft-capping, after the bias when both)."""
        return self.engine.logit_step

    def logit(self, i: Index, j: Index) -> sympy.Expr:
        """The exact logit of row i, key j (the entry of :attr:`logit_step`; no mask)."""
        return self.step(self.logit_step)[i, j]

    def alibi_distance(self, i: Index, j: Index) -> int | None:
        """What ALiBi's slope multiplies at (i, j): i − j, or |i − j| when symmetric
        (None without ALiBi)."""
        alibi = self.problem.alibi
        return None if alibi is None else alibi.distance(self._row(i), self._key(j))

    def row_max(self, i: Index) -> int | None:
        """The key of row i's maximum logit (the first of a tie); None when
        symbols leave the order open (then nothing is subtracted in that row)."""
        return self.engine.rows[self._row(i)].argmax

    def ties(self, i: Index) -> frozenset[int]:
        """The keys sharing row i's maximum (shifted score exactly 0; empty in an open row)."""
        return self.engine.top_group(self._row(i))

    def tie_groups(self, i: Index) -> tuple[tuple[int, ...], ...]:
        """Row i's allowed keys grouped by equal shifted score, in key order."""
        return tuple(tuple(g) for g in self.engine.groups(self._row(i)).values())

    def score_gap(self, i: Index, j: Index) -> sympy.Expr:
        """scores[i, j] − scores[i, row max], exactly, before scaling (the score itself in
        an open row): the hand form of a shifted score is scale times this."""
        return self.engine.delta(self._row(i), self._key(j))

    def exponent(self, i: Index, j: Index) -> sympy.Expr:
        """The power of e in exp[i, j] (the shifted score; the scaled score in an open row)."""
        return self.engine.exponent(self._row(i), self._key(j))

    def sink_term(self, i: Index) -> sympy.Expr:
        """The sink's term e^(sink − max) in row i's softmax denominator (0 without a sink)."""
        return self.engine.sink_exp(self._row(i))

    def algebraic_value(self, name: str, i: Index, j: Index) -> sympy.Expr | None:
        """A softmax-side entry (exp, row_sum, weights, output) in its exact algebraic form
        when the exponentials cancel (tied scores: 1/2, 1/3, …), else None.  With algebraic
        inputs None means the entry is transcendental (never on a rounding boundary)."""
        step = self.step(name)
        if name not in _SOFTMAX_SIDE or not self.engine.algebraic:
            return None
        return self.engine.algebraic_value(name, step.row_index(i), step.col_index(j))

    def enclosure(self, name: str, i: Index, prec: int) -> list:
        """Row i of a step as python-flint arb balls at ``prec`` bits: certified enclosures of
        the exact entries (``symattn.engine.engine.NEG_INF`` where masked), computed on demand."""
        step = self.step(name)
        if self.engine.symbols_of(name):
            raise SymattnError(f"{name} depends on symbols ({', '.join(sorted(map(str, self.symbols_of(name))))}):"
                               " substitute numbers (problem.subs) for enclosures")
        return self.engine.balls(name, step.row_index(i), prec)

    def symbols_of(self, name: str) -> frozenset:
        """The symbols a step's entries depend on (empty: it has numbers, so decimals)."""
        self.step(name)
        return self.engine.symbols_of(name)

    def _repr_pretty_(self, p, cycle) -> None:
        """IPython's plain-text display: the terminal derivation."""
        p.text(repr(self) if cycle else str(self))

    def __repr__(self) -> str:
        return f"<Trace of {self.problem!r}: {' '.join(self._specs)}>"

    def __str__(self) -> str:
        """``print(trace)``: the derivation as the terminal shows it."""
        return self._shown("text") or repr(self)


def attend(problem: Problem | None = None, **inputs: Any) -> Trace:
    """Compute attention exactly: ``attend(problem)`` or ``attend(X=..., W_q=..., ...)``."""
    if problem is None:
        problem = Problem(**inputs)
    elif inputs:
        raise SymattnError("give either a Problem or keyword inputs to attend(), not both")
    return Trace(problem)
