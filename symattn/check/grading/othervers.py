"""An answer that is another version's key: the student had (or copied) another sheet.

Why a screen before the full check: a wrong answer in a class of 30 versions
would otherwise be judged 29 more times, mistakes and all (about 1 ms each).
The written figure is read once; each other version's cells are compared
with it through their cached certified roundings, and only a version whose
every entry is within one unit of the last written place is judged in full
(so a value exactly halfway, which the full check accepts either way, is
never missed).

Why a memo: in a class, the same wrong answer is written by many students of a version
(a common mistake, or a neighbour's sheet copied), and what it is depends only on the
student's version, the target and the text.  :class:`OtherVersions` keeps, per
(version, target, text), which other version it is right for (or none), so each distinct
wrong answer is compared with the other versions' keys once (up to :data:`MEMO_SIZE` of them;
``MEMO_SIZE = 0`` compares every answer afresh, with the same verdicts).
"""

from __future__ import annotations

from typing import Callable

from symattn.check.checker import Checker, FigureVerdict
from symattn.check.figures import Written, WrittenExact, WrittenInfinity, WrittenNumber, read_figure
from symattn.numbers.compare import equal
from symattn.errors import SymattnError

__all__ = ["MEMO_SIZE", "OtherVersions", "mark_other_version"]

MEMO_SIZE = 200_000    # distinct (version, target, wrong answer) comparisons kept per class
_NONE = ""             # the memo's "right for no other version"


def _close(written: Written, checker: Checker, target: str) -> bool:
    """Could ``written`` be right for this checker's target (every entry within one unit)?"""
    try:
        resolved = checker.target(target)
    except SymattnError:
        return False
    cells = resolved.cells
    entries = written.entries
    if len(entries) != len(cells):
        return False
    if written.labels is not None:
        return True                      # labelled columns: let the full check align them
    for w, cell in zip(entries, cells):
        if isinstance(w, WrittenNumber):
            value = cell.rounded_value(w.rounding)
            if value is None or abs(value - w.value) > w.unit:
                return False
        elif isinstance(w, WrittenInfinity):
            if not (w.negative and cell.neg_inf):
                return False
        elif isinstance(w, WrittenExact):
            if cell.neg_inf or not equal(w.value, cell.exact):
                return False
    return True


def other_version(checker_of: Callable[[str], Checker], ids: list[str], own: str,
                  target: str, text: str) -> str | None:
    """The first other version (in ``ids`` order) whose key ``text`` is right for, if any."""
    try:
        written = read_figure(text)
    except SymattnError:
        return None
    for vid in ids:
        if vid == own:
            continue
        try:
            other = checker_of(vid)
        except SymattnError:
            continue
        if not _close(written, other, target):
            continue
        if other.check(target, text).right:
            return vid
    return None


def _mark(verdict: FigureVerdict, own: str, vid: str) -> None:
    verdict.code, verdict.mistake, verdict.mistake_detail = "mistake", "other-version", vid
    verdict.message = (f"{verdict.text} is right for version {vid}, not for version "
                       f"{own}: check the student's version; {verdict.message}")


def mark_other_version(checker_of: Callable[[str], Checker], ids: list[str], own: str,
                       target: str, verdict: FigureVerdict) -> None:
    """Mark a ``wrong`` answer that is right for another version's key (in place): the
    mistake ``other-version`` with that version's id as its detail."""
    vid = other_version(checker_of, ids, own, target, verdict.text)
    if vid is not None:
        _mark(verdict, own, vid)


class OtherVersions:
    """:func:`mark_other_version` for a whole class: the versions' ids read once, and each
    (version, target, text) compared once (see the module's note on the memo)."""

    def __init__(self, checker_of: Callable[[str], Checker], ids: Callable[[], list[str]]) -> None:
        self.checker_of = checker_of
        self._ids = ids
        self.ids: list[str] | None = None       # read on the first wrong answer
        self.memo: dict[tuple[str, str, str], str] = {}
        self.messages: dict[tuple[str, str, str], str] = {}   # the marked message, shared

    def mark(self, own: str, target: str, verdict: FigureVerdict) -> None:
        key = (own, target, verdict.text)
        hit = self.memo.get(key)
        if hit is None:
            if self.ids is None:
                self.ids = list(self._ids())
            hit = other_version(self.checker_of, self.ids, own, target, verdict.text) or _NONE
            if len(self.memo) < MEMO_SIZE:
                self.memo[key] = hit
        if hit != _NONE:
            message = self.messages.get(key)
            _mark(verdict, own, hit)
            if message == verdict.message:
                verdict.message = message      # one string for every student who wrote it
            elif len(self.messages) < MEMO_SIZE:
                self.messages[key] = verdict.message
