"""Verdicts: one written entry against one exact cell, and the figure's verdict type.

Stable codes (``--json``): ``exact``, ``rounded``, ``last-digit``,
``mistake``, ``wrong``, ``invalid``, and ``blank`` for an answer left empty
(grading: a blank cell is no answer, which is not the same as an unreadable one).  A written numeral is judged at the
precision of its own text: it is ``rounded`` when it is the certified
rounding of the exact value there (a value exactly halfway accepts either
neighbour), ``exact`` when it equals the exact value.  ``-inf``/``−∞``/``-oo``
is exact where the value is −∞ (a masked score) and wrong anywhere else.

This module judges ONE entry and lists the named mistakes that reproduce
it (``EntryVerdict.matches``); whether a mistake is *named* is decided for
the whole figure in :mod:`symattn.check.diagnosis`, because a mistake
explains a figure only when it reproduces every entry written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterator, Sequence

import sympy

from symattn.errors import VALUE_FAILURES
from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.check.figures import Entry, WrittenExact, WrittenInfinity, WrittenNumber
from symattn.check.targets import Cell
from symattn.numbers.compare import equal
from symattn.numbers.masked import Masked
from symattn.check.codes import Verdict

__all__ = ["CODES", "RIGHT", "EntryVerdict", "FigureVerdict", "MistakeCell", "MistakeSet",
           "blank", "invalid", "judge_entry", "name_mistake", "worst"]

#: Verdict codes from best to worst.
CODES = tuple(Verdict)
#: The codes that count as right.
RIGHT = frozenset(v for v in Verdict if v.right)

_SHOW = Rounding(digits=6)
_SCREEN = Rounding(digits=20)
_FINER = (2, 4, 8, 16, 32, 64)   # extra digits tried to decide a truncation


@dataclass(frozen=True)
class MistakeCell:
    """The value a named mistake gives for one cell (``detail`` says which step/how)."""

    code: str
    detail: str
    cell: Cell

    @property
    def name(self) -> str:
        return f"{self.code} ({self.detail})" if self.detail else self.code


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
    also: list[str] = field(default_factory=list)   # other mistakes giving the same figure
    truncation: bool | None = None  # for last-digit: is the figure a truncation?
    # not part of the JSON contract: what the figure-level diagnosis needs
    matches: list[MistakeCell] = field(default_factory=list, repr=False)
    at: str | None = field(default=None, repr=False)      # the written precision, in words
    shown: str = field(default="", repr=False)            # the exact value for messages
    # for the views (not judged, not in the JSON): the cell judged against and the written
    # precision, so a document typesets the exact value and its rounding as math
    cell: Cell | None = field(default=None, repr=False, compare=False)
    rounding: Rounding | None = field(default=None, repr=False, compare=False)

    @property
    def right(self) -> bool:
        return self.code in RIGHT

    def to_json(self) -> dict:
        return {"target": self.label, "text": self.written, "verdict": self.code,
                "mistake": self.mistake, "mistake_detail": self.mistake_detail,
                "exact": self.exact, "expected": self.expected, "message": self.message,
                "indistinguishable_from": self.also, "truncation": self.truncation}


@dataclass
class FigureVerdict:
    """The verdict on one figure: overall, and per entry for rows and matrices."""

    target: str
    text: str
    code: str
    message: str
    variant: str | None = None
    mistake: str | None = None
    mistake_detail: str | None = None
    entries: list[EntryVerdict] = field(default_factory=list)
    shape: tuple[int, int] | None = None
    also: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return self.code in RIGHT

    def _field(self, name: str) -> object:
        values = [getattr(e, name) for e in self.entries]
        if not values:
            return None
        return values[0] if self.shape == (1, 1) else values

    def to_json(self) -> dict:
        data = {"target": self.target, "variant": self.variant, "text": self.text,
                "verdict": self.code, "mistake": self.mistake,
                "mistake_detail": self.mistake_detail, "exact": self._field("exact"),
                "expected": self._field("expected"), "message": self.message,
                "indistinguishable_from": self.also}
        if self.shape is not None and self.shape != (1, 1):
            data["shape"] = list(self.shape)
            data["entries"] = [e.to_json() for e in self.entries]
        return data


def invalid(target: str, text: str, message: str, variant: str | None = None) -> FigureVerdict:
    return FigureVerdict(target=target, text=text, code=Verdict.INVALID, message=message, variant=variant)


def blank(target: str, text: str, variant: str | None = None) -> FigureVerdict:
    """No answer given: its own verdict, so a class summary tells skipped questions from
    unreadable answers."""
    return FigureVerdict(target=target, text=text, code=Verdict.BLANK, message="no answer given",
                         variant=variant)


def worst(codes: Sequence[str]) -> str:
    return max(codes, key=CODES.index)


# ------------------------------------------------------------ mistakes' values

class MistakeSet:
    """The mistakes' cells for one target cell, indexed by their rounding at each
    precision, so judging an answer is a dictionary look-up (grading 10,000 answers).

    A variant whose value cannot be had (a :data:`~symattn.errors.VALUE_FAILURES` error:
    uncertifiable, past a cap, arithmetic SymPy cannot do) explains nothing and is skipped:
    it must never cost the figure its verdict.  Anything else is a bug and surfaces."""

    def __init__(self, cells: Sequence[MistakeCell]) -> None:
        self.cells = list(cells)
        self._by: dict[Rounding, dict[Fraction, list[MistakeCell]]] = {}
        self._neg_inf: list[MistakeCell] | None = None

    def __iter__(self) -> Iterator[MistakeCell]:
        return iter(self.cells)

    def matching(self, w: WrittenNumber) -> list[MistakeCell]:
        table = self._by.get(w.rounding)
        if table is None:
            table = self._by[w.rounding] = {}
            for m in self.cells:
                try:
                    value = m.cell.rounded_value(w.rounding)
                except VALUE_FAILURES:     # see the class docstring
                    continue
                if value is not None:
                    table.setdefault(value, []).append(m)
        return table.get(w.value, [])

    def matching_infinity(self, w: WrittenInfinity) -> list[MistakeCell]:
        """The mistakes whose value here is −∞ (only ``-inf`` can match them)."""
        if not w.negative:
            return []
        if self._neg_inf is None:
            self._neg_inf = [m for m in self.cells if _safe_neg_inf(m.cell)]
        return self._neg_inf

    def matching_exact(self, value: sympy.Expr, screen: CertifiedDecimal) -> list[MistakeCell]:
        found = []
        for m in self.cells:
            try:
                if _same(value, screen, m.cell):
                    found.append(m)
            except VALUE_FAILURES:     # see the class docstring
                continue
        return found


def _safe_neg_inf(cell: Cell) -> bool:
    try:
        return cell.neg_inf
    except VALUE_FAILURES:      # a variant that cannot be had explains nothing
        return False


def _as_set(mistakes: Sequence[MistakeCell] | MistakeSet) -> MistakeSet:
    return mistakes if isinstance(mistakes, MistakeSet) else MistakeSet(mistakes)


def _same(value: sympy.Expr, screen: CertifiedDecimal, cell: Cell) -> bool:
    """Exact equality, screened by certified 20-digit roundings (cheap and cached):
    different roundings prove the values differ without SymPy's slow expansion."""
    if cell.rounded(_SCREEN) != screen:
        return False
    return equal(value, cell.exact)


