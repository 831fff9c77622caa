"""What a variant's section builder may use of the derivation's builder.

The derivation (``document.build.trace``) hands each variant's section function (online
softmax, KV-cache decoding, RoPE) its builder; the functions see only this interface, so
the variant modules never import the derivation back."""

from __future__ import annotations

from typing import Any, Protocol

from symattn.document.blocks import Formula, Indices, LabelledMatrix, Math
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace


class SectionBuilder(Protocol):
    """The derivation's builder, as a variant's section sees it."""

    t: Trace
    p: Problem
    softmax_rows: list[int]

    def dec(self, name: str) -> tuple[tuple[Math, ...], ...]:
        """Every cell of a step (none elided), as the derivation's builder gives them."""

    def shown(self, count: int) -> Indices:
        """The indices shown of a run of ``count`` (None marks an elided middle)."""

    def formula(self, name: str, factors: tuple[tuple[int, int], ...] = ()) -> Formula: ...

    def matrix(self, name: str, symbol: Math | None = None, *, row_labels: bool = True,
               col_labels: bool = False, exact: Any = None, decimals: bool = True,
               caption: str | None = None) -> LabelledMatrix: ...
