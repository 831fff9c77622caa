"""Certified numbers for steps a variant adds to the Trace (online softmax, KV-cache decoding).

A variant step is defined by its exact entries, SymPy expressions built from the
trace's own exact entries (scaled scores, V).  The engine certifies its decimals
with the same precision loop as every other step (``symattn.trace.stepcert``); what it
needs from a step is the rationals known without a ball and arb enclosures of a
row.  :class:`ExactNumbers` gives both from the exact entries: a rational entry is
rounded exactly (e^0 = 1, a tied running sum 2), −∞ stays −∞, and every other
entry is enclosed by walking its expression in arb (``certify.to_arb``).  An entry
that is exactly on a rounding boundary without being a SymPy rational is settled
by the precision loop from the exact entry (``certify``), as for the inputs.
"""

from __future__ import annotations

from typing import Callable

import flint
import sympy

from symattn.numbers.certify import to_arb
from symattn.numbers.masked import NEG_INF
from symattn.numbers.precision import precision


class ExactNumbers:
    """Known rationals and arb balls of one variant step, row by row, from its exact entries."""

    def __init__(self, entry: Callable[[int, int], sympy.Expr], cols: int,
                 symbols: frozenset = frozenset()) -> None:
        self.entry, self.cols, self._symbols = entry, cols, symbols

    def symbols(self) -> frozenset:
        """The symbols the step depends on (empty for a numeric problem)."""
        return self._symbols

    def known_row(self, i: int) -> list:
        row: list = []
        for j in range(self.cols):
            value = self.entry(i, j)
            if value == sympy.S.NegativeInfinity:
                row.append(NEG_INF)
            elif value.is_Rational:
                row.append(flint.fmpq(int(value.p), int(value.q)))
            else:
                row.append(None)
        return row

    def balls(self, i: int, prec: int) -> list:
        with precision(prec):
            return [NEG_INF if (v := self.entry(i, j)) == sympy.S.NegativeInfinity else to_arb(v, prec)
                    for j in range(self.cols)]
