"""An answer that is another version's key: the student had (or copied) another sheet.

Why a screen before the full check: a wrong answer in a class of 30 versions
would otherwise be judged 29 more times, mistakes and all (about 1 ms each).
The written figure is read once; each other version's cells are compared
with it through their cached certified roundings, and only a version whose
every entry is within one unit of the last written place is judged in full
(so a value exactly halfway, which the full check accepts either way, is
never missed).
"""

from __future__ import annotations

from typing import Callable

from symattn.check.checker import Checker, FigureVerdict
from symattn.check.figures import Written, WrittenExact, WrittenInfinity, WrittenNumber, read_figure
from symattn.numbers.compare import equal
from symattn.errors import SymattnError

__all__ = ["mark_other_version"]


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


def mark_other_version(checker_of: Callable[[str], Checker], ids: list[str], own: str,
                       target: str, verdict: FigureVerdict) -> None:
    """Mark a ``wrong`` answer that is right for another version's key (in place): the
    mistake ``other-version`` with that version's id as its detail."""
    try:
        written = read_figure(verdict.text)
    except SymattnError:
        return
    for vid in ids:
        if vid == own:
            continue
        try:
            other = checker_of(vid)
        except SymattnError:
            continue
        if not _close(written, other, target):
            continue
        if other.check(target, verdict.text).right:
            verdict.code, verdict.mistake, verdict.mistake_detail = "mistake", "other-version", vid
            verdict.message = (f"{verdict.text} is right for version {vid}, not for version "
                               f"{own}: check the student's version; {verdict.message}")
            return
