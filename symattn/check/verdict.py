"""Verdicts: one written entry against one exact cell (and the mistake cells).

Stable codes (``--json``): ``exact``, ``rounded``, ``last-digit``,
``mistake``, ``wrong``, ``invalid``.  A written numeral is judged at the
precision of its own text: it is ``rounded`` when it is the certified
rounding of the exact value there (a value exactly halfway accepts either
neighbour), ``exact`` when it equals the exact value.  A figure that a
named mistake reproduces at that precision is a ``mistake`` (unless the
right answer gives it too: then the mistake is only *indistinguishable*).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Sequence

import sympy

from symattn.certify import CertifiedDecimal, Rounding, certify
from symattn.check.figures import Entry, WrittenExact, WrittenNumber
from symattn.check.targets import Cell
from symattn.compare import equal
from symattn.errors import SymattnError

__all__ = ["CODES", "RIGHT", "EntryVerdict", "MistakeCell", "MistakeSet", "judge_entry", "worst"]

#: Verdict codes from best to worst.
CODES = ("exact", "rounded", "last-digit", "mistake", "wrong", "invalid")
#: The codes that count as right.
RIGHT = frozenset(("exact", "rounded"))

_SHOW = Rounding(digits=6)


@dataclass(frozen=True)
class MistakeCell:
    """The value a named mistake gives for one cell (``detail`` says which step/how)."""

    code: str
    detail: str
    cell: Cell


@dataclass
class EntryVerdict:
    """The verdict on one written entry."""

    label: str
    written: str
    code: str
    message: str
    mistake: str | None = None
    mistake_detail: str | None = None
    exact: str | None = None        # the exact value (SymPy text)
    expected: str | None = None     # its certified rounding at the written precision
    also: list[str] = field(default_factory=list)   # mistakes giving the same figure
    truncation: bool | None = None  # for last-digit: is the figure a truncation?

    @property
    def right(self) -> bool:
        return self.code in RIGHT

    def to_json(self) -> dict:
        return {"target": self.label, "text": self.written, "verdict": self.code,
                "mistake": self.mistake, "mistake_detail": self.mistake_detail,
                "exact": self.exact, "expected": self.expected, "message": self.message,
                "indistinguishable_from": self.also, "truncation": self.truncation}


def worst(codes: Sequence[str]) -> str:
    return max(codes, key=CODES.index)


def _frac(d: CertifiedDecimal) -> Fraction:
    return d.as_fraction()


def _show(cell: Cell) -> str:
    """The exact value, and 6 certified digits when it is not a short rational."""
    exact = cell.exact
    text = cell.text
    if len(text) > 120:
        text = text[:117] + "..."
    if exact.is_Rational and len(text) < 20:
        return text
    return f"{text} ≈ {cell.rounded(_SHOW)}"


def _precision(w: WrittenNumber) -> str:
    r = w.rounding
    return str(r) + (" (as a percentage)" if w.percent else "")


def _is_tie(cell: Cell, w: WrittenNumber) -> bool:
    x = cell.exact
    if not x.is_Rational:
        return False
    return abs(w.value - Fraction(int(x.p), int(x.q))) * 2 == w.unit


class MistakeSet:
    """The mistakes' cells for one target cell, indexed by their rounding at each
    precision, so judging an answer is a dictionary look-up (grading 10,000 answers)."""

    def __init__(self, cells: Sequence[MistakeCell]) -> None:
        self.cells = list(cells)
        self._by: dict[Rounding, dict[Fraction, list[MistakeCell]]] = {}

    def __iter__(self):
        return iter(self.cells)

    def matching(self, w: WrittenNumber) -> list[MistakeCell]:
        table = self._by.get(w.rounding)
        if table is None:
            table = self._by[w.rounding] = {}
            for m in self.cells:
                try:
                    table.setdefault(m.cell.rounded_value(w.rounding), []).append(m)
                except SymattnError:
                    continue   # a variant whose value cannot be certified explains nothing
        return table.get(w.value, [])


def _matches_number(w: WrittenNumber, cells: Sequence[MistakeCell]) -> list[MistakeCell]:
    if isinstance(cells, MistakeSet):
        return cells.matching(w)
    return MistakeSet(cells).matching(w)


_SCREEN = Rounding(digits=20)


def _same(value: sympy.Expr, screen: CertifiedDecimal, cell: Cell) -> bool:
    """Exact equality, screened by certified 20-digit roundings (cheap and cached):
    different roundings prove the values differ without SymPy's slow expansion."""
    if cell.rounded(_SCREEN) != screen:
        return False
    return equal(value, cell.exact)


