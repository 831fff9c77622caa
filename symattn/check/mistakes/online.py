"""Mistakes of online softmax: the trace's own recurrence run with one named change.

``online-no-rescale``  the running sum and output not multiplied by e^(m_old − m_new)
                      when the maximum grows, so keys seen before the growth keep
                      their old, larger exponentials

``early-rounding`` (in the running sums): every
exponential (the new terms and the rescale factors) rounded to k places before it
is added, as a public walkthrough does when it prints 1.51 for
e^(2−3) + e^(1−3) + e^0 = 1.5032….  Both are :meth:`symattn.trace.online.Online.run`
on the trace's exact entries with a documented change (never a second softmax);
their values are exact (rationals for the rounded one) and certified as usual.
"""

from __future__ import annotations

import re

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.numbers.masked import Masked
from symattn.check.targets import Source
from symattn.check.codes import MistakeCode
from symattn.trace.trace import Trace

_RUNNING_OUTPUT = re.compile(r"running_output_(\d+)")


class OnlineMistakeSource(Source):
    """The online steps (and the final weights and output) of a changed recurrence."""

    def __init__(self, trace: Trace, *, rescaled: bool = True, places: int | None = None) -> None:
        super().__init__(trace)
        self.rescaled, self.places = rescaled, places
        tiles = trace.problem.tiles
        assert tiles is not None, "online mistakes are made only for a tiled trace"
        names = {"running_sum", "output", *(f"running_output_{b}" for b in range(len(tiles)))}
        if not rescaled:
            names |= {"weights", "rescale"}
        self.steps = frozenset(names)

    def _value(self, name: str, i: int, j: int) -> sympy.Expr:
        online = self.trace.online
        sums, outs, coeffs = online.run(i, rescaled=self.rescaled, places=self.places)
        if name == "running_sum":
            return sums[j]
        if name == "rescale":
            return sympy.S.One
        found = _RUNNING_OUTPUT.fullmatch(name)
        if found:
            return outs[int(found.group(1))][j]
        if name == "weights":
            return coeffs.get(j, sympy.S.Zero) / sums[-1]
        if name == "output":
            return outs[-1][j] / sums[-1]
        raise KeyError(name)

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        if name not in self.steps:
            return super().exact(name, i, j)
        a, b = self.where(name, i, j)
        return self._value(name, a, b)

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name not in self.steps:
            return super().decimal(name, i, j, rounding)
        return certify(self.exact(name, i, j), rounding)


def online_mistakes(trace: Trace, places: list[int]) -> list[tuple[str, str, frozenset[str], Source]]:
    """(code, detail, steps, source) of each online mistake of a tiled trace (none without tiles)."""
    if trace.problem.tiles is None:
        return []
    out: list[tuple[str, str, frozenset[str], Source]] = []
    plain = OnlineMistakeSource(trace, rescaled=False)
    out.append((MistakeCode.ONLINE_NO_RESCALE, "running sum and output not rescaled by e^(m_old − m_new) "
                "when the maximum grows", plain.steps, plain))
    for k in places:
        rounded = OnlineMistakeSource(trace, places=k)
        out.append((MistakeCode.EARLY_ROUNDING, f"exponentials of the running sums rounded to {k} "
                    f"place{'s' if k != 1 else ''} first", rounded.steps, rounded))
    return out
