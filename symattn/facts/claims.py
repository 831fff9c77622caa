"""Claims: figures a person asserts (weights, outputs) for a fact to check.

A fact is a theorem about true attention, so it can only fail on numbers
someone *wrote down*.  A claims file is TOML with ``weights`` (n × m) and/or
``output`` (n × d_v); entries are read exactly (TOML floats by their text),
never through ``eval``.

Why each entry keeps its text: a claim is judged at the precision it was
written.  ``0.136`` stands for any value in [0.1355, 0.1365], so three weights
written to 3 places are consistent with summing to 1 when their sum is within
3 · 0.0005 of 1.  An integer, a fraction or a root (``1``, ``1/4``, ``√2/2``) is
exact.  A counterexample shows the numbers as they were written.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import sympy

from symattn.errors import ParseError, ProblemError
from symattn.problem.matrix import exact_matrix
from symattn.problem.tomlfile import load_toml

__all__ = ["CLAIM_KEYS", "Claimed", "Claims", "decimal_text", "written_sum"]

CLAIM_KEYS = ("weights", "output")

# a decimal numeral as TOML, Python or a person writes it: 0.136, -1.5e-3, 2., 1_000.25
_NUMERAL = re.compile(r"[+\-−]?(?:[0-9][0-9_]*)?(?:\.([0-9_]*))?(?:[eE]([+-]?[0-9]{1,6}))?")


@dataclass(frozen=True)
class Claimed:
    """One claimed entry: its text, its exact value and half a unit in its last written
    place (0 when the text is exact: an integer, a fraction, a root)."""

    text: str
    value: sympy.Expr
    half: sympy.Rational = sympy.S.Zero
    places: int | None = 0    # decimal places written (None: not a terminating decimal)

    @property
    def exact(self) -> bool:
        return self.half == 0


def _text_of(raw: object) -> str | None:
    """The text a claimed entry was written as, when it has one."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):                      # also a TOML float's DecimalText
        return str.__str__(raw).strip()
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return repr(raw)                          # the shortest text of the float: 0.14
    if isinstance(raw, decimal.Decimal):
        return str(raw)
    if type(raw).__module__ == "numpy":
        item = getattr(raw, "item", None)
        return _text_of(item()) if item is not None else None
    return None


def _claimed(raw: object, value: sympy.Expr) -> Claimed:
    """An entry with its written precision, read from its text."""
    text = _text_of(raw)
    if text is None:
        return Claimed(sympy.sstr(value), value, sympy.S.Zero, _places_of(value))
    match = _NUMERAL.fullmatch(text)
    if not match or not any(ch.isdigit() for ch in text):
        return Claimed(text, value, sympy.S.Zero, _places_of(value))
    frac, exp = match.group(1), match.group(2)
    if frac is None and exp is None:              # an integer: exact
        return Claimed(text, value, sympy.S.Zero, 0)
    shift = int(exp or 0) - len((frac or "").replace("_", ""))
    half = sympy.Rational(10) ** shift / 2
    return Claimed(text, value, half, max(0, -shift))


def _places_of(value: sympy.Expr) -> int | None:
    """Decimal places of an exact terminating decimal (None for 1/3, √2, ...)."""
    if not value.is_Rational:
        return None
    q = int(value.q)
    places = 0
    while q % 10 == 0:
        q //= 10
        places += 1
    while q % 2 == 0 or q % 5 == 0:
        if places > 4_000:      # past any numeral the parser accepts
            return None
        q //= 2 if q % 2 == 0 else 5
        places += 1
    return places if q == 1 else None


def decimal_text(value: sympy.Expr, places: int | None = None) -> str | None:
    """An exact terminating decimal as text with at least ``places`` places (1.05, 0.0015);
    None when the value is not one."""
    own = _places_of(value)
    if own is None:
        return None
    p = max(own, places or 0)
    scaled = Fraction(int(value.p), int(value.q)) * 10**p
    digits = str(abs(scaled.numerator)).rjust(p + 1, "0")
    sign = "-" if scaled < 0 else ""
    return sign + (digits[:-p] + "." + digits[-p:] if p else digits)


