"""What a key's reader may know: the problem's sizes, the plain values given, and the specs of
the keys read before it (never the half-built Problem)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy

__all__ = ["KeyContext"]


@dataclass
class KeyContext:
    """The sizes of the inputs (n queries, m keys, widths d_k and d_v), which inputs were
    given, the names strings may use as symbols, every key's plain value as given, and the
    specs read so far (``parsed``: Problem attribute → value, filled in the table's order)."""

    n: int
    m: int
    d_k: int
    d_v: int
    inputs: frozenset[str]
    symbols: bool | Sequence[str]
    given: Mapping[str, object]
    #: whether the input matrices hold symbols
    input_symbols: bool = False
    parsed: dict[str, object] = field(default_factory=dict)
    #: the symbols of the specs read so far (the keys whose table row counts its symbols)
    found: set[sympy.Symbol] = field(default_factory=set)

    @property
    def has_symbols(self) -> bool:
        """Whether the inputs or the keys read so far hold symbols (decode and tiles need numbers)."""
        return self.input_symbols or bool(self.found)

    @property
    def same_sequence(self) -> bool:
        """The keys are the queries' own tokens (self-attention of one sequence)."""
        return "X_kv" not in self.inputs and self.m == self.n