def _matches_exact(w: WrittenExact, cells: Sequence[MistakeCell],
                   screen: CertifiedDecimal) -> list[MistakeCell]:
    found = []
    for m in cells:
        try:
            if _same(w.value, screen, m.cell):
                found.append(m)
        except SymattnError:
            continue
    return found


def _rounded_up(cell: Cell, rounding: Rounding, value: Fraction) -> bool:
    """Did rounding carry (|x| < |rounded|)?  Then cutting the digits gives one unit less."""
    finer = (Rounding(places=rounding.places + 3) if rounding.places is not None
             else Rounding(digits=rounding.digits + 3))
    return abs(_frac(cell.rounded(finer))) < abs(value)


def _names(found: Sequence[MistakeCell]) -> list[str]:
    out: list[str] = []
    for m in found:
        name = f"{m.code} ({m.detail})" if m.detail else m.code
        if name not in out:
            out.append(name)
    return out


def judge_entry(written: Entry, cell: Cell, mistakes: Sequence[MistakeCell]) -> EntryVerdict:
    """Judge one written entry against its exact cell and the mistakes' cells."""
    if isinstance(written, WrittenExact):
        return _judge_exact(written, cell, mistakes)
    return _judge_number(written, cell, mistakes)


def _judge_exact(w: WrittenExact, cell: Cell, mistakes: Sequence[MistakeCell]) -> EntryVerdict:
    shown = _show(cell)
    base = dict(label=cell.label, written=w.text, exact=cell.text, expected=None)
    screen = certify(w.value, _SCREEN)
    if _same(w.value, screen, cell):
        also = _names(_matches_exact(w, mistakes, screen))
        return EntryVerdict(code="exact", message=f"{w.text} is exactly {cell.label}"
                            + _also(also), also=also, **base)
    found = _matches_exact(w, mistakes, screen)
    if found:
        first = found[0]
        return EntryVerdict(code="mistake", mistake=first.code, mistake_detail=first.detail,
                            also=_names(found[1:]),
                            message=f"{w.text} is exactly what {_describe(first)} gives; "
                                    f"the right value is {shown}", **base)
    return EntryVerdict(code="wrong", message=f"{w.text} is not {cell.label}; the right value "
                        f"is {shown}", **base)


def _describe(m: MistakeCell) -> str:
    return f"the mistake {m.code} ({m.detail})" if m.detail else f"the mistake {m.code}"


def _also(names: list[str]) -> str:
    """Name the mistakes a right figure cannot rule out (early rounding is too common to
    mention in a message; the full list stays in ``also``)."""
    names = [n for n in names if not n.startswith("early-rounding")]
    if not names:
        return ""
    return f"; indistinguishable here from {', '.join(names)}"


def _judge_number(w: WrittenNumber, cell: Cell, mistakes: Sequence[MistakeCell]) -> EntryVerdict:
    r = cell.rounded(w.rounding)
    at = _precision(w)
    base = dict(label=cell.label, written=w.text, exact=cell.text, expected=r.text)
    value = _frac(r)
    found = _matches_number(w, mistakes)
    if value == w.value or _is_tie(cell, w):
        also = _names(found)
        if r.exact and value == w.value:
            return EntryVerdict(code="exact", message=f"{w.text} is exactly {cell.label}" + _also(also),
                                also=also, **base)
        tie = " (an exact tie: either neighbour is right)" if value != w.value else ""
        return EntryVerdict(code="rounded", also=also, **base,
                            message=f"{w.text} is {cell.label} = {_show(cell)} correctly rounded "
                                    f"to {at}{tie}" + _also(also))
    if found:
        first = found[0]
        return EntryVerdict(code="mistake", mistake=first.code, mistake_detail=first.detail,
                            also=_names(found[1:]), **base,
                            message=f"{w.text} is what {_describe(first)} gives at {at}; "
                                    f"{cell.label} = {_show(cell)} rounds to {r.text}")
    delta = abs(w.value - value)
    if delta == w.unit and w.value * value >= 0:
        truncated = abs(w.value) < abs(value) and _rounded_up(cell, w.rounding, value)
        how = ("a truncation (digits cut instead of rounded)" if truncated
               else "not a truncation")
        return EntryVerdict(code="last-digit", truncation=truncated, **base,
                            message=f"{w.text} is one unit off in the last place, {how}: "
                                    f"{cell.label} = {_show(cell)} rounds to {r.text} at {at}")
    return EntryVerdict(code="wrong", **base,
                        message=f"{w.text} is not {cell.label}: {_show(cell)} rounds to "
                                f"{r.text} at {at}")
