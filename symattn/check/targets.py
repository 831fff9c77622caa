"""Targets: what a figure claims to be, resolved to exact cells of a trace.

A target is a step, optionally indexed by row and column (token name or
0-based index): ``weights``, ``weights[I]``, ``weights[love, cats]``,
``output[2]``; or an expression over steps and constants read by symattn's
own parser (extended here with indexing), for figures a lesson prints that
are not a step: ``sqrt(d_k)``, ``exp(scaled[I])`` (elementwise),
``sum(exp(scaled[I]))`` (all entries added), ``rowsum(weights)`` (numpy's
``weights.sum(axis=1)``), ``scores[I] / sqrt(d_k)``.

Why elementwise evaluation by position: the parser's Evaluator builds exact
SymPy scalars with domain checks and caps; evaluating the same AST once per
cell (a step reference yields its entry at that cell) reuses all of it
instead of writing a second, array-valued evaluator.

A target is resolved against a :class:`Source` (a trace, or a documented
view of one such as the transposed weights of softmax-over-columns), so the
same target names the same cells of every mistake variant.

Masked positions: ``masked`` and ``shifted`` hold −∞ where a mask blocks.
A cell there rounds to ``NEG_INF`` (never a CertifiedDecimal), and an
expression target follows the limits a person uses (e^−∞ = 0, so
``exp(shifted[I])`` is 0 there); anything undefined (−∞ − −∞) or +∞ is a
TargetError naming the cell.

Size: an expression target whose value is beyond 10^1000 (or whose exact
numbers exceed 4,000 bits) is refused: no written figure can be checked
against it (a numeral has at most 1,000 digits), and printing it costs more
than the check is worth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator

import flint
import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding, certify, reround, to_arb
from symattn.numbers.masked import NEG_INF, Masked
from symattn.numbers.compare import compare
from symattn.errors import ParseError, SymattnError
from symattn.exact.sympytext import hand_text
from symattn.exact.parser import Call, Evaluator, Name, Node, Num, Power, Product, Sum, Unary
from symattn.check.target_grammar import (  # noqa: F401 (the grammar's names, public here too)
    Index, TargetError, TargetParser, TargetSpec, nodes, parse_target,
)
from symattn.trace.trace import Step, Trace

__all__ = ["Cell", "Index", "Source", "TargetError", "TargetSpec", "parse_target", "resolve"]

Shape = tuple[int, int] | None   # None: a scalar that broadcasts

MAX_TARGET_LOG10 = 1_000     # |value| of an expression target below 10^1000
MAX_TARGET_BITS = 4_000      # bits of one exact rational inside a target's value
_TEXT_LIMIT = 4_000          # digits of an integer printed in a message (Python's cap is 4,300)


class Source:
    """Where a target's steps come from: a trace, or a named view of one."""

    def __init__(self, trace: Trace, transposed: frozenset[str] = frozenset()) -> None:
        self.trace = trace
        self.transposed = transposed   # steps read transposed (softmax over columns)
        self._rows: dict[tuple[str, int, Rounding], list] = {}   # certified rows, by rounding

    def has(self, name: str) -> bool:
        return name in self.trace.step_names

    def step(self, name: str) -> Step:
        return self.trace.step(name)

    def shape(self, name: str) -> tuple[int, int]:
        r, c = self.step(name).shape
        return (c, r) if name in self.transposed else (r, c)

    def labels(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        s = self.step(name)
        if name in self.transposed:
            return s.col_labels, s.row_labels
        return s.row_labels, s.col_labels

    def where(self, name: str, i: int, j: int) -> tuple[int, int]:
        """The entry of the underlying step that holds cell (i, j)."""
        return (j, i) if name in self.transposed else (i, j)

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        a, b = self.where(name, i, j)
        return self.step(name)[a, b]

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        """One cell's certified rounding (``NEG_INF`` where a mask blocks).  Its whole row is certified at once and kept: the
        cells of a figure (and a mistake's cells, judged for every answer) share their rows.
        A row that fails as a whole (one entry past a cap) falls back to the cell alone."""
        a, b = self.where(name, i, j)
        key = (name, a, rounding)
        row = self._rows.get(key)
        if row is None:
            try:
                row = self._rows[key] = self.step(name).row_decimals(a, rounding)
            except SymattnError:
                return self.step(name).decimal(a, b, rounding)
        return row[b]


@dataclass(eq=False)
class Cell:
    """One exact value a figure's entry is compared with, with cached roundings."""

    label: str
    _exact: Callable[[], sympy.Expr]
    _round: Callable[[Rounding], CertifiedDecimal | Masked]
    _cache: dict[object, Any] = field(default_factory=dict)
    column: str | None = None    # the column's token or index, for figures written 'red=0.41'

    @property
    def exact(self) -> sympy.Expr:
        if "exact" not in self._cache:
            self._cache["exact"] = self._exact()
        return self._cache["exact"]

    @property
    def text(self) -> str:
        """The exact value as SymPy prints it (cached: printing is slow)."""
        if "text" not in self._cache:
            self._cache["text"] = exact_text(self.exact)
        return self._cache["text"]

    @property
    def hand(self) -> str:
        """The exact value as the lesson writes it by hand (e^(−2/√3), not exp(-2*sqrt(3)/3)):
        what a message shows a student (the JSON's ``exact`` keeps SymPy's text)."""
        if "hand" not in self._cache:
            self._cache["hand"] = exact_text(self.exact, hand_text)
        return self._cache["hand"]

    def rounded(self, rounding: Rounding) -> CertifiedDecimal | Masked:
        """The certified rounding, or ``NEG_INF`` where a mask blocks (cached).

        A rounding coarser than the cell's 20-digit one is read off it (``reround``, a
        proof) when that decides it: a figure's entries, written at several precisions and
        compared with every mistake's value, then cost one certification per cell."""
        hit = self._cache.get(rounding)
        if hit is None:
            hit = self._cache[rounding] = self._coarser(rounding) or self._round(rounding)
        return hit

    def _coarser(self, rounding: Rounding) -> CertifiedDecimal | Masked | None:
        if rounding == _PROBE or rounding.digits is not None and rounding.digits >= _PROBE_DIGITS:
            return None
        try:
            fine = self.rounded(_PROBE)
        except SymattnError:
            return None                # the cell's own rounding says what is wrong
        if isinstance(fine, Masked):   # the one instance, NEG_INF
            return fine
        return reround(fine, rounding)

    def rounded_value(self, rounding: Rounding) -> Fraction | None:
        """The certified rounding as an exact Fraction, None for −∞ (cached: compared
        per answer)."""
        key = ("value", rounding)
        if key not in self._cache:
            r = self.rounded(rounding)
            self._cache[key] = None if isinstance(r, Masked) else r.as_fraction()
        return self._cache[key]

    @property
    def neg_inf(self) -> bool:
        """Is the value −∞ (a masked score)?  Decided by the cell's own rounding."""
        return self.rounded(_PROBE) is NEG_INF


_PROBE_DIGITS = 20
_PROBE = Rounding(digits=_PROBE_DIGITS)   # the screen verdicts use too: one certification per cell


def exact_text(expr: sympy.Expr, printer: Callable[[sympy.Expr], str] = sympy.sstr) -> str:
    """SymPy's text of an exact value (or ``printer``'s: the hand forms); an integer too long
    for Python to print is named by its size instead (the value itself is still checked exactly)."""
    big = max((max(abs(a.p).bit_length(), a.q.bit_length()) for a in _rationals(expr)), default=0)
    if big * 0.30103 > _TEXT_LIMIT:
        return f"an exact number with integers of about {int(big * 0.30103):,} digits"
    return printer(expr)


def _rationals(expr: sympy.Expr) -> Iterator[sympy.Rational]:
    stack = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, sympy.Rational):
            yield item
        elif isinstance(item, sympy.Basic):
            stack.extend(item.args)


