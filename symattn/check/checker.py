"""Check written figures against one problem: targets, entries, one verdict per figure.

A :class:`Checker` holds one problem's trace and its named mistakes, and
caches every resolved target and every certified rounding, so checking
10,000 answers against one problem costs parsing plus dictionary look-ups.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from symattn.check.diagnosis import settled_by_entries, summarise
from symattn.check.figures import Written, WrittenNumber, read_figure
from symattn.check.mistakes.catalog import Mistakes
from symattn.check.targets import Cell, Source, TargetSpec, parse_target, resolve
from symattn.check.verdict import FigureVerdict, MistakeCell, MistakeSet, invalid, judge_entry
from symattn.check.codes import MistakeCode, Verdict
from symattn.errors import VALUE_FAILURES, SymattnError
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace, attend

__all__ = ["Checker", "FigureVerdict", "invalid"]

_MEMO_SIZE = 100_000   # distinct (target, answer) verdicts kept per problem


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
        self._kept: Source | None = None       # the sink-as-a-key trace (sink-kept), built once

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

    def mistake_cells(self, target: str, places: int | None) -> list[list[MistakeCell]]:
        """For each cell of ``target``, the named mistakes' cells there (built once per
        target and places: an export asks for each of a question's entries in turn)."""
        return [s.cells for s in self._mistakes(self.target(target), places)]

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

    def named_mistake(self, target: str, text: str) -> str | None:
        """The mistake ``check`` names for ``text`` as ``target`` (None: right, a slip, wrong
        or invalid): the verdict's own decision, made without printing exact values into its
        messages (choosing worksheet versions asks this for every candidate's mistakes)."""
        try:
            return self._judge(target, text, None, quiet=True).mistake
        except VALUE_FAILURES:     # check calls the figure invalid: it names no mistake
            return None

    def right_or_slip(self, target: str, text: str) -> bool:
        """Is ``text`` right, or one slip in a last digit, as ``target``?  Then ``check`` names
        no mistake for it (but early rounding to the places written, the slip's cause), and that
        is decided from its entries alone, without computing any mistake (a quick way to turn a
        worksheet candidate down)."""
        try:
            resolved = self.target(target)
            written = read_figure(text, where=f"the figure for {target}",
                                  expect=(resolved.shape, target))
            entries = [judge_entry(w, cell, (), quiet=True)
                       for w, cell in _align(written, resolved, target)]
        except VALUE_FAILURES:     # undecided here: the full check judges it
            return False
        return settled_by_entries(entries)

    def _check(self, target: str, text: str, variant: str | None) -> FigureVerdict:
        """One figure, in isolation: whatever goes wrong is this figure's ``invalid``."""
        shown = text if isinstance(text, str) else repr(text)
        try:
            return self._judge(target, text, variant)
        except SymattnError as exc:
            return invalid(target, shown, str(exc), variant)
        except RecursionError:
            return invalid(target, shown, "the figure or target nests too deeply to judge; "
                           "write it more simply", variant)
        except Exception as exc:   # noqa: BLE001 - the last resort, kept on purpose: one figure
            # never stops the rest of a class, and the bug is not hidden: the verdict is
            # ``invalid`` with the error's type and message and "please report it"
            detail = " ".join(str(exc).split())[:200]
            return invalid(target, shown, f"internal error: {type(exc).__name__}: {detail} "
                           "(please report it; the other figures are judged)", variant)

    def _judge(self, target: str, text: str, variant: str | None, *,
               quiet: bool = False) -> FigureVerdict:
        resolved = self.target(target)
        try:
            written = read_figure(text, where=f"the figure for {target}",
                                  expect=(resolved.shape, target))
        except SymattnError:
            if self.trace.problem.sink is None:
                raise
            kept = self._sink_kept(target, text, variant,
                                   read_figure(text, where=f"the figure for {target}"), resolved)
            if kept is None:
                raise
            return kept
        cells = _align(written, resolved, target)
        entries = []
        for k, (w, cell) in enumerate(cells):
            places = w.rounding.places if isinstance(w, WrittenNumber) else None
            entries.append(judge_entry(w, cell, self._mistakes(resolved, places)[k], quiet=quiet))
        return summarise(target, text, variant, resolved.shape, entries)


    def _sink_kept(self, target: str, text: str, variant: str | None, written: Written,
                   resolved: _Target) -> FigureVerdict | None:
        """A weights figure with one entry too many per row on a sink problem: if it is the
        softmax over the keys and the sink with the sink's weight left in the row, say so
        (mistake ``sink-kept``); else None, and the shape error stands."""
        rows, cols = resolved.shape
        if self.trace.problem.sink is None or resolved.spec.steps() != {"weights"} or \
                written.labels is not None or written.shape[1] != cols + 1 or \
                written.shape[0] != rows or (resolved.spec.step_ref or ("", None))[0] != "weights":
            return None
        if self._kept is None:
            from symattn.check.mistakes.logits import sink_kept_trace

            try:
                self._kept = Source(sink_kept_trace(self.trace))
            except SymattnError:
                return None      # the sink-as-a-key problem is over a cap: the shape error stands
        try:
            shape, cells = resolve(resolved.spec, self._kept)
        except SymattnError:
            return None          # a target naming single keys: the sink's column is not in it
        if shape != written.shape:
            return None
        entries = []
        for w, cell in zip(written.entries, cells):
            entries.append(judge_entry(w, cell, MistakeSet([])))
        if not all(e.right for e in entries):
            return None
        detail = "the sink's weight left in the row"
        for e in entries:
            e.mistake, e.mistake_detail = MistakeCode.SINK_KEPT, detail
        return FigureVerdict(
            target=target, text=text, code=Verdict.MISTAKE, variant=variant, mistake=MistakeCode.SINK_KEPT,
            mistake_detail=detail, entries=entries, shape=shape,
            message=f"the figure has {cols + 1} weights per row where {target} has {cols}: the last "
                    "is the sink's weight, left in the row (mistake sink-kept); the first "
                    f"{cols} are right: drop the sink's column after the softmax (its weight is "
                    "what the keys' weights lack of 1)")


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
        named = [c for c in columns if c is not None]
        if len(named) != len(columns) or sorted(written.labels) != sorted(named):
            raise SymattnError(f"the labels {', '.join(written.labels)} are not the columns of "
                               f"{name} ({', '.join(str(c) for c in columns)})")
        by_label = dict(zip(written.labels, flat))
        return [(by_label[column], c) for column, c in zip(named, target.cells)]
    return list(zip(flat, target.cells))
