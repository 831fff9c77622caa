"""Carried-forward slips: a later answer that is right for the student's own earlier one.

Why: a student who slips in the scaled scores and then does every later step
correctly from that slip has made one mistake, not five.  When grading a
class, a later answer that is not right is judged once more against the
student's own earlier answer, through the same engine: the student's
``scores``/``scaled``/``shifted`` rows become a Problem (Q = those rows,
K = the identity, the base scale for scores and 1 otherwise), and ``weights``
given for the output become the student's own product weights·V.  A match
is the mistake ``carried-forward``, with the earlier answer named.  The backward
steps carry the same way (``symattn.check.grading.carry_backward``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import sympy

from symattn.check.checker import FigureVerdict
from symattn.check.codes import MistakeCode, Verdict
from symattn.check.figures import Written, WrittenInfinity, WrittenNumber, read_figure
from symattn.check.grading.carry_backward import BACKWARD_CHAIN, entries_match, follows_backward
from symattn.check.targets import Source, TargetSpec, parse_target, resolve
from symattn.numbers.compare import equal
from symattn.errors import SymattnError
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace, attend
from symattn.vocab import StepName

__all__ = ["carry_forward"]

#: the forward chain a carried-forward answer follows (masked is not carried: its blocked −∞ are not a slip)
CHAIN = tuple(s for s in StepName.span(StepName.SCORES, StepName.OUTPUT) if s is not StepName.MASKED)
_AS_INPUT = (StepName.SCORES, StepName.SCALED, StepName.SHIFTED)      # rows that can stand in for Q·Kᵀ
ORDER = (*CHAIN, *BACKWARD_CHAIN)                # the backward pass after the forward


@lru_cache(maxsize=256)     # a class's columns, parsed once (not once per student row)
def _ref(text: str) -> tuple[TargetSpec, str, tuple] | None:
    try:
        spec = parse_target(text)
    except SymattnError:
        return None
    ref = spec.step_ref
    if ref is None or ref[0] not in ORDER or len(ref[1]) > 1:
        return None
    return spec, ref[0], ref[1]


def _values(written: Written) -> list[list[sympy.Expr]]:
    return [[sympy.Rational(e.value.numerator, e.value.denominator)
             if isinstance(e, WrittenNumber) else e.value for e in row] for row in written.rows]


def _rows(trace: Trace, keys: tuple) -> list[int]:
    step = trace.scores
    return [step.row_index(keys[0])] if keys else list(range(step.shape[0]))


def _from_inputs(trace: Trace, step: str, keys: tuple,
                 values: list[list[sympy.Expr]]) -> Trace | None:
    """The student's own rows as the scores of a problem (None when they cannot be: −∞
    written where the mask allows; where it blocks, −∞ is kept out by the mask itself)."""
    p = trace.problem
    if trace.logit_step != "scaled":
        return None   # the written rows would need the bias or the cap re-applied: not carried
    rows = _rows(trace, keys)
    mask = None if p.mask is None else [[int(p.mask[i, j]) for j in range(p.m)] for i in rows]
    values = [list(row) for row in values]
    for r, row in enumerate(values):
        for j, v in enumerate(row):
            if v is sympy.S.NegativeInfinity or v is sympy.S.Infinity:
                if mask is None or r >= len(mask) or j >= len(mask[r]) or mask[r][j]:
                    return None
                row[j] = sympy.S.Zero
    scale = p.scale if step == "scores" else 1
    return attend(Problem(Q=values, K=sympy.eye(p.m), V=trace.V.matrix, scale=scale, mask=mask,
                          sink=p.sink, tokens=[p.tokens[i] for i in rows], key_tokens=list(p.key_tokens)))


def _matches(written: Written, cells: list) -> bool:
    entries = written.entries
    if len(entries) != len(cells):
        return False
    for w, cell in zip(entries, cells):
        if isinstance(w, WrittenInfinity):
            if not (w.negative and cell.neg_inf):
                return False
        elif isinstance(w, WrittenNumber):
            if cell.rounded_value(w.rounding) != w.value:
                return False
        elif cell.neg_inf or not equal(w.value, cell.exact):
            return False
    return True


def _output_from_weights(trace: Trace, keys: tuple, values: list[list[sympy.Expr]],
                         written: Written) -> bool:
    """Is the written output the student's own weights times V, at the written precision?"""
    if any(v.is_infinite for row in values for v in row):
        return False
    product = sympy.Matrix(values) * trace.V.matrix
    return entries_match(written.entries, list(product))


def carry_forward(trace: Trace, targets: Sequence[str], verdicts: list[FigureVerdict],
                  cache: dict | None = None) -> None:
    """Mark later answers that follow from the student's own wrong earlier answer (in place).

    ``cache`` (one dict per problem) remembers each (earlier answer, later answer) pair's
    outcome, so a class that shares a slip pays for it once."""
    cache = {} if cache is None else cache
    refs = [_ref(t) for t in targets]
    for k, (verdict, ref) in enumerate(zip(verdicts, refs)):
        if ref is None or verdict.right or verdict.code in (Verdict.INVALID, Verdict.BLANK, Verdict.MISTAKE):
            continue
        spec, step, keys = ref
        for u, (earlier, uref) in enumerate(zip(verdicts, refs)):
            if uref is None or u == k or earlier.right or earlier.code in (Verdict.INVALID, Verdict.BLANK):
                continue
            _, ustep, ukeys = uref
            if ORDER.index(ustep) >= ORDER.index(step) or ukeys != keys:
                continue
            key = (spec.text, targets[u], earlier.text, verdict.text)
            if key not in cache:
                try:
                    cache[key] = _follows(trace, spec, step, keys, ustep, earlier.text,
                                          verdict.text, cache)
                except (SymattnError, ArithmeticError, ValueError, RecursionError):
                    cache[key] = False   # not followable: the verdict stands as judged
            if cache[key]:
                verdict.code, verdict.mistake = Verdict.MISTAKE, MistakeCode.CARRIED_FORWARD
                verdict.mistake_detail = f"right for your own {targets[u]} = {earlier.text}"
                verdict.message = (f"{verdict.text} follows correctly from your {targets[u]} "
                                   f"= {earlier.text}, which is not right; {verdict.message}")
                break


def _follows(trace: Trace, spec: TargetSpec, step: str, keys: tuple, ustep: str,
             earlier_text: str, text: str, cache: dict) -> bool:
    written = read_figure(text)
    values = _values(read_figure(earlier_text))
    if ustep in _AS_INPUT:
        row_spec = parse_target(f"{step}[0]") if keys else spec   # the derived trace has one row
        cells_key = ("cells", ustep, keys, earlier_text, row_spec.text)
        if cells_key not in cache:
            source_key = ("source", ustep, keys, earlier_text)
            if source_key not in cache:
                own = _from_inputs(trace, ustep, keys, values)
                cache[source_key] = None if own is None else Source(own)
            cache[cells_key] = (None if cache[source_key] is None
                                else resolve(row_spec, cache[source_key])[1])
        return cache[cells_key] is not None and _matches(written, cache[cells_key])
    if ustep == "weights" and step == "output":
        return _output_from_weights(trace, keys, values, written)
    return follows_backward(trace, step, keys, ustep, values, written)
