"""The step-source interface: how a variant adds its steps to the one Trace.

A variant's steps (online softmax's running sums, KV-cache decoding) are built from the steps the
Trace already holds.  The Trace hands a :class:`StepSource` the view below while it is being built
and an ``add`` callback; the source never sees the Trace's class, so trace.py imports the
sources and nothing imports back."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Protocol

import sympy

from symattn.problem.problem import Problem

#: ``add(name, shape, row_labels, col_labels, exact, numbers=None)``: one more step
AddStep = Callable[..., None]


class Entries(Protocol):
    """A step as a source reads it: exact entries by (row, column)."""

    def __getitem__(self, key: tuple[int, int]) -> sympy.Expr: ...

    def fraction(self, i: int, j: int) -> Fraction | None:
        """An entry as a Fraction when the step is rational, else None (a fast exact compare)."""
        ...


class TraceView(Protocol):
    """What a step source may read of the Trace being built."""

    problem: Problem

    def step(self, name: str) -> Entries: ...

    def allowed(self, i: int) -> tuple[int, ...]: ...

    @property
    def logit_step(self) -> str: ...

    def logit(self, i: int, j: int) -> sympy.Expr: ...


class StepSource(Protocol):
    """A variant's steps, added to the Trace in order."""

    def add_steps(self, add: AddStep) -> None: ...