# ------------------------------------------------------------ one entry

def _show(cell: Cell) -> str:
    """The exact value, and 6 certified digits when it is not a short rational."""
    if cell.neg_inf:
        return "−∞ (a masked position)"
    exact = cell.exact
    text = cell.hand
    if len(text) > 120:
        text = text[:117] + "..."
    if exact.is_Rational and len(text) < 20:
        return text
    return f"{text} ≈ {cell.rounded(_SHOW)}"


def _quote(text: str, limit: int = 60) -> str:
    """The written text in a message: one line, shortened (a 450-digit numeral or a
    64-fold root is named, not repeated)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[:limit - 12]}… ({len(flat):,} characters)"


def _precision(w: WrittenNumber) -> str:
    return str(w.rounding) + (" (as a percentage)" if w.percent else "")


def _is_tie(cell: Cell, w: WrittenNumber) -> bool:
    x = cell.exact
    if not x.is_Rational:
        return False
    return abs(w.value - Fraction(int(x.p), int(x.q))) * 2 == w.unit


def judge_entry(written: Entry, cell: Cell, mistakes: Sequence[MistakeCell] | MistakeSet, *,
                quiet: bool = False) -> EntryVerdict:
    """Judge one written entry against its exact cell; list the mistakes that give it.

    ``quiet``: the same verdict without the exact value in its message (printing an exact
    softmax weight is most of the cost of judging a number), for callers that read only
    the codes and the mistakes (choosing worksheet versions)."""
    found = _as_set(mistakes)
    if isinstance(written, WrittenInfinity):
        verdict = _judge_infinity(written, cell, found)
    elif isinstance(written, WrittenExact):
        verdict = _judge_exact(written, cell, found)
    else:
        verdict = _judge_number(written, cell, found, quiet)
        verdict.rounding = written.rounding
    verdict.cell = None if quiet else cell
    return verdict


def _masked_base(w: Entry, cell: Cell) -> dict[str, Any]:
    return dict(label=cell.label, written=w.text, exact="-oo", expected="-inf",
                shown=_show(cell))


def _judge_infinity(w: WrittenInfinity, cell: Cell, mistakes: MistakeSet) -> EntryVerdict:
    matches, t = mistakes.matching_infinity(w), _quote(w.text)
    if cell.neg_inf:
        base = _masked_base(w, cell)
        if w.negative:
            return EntryVerdict(code=Verdict.EXACT, matches=matches, **base, message=f"{t} is exactly "
                                f"{cell.label}: the position is masked, so its score is −∞")
        return EntryVerdict(code=Verdict.WRONG, matches=matches, **base, message=f"{t} is not "
                            f"{cell.label}: a masked score is −∞ (write -inf), not +∞")
    shown = _show(cell)
    return EntryVerdict(code=Verdict.WRONG, matches=matches, label=cell.label, written=w.text,
                        exact=cell.text, shown=shown,
                        message=f"{t} is not {cell.label}: only a masked score is −∞; "
                                f"the right value is {shown}")


def _masked_message(t: str, cell: Cell) -> str:
    return f"{t} is not {cell.label}: the position is masked, so it is −∞ (write -inf)"


def _judge_exact(w: WrittenExact, cell: Cell, mistakes: MistakeSet) -> EntryVerdict:
    screen = certify(w.value, _SCREEN)
    matches, t = mistakes.matching_exact(w.value, screen), _quote(w.text)
    if cell.neg_inf:
        return EntryVerdict(code=Verdict.WRONG, matches=matches, **_masked_base(w, cell),
                            message=_masked_message(t, cell))
    shown = _show(cell)
    base: dict[str, Any] = dict(label=cell.label, written=w.text, exact=cell.text, expected=None,
                                shown=shown, matches=matches)
    if _same(w.value, screen, cell):
        return EntryVerdict(code=Verdict.EXACT, message=f"{t} is exactly {cell.label}", **base)
    return EntryVerdict(code=Verdict.WRONG, message=f"{t} is not {cell.label}; the right value "
                        f"is {shown}", **base)


def _judge_number(w: WrittenNumber, cell: Cell, mistakes: MistakeSet,
                  quiet: bool = False) -> EntryVerdict:
    matches, t = mistakes.matching(w), _quote(w.text)
    r = cell.rounded(w.rounding)
    at = _precision(w)
    if isinstance(r, Masked):
        return EntryVerdict(code=Verdict.WRONG, matches=matches, at=at, **_masked_base(w, cell),
                            message=_masked_message(t, cell))
    value = cell.rounded_value(w.rounding)   # cached: compared per answer
    assert value is not None, "r is a number, so is its value"
    shown = "the right value" if quiet else _show(cell)
    base: dict[str, Any] = dict(label=cell.label, written=w.text, exact="" if quiet else cell.text,
                                expected=r.text, at=at, shown=shown, matches=matches)
    if value == w.value or _is_tie(cell, w):
        if r.exact and value == w.value:
            return EntryVerdict(code=Verdict.EXACT, message=f"{t} is exactly {cell.label}", **base)
        tie = " (an exact tie: either neighbour is right)" if value != w.value else ""
        return EntryVerdict(code=Verdict.ROUNDED, **base, message=f"{t} is {cell.label} = {shown} "
                            f"correctly rounded to {at}{tie}")
    rounds = f"{cell.label} = {shown} rounds to {r.text} at {at}"
    if abs(w.value - value) == w.unit and w.value * value >= 0 and not r.exact:
        # a slip in the last digit is a slip of ROUNDING: only a value with digits beyond the
        # written place can be rounded wrongly.  An exact 4 written 5 (or 0.25 written 0.26)
        # had nothing to round, so it is wrong (see docs/checking.md, "last-digit")
        truncated, finer = _truncation(cell, w, value)
        if truncated:
            assert finer is not None, "a decided truncation comes with the rounding that decided it"
            how = f"{t} is {finer.text} truncated (a truncation: digits cut instead of rounded)"
        elif truncated is False:
            how = f"{t} is one unit off in the last place, not a truncation"
        else:
            how = f"{t} is one unit off in the last place (whether it is cut is undecided)"
        return EntryVerdict(code=Verdict.LAST_DIGIT, truncation=truncated, message=f"{how}: {rounds}",
                            **base)
    if r.exact and not quiet:
        plain = _plain(r)
        also = "" if plain == r.text else f", which is {r.text} at {at}"
        return EntryVerdict(code=Verdict.WRONG, **base, message=f"{t} is not {cell.label}: it is exactly "
                            f"{plain}{also}")
    return EntryVerdict(code=Verdict.WRONG, **base,
                        message=f"{t} is not {cell.label}: {shown} rounds to {r.text} at {at}")


def _plain(r: CertifiedDecimal) -> str:
    """An exact rounding without its padding zeros (2.00 is 2, 0.250 is 0.25)."""
    text = r.text
    if "." in text and "e" not in text.lower():
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _finer(rounding: Rounding, extra: int) -> Rounding:
    if rounding.places is not None:
        return Rounding(places=rounding.places + extra)
    assert rounding.digits is not None, "a Rounding has exactly one of digits and places"
    return Rounding(digits=rounding.digits + extra)


def _truncation(cell: Cell, w: WrittenNumber,
                value: Fraction) -> tuple[bool | None, CertifiedDecimal | None]:
    """Is the written figure the exact value CUT (not rounded) at the written precision?

    The figure is one unit from the certified rounding r.  It is the truncation
    exactly when it is one unit nearer zero than r and |x| < |r| (the rounding
    carried).  That is decided with certified roundings at more digits: r is
    representable there, so a finer rounding below |r| proves |x| < |r|, one
    above proves |x| > |r|, an exact one equal to r proves x = r.  Returns the
    verdict (None when undecided within 64 more digits) and the finer rounding
    that decided it, which the message shows (``6.31 is 6.3194 truncated``).
    """
    if abs(w.value) >= abs(value) or w.value * value < 0:
        return False, None                 # farther from zero than r: rounded the wrong way
    for extra in _FINER:
        finer = cell.rounded(_finer(w.rounding, extra))
        assert not isinstance(finer, Masked), "the cell rounded to a number at the written precision"
        f = finer.as_fraction()
        if abs(f) != abs(value):
            return abs(f) < abs(value), finer
        if finer.exact:
            return False, finer            # x is exactly r: w is neither its rounding nor its cut
    return None, None


def _describe(m: MistakeCell) -> str:
    return f"the mistake {m.name}"


def name_mistake(e: EntryVerdict, m: MistakeCell, also: list[str]) -> None:
    """Turn a wrong entry into the named mistake ``m`` (it reproduces the whole figure)."""
    e.code, e.mistake, e.mistake_detail, e.also = Verdict.MISTAKE, m.code, m.detail or None, also
    t = _quote(e.written)
    if e.at is None:
        e.message = f"{t} is exactly what {_describe(m)} gives; the right value is {e.shown}"
    elif e.expected == "-inf":
        e.message = f"{t} is what {_describe(m)} gives at {e.at}; the right value is {e.shown}"
    else:
        e.message = (f"{t} is what {_describe(m)} gives at {e.at}; {e.label} = {e.shown} "
                     f"rounds to {e.expected}")