def _key_index(source: Source, name: str, key: str | int, axis: int) -> int:
    labels = source.labels(name)[axis]
    kind = "row" if axis == 0 else "column"
    if isinstance(key, int):
        if -len(labels) <= key < len(labels):
            return key % len(labels)
        raise TargetError(f"{name} has {len(labels)} {kind}s; {kind} {key} is out of range "
                          f"(0..{len(labels) - 1})")
    if key in labels:
        return labels.index(key)
    raise TargetError(f"{name} has no {kind} named {key!r}; its {kind}s are {', '.join(labels)}")


class _Eval(Evaluator):
    """The parser's Evaluator, at one cell: a step yields its entry there."""

    functions = {**Evaluator.functions}

    def __init__(self, spec: TargetSpec, source: Source) -> None:
        super().__init__(spec.text, "target")
        self.source = source
        p = source.trace.problem
        self.names = {"d_k": sympy.Integer(p.d_k), "d_v": sympy.Integer(p.d_v),
                      "n": sympy.Integer(p.n), "m": sympy.Integer(p.m), "scale": p.scale}
        if p.d_model is not None:
            self.names["d_model"] = sympy.Integer(p.d_model)
        self.pos: tuple[int, int] = (0, 0)
        self._memo: dict[tuple[int, tuple[int, int]], sympy.Expr] = {}

    def __call__(self, node: Node) -> sympy.Expr:
        """Each node once per cell: the infinity checks below look at a node's children
        before the parser's own rules evaluate them again."""
        key = (id(node), self.pos)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = super().__call__(node)
        return hit

    # -- shapes -------------------------------------------------------------
    def shape(self, node: Node) -> Shape:
        if isinstance(node, Num):
            return None
        if isinstance(node, Name):
            return self.source.shape(node.name) if self.is_step(node.name) else None
        if isinstance(node, Index):
            self.need_step(node.name, node)
            rows, cols = self.source.shape(node.name)
            return (1, cols) if len(node.keys) == 1 else None
        if isinstance(node, Call) and node.name == "sum":
            self.shape(self.one_arg(node))
            return None
        if isinstance(node, Call) and node.name == "rowsum":
            inner = self.shape(self.one_arg(node))
            return None if inner is None else (inner[0], 1)
        children = self.children(node)
        shapes = {s for s in (self.shape(c) for c in children) if s is not None}
        if len(shapes) > 1:
            raise TargetError(f"target {self.text!r} combines shapes "
                              f"{' and '.join(f'{r}×{c}' for r, c in sorted(shapes))}")
        return shapes.pop() if shapes else None

    @staticmethod
    def children(node: Node) -> list[Node]:
        if isinstance(node, (Sum, Product)):
            return [n for _, n in (node.terms if isinstance(node, Sum) else node.factors)]
        if isinstance(node, Unary):
            return [node.operand]
        if isinstance(node, Power):
            return [node.base, node.exponent]
        if isinstance(node, Call):
            return list(node.args)
        return []

    def one_arg(self, node: Call) -> Node:
        if len(node.args) != 1:
            raise self.fail(f"{node.name} takes 1 argument", node, f"write {node.name}(...)")
        return node.args[0]

    def is_step(self, name: str) -> bool:
        return name not in self.names and name not in self.constants and self.source.has(name)

    def need_step(self, name: str, node: Node) -> None:
        if not self.is_step(name):
            steps = ", ".join(self.source.trace.step_names)
            raise TargetError(f"target {self.text!r}: no step named {name!r}; the steps are {steps}")

    # -- values at self.pos ---------------------------------------------------
    def eval_Name(self, node: Name) -> sympy.Expr:
        if node.name in self.names:
            return self.names[node.name]
        if self.is_step(node.name):
            return self.source.exact(node.name, *self.pos)
        if node.name in self.constants:
            return self.constants[node.name]
        names = ", ".join([*self.names, *self.source.trace.step_names])
        raise TargetError(f"target {self.text!r}: unknown name {node.name!r}; use a step or "
                          f"one of {names}")

    def eval_Index(self, node: Index) -> sympy.Expr:
        i = _key_index(self.source, node.name, node.keys[0], 0)
        if len(node.keys) == 2:
            return self.source.exact(node.name, i, _key_index(self.source, node.name, node.keys[1], 1))
        return self.source.exact(node.name, i, self.pos[1])

    def eval_Call(self, node: Call) -> sympy.Expr:
        if node.name in ("sum", "rowsum"):
            arg = self.one_arg(node)
            shape = self.shape(arg) or (1, 1)
            saved = self.pos
            if node.name == "sum":
                cells = [(i, j) for i in range(shape[0]) for j in range(shape[1])]
            else:
                cells = [(saved[0], j) for j in range(shape[1])]
            try:
                terms = []
                for cell in cells:
                    self.pos = cell
                    terms.append(self(arg))
            finally:
                self.pos = saved
            return sympy.Add(*terms)
        if node.name in self.functions and len(node.args) == 1:
            arg = self(node.args[0])
            if _infinite(arg):
                if node.name == "exp" and arg is sympy.S.NegativeInfinity:
                    return sympy.S.Zero           # e^−∞ = 0: a blocked weight
                raise TargetError(f"target {self.text!r}: {node.name} of {arg} (a masked "
                                  "position) is not a number; name the cells that are not masked")
        return super().eval_Call(node)

    def eval_Power(self, node: Power) -> sympy.Expr:
        base, exponent = self(node.base), self(node.exponent)
        if _infinite(exponent) and not _infinite(base) and exponent is sympy.S.NegativeInfinity:
            if base is sympy.E or (not base.free_symbols and compare(base, 1) > 0):
                return sympy.S.Zero               # b^−∞ = 0 for b > 1
        if _infinite(base) or _infinite(exponent):
            raise TargetError(f"target {self.text!r}: a power of −∞ (a masked position) is "
                              "not a number here; name the cells that are not masked")
        return super().eval_Power(node)

    def check_divisor(self, value: sympy.Expr, node: Node) -> None:
        if _infinite(value):
            raise TargetError(f"target {self.text!r}: divides by −∞ (a masked position); name "
                              "the cells that are not masked")
        super().check_divisor(value, node)


