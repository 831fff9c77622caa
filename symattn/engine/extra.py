"""What the engine reads of a step that a variant adds (online softmax, KV-cache decoding).

Those numbers are made one layer up (``symattn.trace.stepnumbers.ExactNumbers``); the engine
knows only this interface, so the import points down."""

from __future__ import annotations

from typing import Protocol


class StepNumbers(Protocol):
    """Known rationals and arb balls of one added step, row by row."""

    def symbols(self) -> frozenset:
        """The symbols the step depends on (empty for a numeric problem)."""
        ...

    def known_row(self, i: int) -> list:
        """Row i: an fmpq where the value is a known rational, NEG_INF where masked, else None."""
        ...

    def balls(self, i: int, prec: int) -> list:
        """Row i as arb balls at ``prec`` bits (NEG_INF where masked)."""
        ...