def written_sum(entries: tuple[Claimed, ...] | list[Claimed]) -> tuple[sympy.Expr, sympy.Rational, str]:
    """The exact sum of claimed entries, how far it may be from the true sum (the half-units
    added up), and the sum as a person writes it (``1.05``; a formula when not a decimal)."""
    total = sympy.Add(*[e.value for e in entries])
    slack = sympy.Add(*[e.half for e in entries])
    places = [e.places for e in entries if e.places is not None]
    shown = None if len(places) < len(entries) else decimal_text(total, max(places, default=0))
    return total, slack, shown if shown is not None else sympy.sstr(total)


def _rows_of_raw(raw: object, shape: tuple[int, int]) -> list[list[object]] | None:
    """The raw entries in rows when they are laid out as the matrix was read; else None."""
    if hasattr(raw, "tolist") and not isinstance(raw, sympy.MatrixBase):
        raw = raw.tolist()
    if not isinstance(raw, (list, tuple)):
        return None
    rows = list(raw)
    if shape[0] == 1 and rows and not isinstance(rows[0], (list, tuple)):
        rows = [rows]
    if len(rows) != shape[0] or not all(isinstance(r, (list, tuple)) and len(r) == shape[1]
                                        for r in rows):
        return None
    return [list(r) for r in rows]


@dataclass(frozen=True)
class Claims:
    """Exact matrices a person claims are the weights and/or the output, each entry with
    the text and precision it was written at (:meth:`entries`)."""

    weights: sympy.ImmutableMatrix | None = None
    output: sympy.ImmutableMatrix | None = None
    written: Mapping[str, tuple[tuple[Claimed, ...], ...]] = field(
        default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "claims") -> "Claims":
        """Read ``{"weights": [[...]], "output": [[...]]}`` exactly, keeping each entry's text."""
        if not isinstance(data, Mapping):
            raise ProblemError(f"{source} must be a table with weights and/or output")
        unknown = [k for k in data if k not in CLAIM_KEYS]
        if unknown:
            raise ProblemError(f"{source}: unknown key {unknown[0]!r}; the keys are weights, output")
        if not any(k in data for k in CLAIM_KEYS):
            raise ProblemError(f"{source}: give weights = [[...]] and/or output = [[...]]")
        try:
            found = {k: exact_matrix(k, data[k]).to_sympy() for k in CLAIM_KEYS if k in data}
        except (ParseError, ProblemError) as exc:
            raise ProblemError(f"{source}: {exc}") from None
        written = {}
        for k, matrix in found.items():
            raw = _rows_of_raw(data[k], matrix.shape)
            written[k] = tuple(
                tuple(_claimed(raw[i][j] if raw is not None else None, matrix[i, j])
                      for j in range(matrix.cols))
                for i in range(matrix.rows))
        return cls(**found, written=written)

    @classmethod
    def from_toml(cls, path: str | Path) -> "Claims":
        """Read a claims file (TOML)."""
        data = load_toml(path, what="a TOML file with weights = [[...]]")
        return cls.from_mapping(data, source=str(path))

    def entries(self, name: str) -> tuple[tuple[Claimed, ...], ...]:
        """The claimed ``weights`` or ``output`` entry by entry, as written (exact entries
        for a matrix given directly as SymPy values)."""
        if name in self.written:
            return self.written[name]
        matrix = getattr(self, name)
        if matrix is None:
            return ()
        return tuple(tuple(Claimed(sympy.sstr(matrix[i, j]), matrix[i, j], sympy.S.Zero,
                                   _places_of(matrix[i, j]))
                           for j in range(matrix.cols)) for i in range(matrix.rows))

    def check_shapes(self, n: int, m: int, d_v: int) -> None:
        """Refuse claims whose shape does not fit the problem."""
        for name, matrix, shape in (("weights", self.weights, (n, m)), ("output", self.output, (n, d_v))):
            if matrix is not None and matrix.shape != shape:
                raise ProblemError(f"claimed {name} is {matrix.rows}×{matrix.cols} but the problem's "
                                   f"{name} are {shape[0]}×{shape[1]}")
