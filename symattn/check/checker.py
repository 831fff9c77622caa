"""Check written figures against one problem: targets, entries, one verdict per figure.

A :class:`Checker` holds one problem's trace and its named mistakes, and
caches every resolved target and every certified rounding, so checking
10,000 answers against one problem costs parsing plus dictionary look-ups.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from symattn.check.figures import Written, WrittenNumber, read_figure
from symattn.check.mistakes import Mistakes
from symattn.check.targets import Cell, Source, TargetSpec, parse_target, resolve
from symattn.check.verdict import RIGHT, EntryVerdict, MistakeSet, judge_entry, worst
from symattn.errors import SymattnError
from symattn.problem import Problem
from symattn.trace import Trace, attend

__all__ = ["Checker", "FigureVerdict"]

_MEMO_SIZE = 100_000   # distinct (target, answer) verdicts kept per problem


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
    return FigureVerdict(target=target, text=text, code="invalid", message=message, variant=variant)


@dataclass
class _Target:
    spec: TargetSpec
    shape: tuple[int, int]
    cells: list[Cell]


class Checker:
    """Checks figures against one problem; targets and mistakes are computed once."""

    def __init__(self, problem: Problem | Trace) -> None:
        self.trace = problem if isinstance(problem, Trace) else attend(problem)
        self.source = Source(self.trace)
        self.mistakes = Mistakes(self.trace)
        self._targets: dict[str, _Target | SymattnError] = {}
        self._mistake_cells: dict[tuple[str, int | None], list] = {}
        self._memo: dict[tuple, FigureVerdict] = {}

    def target(self, text: str) -> _Target:
        """The resolved target (cached; a bad target raises its error every time)."""
        hit = self._targets.get(text)
        if hit is None:
            try:
                spec = parse_target(text)
                shape, cells = resolve(spec, self.source)
                hit = _Target(spec, shape, cells)
            except SymattnError as exc:
                hit = exc
            self._targets[text] = hit
        if isinstance(hit, SymattnError):
            raise hit
        return hit

    def _mistakes(self, target: _Target, places: int | None) -> list:
        key = (target.spec.text, places)
        if key not in self._mistake_cells:
            self._mistake_cells[key] = [MistakeSet(cells) for cells in
                                        self.mistakes.cells(target.spec, target.shape, places)]
        return self._mistake_cells[key]

    def check(self, target: str, text: str, variant: str | None = None) -> FigureVerdict:
        """Judge the written ``text`` as the value of ``target`` (the same answer twice,
        as in a class where many students agree, is judged once)."""
        key = (target, text, variant)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._check(target, text, variant)
            if len(self._memo) < _MEMO_SIZE and isinstance(text, str) and len(text) < 1000:
                self._memo[key] = hit
        return copy.copy(hit)

    def _check(self, target: str, text: str, variant: str | None) -> FigureVerdict:
        try:
            resolved = self.target(target)
            written = read_figure(text, where=f"the figure for {target}",
                                  expect=(resolved.shape, target))
            cells = _align(written, resolved, target)
        except SymattnError as exc:
            return invalid(target, text if isinstance(text, str) else repr(text), str(exc), variant)
        entries = []
        try:
            for (w, cell), k in zip(cells, range(len(cells))):
                places = w.rounding.places if isinstance(w, WrittenNumber) else None
                entries.append(judge_entry(w, cell, self._mistakes(resolved, places)[k]))
        except SymattnError as exc:
            return invalid(target, text, str(exc), variant)
        return _summarise(target, text, variant, resolved.shape, entries)


def _align(written: Written, target: _Target, name: str) -> list[tuple]:
    """Pair written entries with target cells, or explain the shape mismatch."""
    shape = target.shape
    flat = written.entries
    ok = written.shape == shape or (written.vector and len(flat) == shape[0] * shape[1]
                                    and 1 in shape)
    if not ok:
        r, c = written.shape
        kind = f"a row of {c}" if written.vector else f"shape {r}×{c}"
        raise SymattnError(f"the figure has {kind} but {name} is {shape[0]}×{shape[1]}: "
                           "write one entry per value")
    if written.labels is not None:
        columns = [c.column for c in target.cells]
        if None in columns or sorted(written.labels) != sorted(columns):
            raise SymattnError(f"the labels {', '.join(written.labels)} are not the columns of "
                               f"{name} ({', '.join(str(c) for c in columns)})")
        by_label = dict(zip(written.labels, flat))
        return [(by_label[c.column], c) for c in target.cells]
    return list(zip(flat, target.cells))


def _mistake_names(e: EntryVerdict) -> set[str]:
    names = set(e.also)
    if e.mistake is not None:
        names.add(f"{e.mistake} ({e.mistake_detail})" if e.mistake_detail else e.mistake)
    return names


def _summarise(target: str, text: str, variant: str | None, shape: tuple[int, int],
               entries: list[EntryVerdict]) -> FigureVerdict:
    base = dict(target=target, text=text, variant=variant, entries=entries, shape=shape)
    if len(entries) == 1:
        e = entries[0]
        return FigureVerdict(code=e.code, message=e.message, mistake=e.mistake,
                             mistake_detail=e.mistake_detail, also=e.also, **base)
    common = set.intersection(*[_mistake_names(e) for e in entries])
    ordered = [n for e in entries for n in [*([f"{e.mistake} ({e.mistake_detail})"] if e.mistake else []), *e.also]
               if n in common]
    ordered = list(dict.fromkeys(ordered))
    wrong = [e for e in entries if not e.right]
    if not wrong:
        code = "exact" if all(e.code == "exact" for e in entries) else "rounded"
        shown = [n for n in ordered if not n.startswith("early-rounding")]
        also = f"; indistinguishable here from {', '.join(shown)}" if shown else ""
        values = ", ".join(e.expected or e.written for e in entries[:12])
        more = ", …" if len(entries) > 12 else ""
        return FigureVerdict(code=code, also=ordered, **base,
                             message=f"all {len(entries)} entries are right "
                                     f"({values}{more})" + also)
    if ordered:
        first = ordered[0]
        code, _, detail = first.partition(" (")
        right = ", ".join(e.expected or e.exact or "?" for e in entries[:12])
        return FigureVerdict(code="mistake", mistake=code, mistake_detail=detail[:-1] or None,
                             also=ordered[1:], **base,
                             message=f"every entry is what the mistake {first} gives; "
                                     f"the right values are {right}" + ("" if len(entries) <= 12
                                                                        else ", …"))
    return FigureVerdict(code=worst([e.code for e in entries]), **base,
                         message=f"{len(wrong)} of {len(entries)} entries are not right; "
                                 f"{wrong[0].label}: {wrong[0].message}")