def _infinite(x: sympy.Expr) -> bool:
    """±∞ or undefined: SymPy's singletons, which arithmetic on −∞ yields."""
    return x is sympy.S.NegativeInfinity or x is sympy.S.Infinity or x is sympy.S.NaN \
        or x is sympy.S.ComplexInfinity


def _checked(spec: TargetSpec, label: str, value: sympy.Expr) -> sympy.Expr:
    """An expression target's cell value: −∞ or a finite number of a checkable size."""
    if value is sympy.S.NegativeInfinity:
        return value
    if _infinite(value):
        raise TargetError(f"target {spec.text!r} is not a number at {label} ({value}): it "
                          "combines −∞ at a masked position; name the cells that are not "
                          "masked")
    big = max((max(abs(a.p).bit_length(), a.q.bit_length()) for a in _rationals(value)), default=0)
    if big > MAX_TARGET_BITS:
        raise TargetError(f"target {spec.text!r} holds a number of {big:,} bits at {label}: "
                          f"over the {MAX_TARGET_BITS:,}-bit cap for a checked figure; check a "
                          "smaller value")
    try:
        ball = to_arb(value, 64)
    except SymattnError:
        return value     # not certifiable: the verdict says so, for this figure only
    if not ball.is_finite() or ball.abs_upper() > _MAX_MAGNITUDE:
        raise TargetError(f"target {spec.text!r} is beyond 10^{MAX_TARGET_LOG10:,} at {label}: "
                          "no written figure can be checked against it; check a smaller value")
    return value


_MAX_MAGNITUDE = flint.arb(10) ** MAX_TARGET_LOG10


def resolve(spec: TargetSpec, source: Source) -> tuple[tuple[int, int], list[Cell]]:
    """The shape of a target and its cells (row-major) in one source."""
    ev = _Eval(spec, source)
    try:
        shape = ev.shape(spec.node) or (1, 1)
        ref = spec.step_ref
        if ref is not None and (ref[1] or ev.is_step(ref[0])):
            return shape, _step_cells(spec, ref, source)
        cells = []
        for i in range(shape[0]):
            for j in range(shape[1]):
                ev.pos = (i, j)
                label = _label(spec.text, shape, i, j)
                value = _checked(spec, label, ev(spec.node))
                cells.append(Cell(label, _constant(value), _rounder(value)))
        return shape, cells
    except ParseError as exc:
        raise TargetError(str(exc)) from None
    except SymattnError as exc:
        if isinstance(exc, TargetError):
            raise
        raise TargetError(f"target {spec.text!r}: {exc}") from None


def _round(value: sympy.Expr, rounding: Rounding) -> CertifiedDecimal | Masked:
    return NEG_INF if value is sympy.S.NegativeInfinity else certify(value, rounding)


def _constant(value: sympy.Expr) -> Callable[[], sympy.Expr]:
    return lambda: value


def _rounder(value: sympy.Expr) -> Callable[[Rounding], CertifiedDecimal | Masked]:
    return lambda rounding: _round(value, rounding)


def _label(text: str, shape: tuple[int, int], i: int, j: int) -> str:
    if shape == (1, 1):
        return text
    return f"{text}[{i}, {j}]"


def _step_cells(spec: TargetSpec, ref: tuple[str, tuple[str | int, ...]],
                source: Source) -> list[Cell]:
    name, keys = ref
    _Eval(spec, source).need_step(name, spec.node)
    rows, cols = source.labels(name)
    if not keys:
        positions = [(i, j) for i in range(len(rows)) for j in range(len(cols))]
    elif len(keys) == 1:
        i = _key_index(source, name, keys[0], 0)
        positions = [(i, j) for j in range(len(cols))]
    else:
        positions = [(_key_index(source, name, keys[0], 0), _key_index(source, name, keys[1], 1))]
    return [Cell(f"{name}[{rows[i]}, {cols[j]}]", *_step_cell(source, name, i, j),
                 column=cols[j])
            for i, j in positions]


def _step_cell(source: Source, name: str, i: int, j: int
               ) -> tuple[Callable[[], sympy.Expr], Callable[[Rounding], CertifiedDecimal | Masked]]:
    """A step cell's exact value and rounding, read from ``source`` when first asked."""
    return (lambda: source.exact(name, i, j)), (lambda rounding: source.decimal(name, i, j, rounding))


def iter_cells(shape: tuple[int, int], cells: list[Cell]) -> Iterator[tuple[int, int, Cell]]:
    for k, cell in enumerate(cells):
        yield k // shape[1], k % shape[1], cell
