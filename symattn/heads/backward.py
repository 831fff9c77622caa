"""The backward pass of multi-head attention: through W_o, then each head by the one engine.

With Y = [O_0 | O_1 | …]·W_o and dY = dL/dY given (``backward = { grad_output = [[...]] }``,
n × d_out) or ``loss = "sum"`` (dY all ones): d_W_o = concatᵀ·dY, and the gradient of the
concatenation dY·W_oᵀ, split by the heads' columns, is each head's own ``grad_output``, so
every head's backward steps are the single-head ones (symattn.trace.backward).  The gradients
of what heads share are sums over them: d_X over every head; a key/value head's d_W_k and
d_W_v over the query heads that read it (GQA, MQA).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeAlias

import sympy

from symattn.errors import ProblemError
from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.problem.matrix import exact_matrix

#: symattn.heads.heads.MultiHeadResult (which imports this module)
MultiHeadResult: TypeAlias = Any

Matrix: TypeAlias = sympy.ImmutableMatrix


def output_gradient(value: object, *, n: int, d_out: int, symbols: bool | Collection[str] = False) -> Matrix:
    """dY of a multi-head file's ``backward`` key, checked against Y's shape n × d_out."""
    if not isinstance(value, Mapping):
        raise ProblemError(f'backward is {value!r}: for a multi-head file write backward = {{ grad_output = '
                           '[[...]] }} (dL/dY, n × d_out) or backward = { loss = "sum" }')
    if "grad_output" in value and len(value) == 1:
        dY = exact_matrix("backward grad_output", value["grad_output"], symbols=symbols)
        if (dY.rows, dY.cols) != (n, d_out):
            raise ProblemError(f"backward grad_output is {dY.rows}×{dY.cols} but the multi-head output "
                               f"is {n}×{d_out} (n × d_out): give dL/dY, one row per query")
        return dY.to_sympy()
    if dict(value) == {"loss": "sum"}:
        return sympy.ImmutableMatrix(n, d_out, [1] * (n * d_out))
    raise ProblemError('backward in a multi-head file takes grad_output = [[...]] (dL/dY) or loss = "sum": '
                       "the heads' own output gradients come from it through W_o")


def head_grad_outputs(dY: Matrix, W_o: Matrix | None, d_v: list[int]) -> list[Matrix]:
    """dL/d(concat) = dY·W_oᵀ, split by the heads' columns: each head's grad_output."""
    d_concat = dY if W_o is None else sympy.ImmutableMatrix(dY * W_o.T)
    out, start = [], 0
    for width in d_v:
        out.append(sympy.ImmutableMatrix(d_concat[:, start:start + width]))
        start += width
    return out


class HeadGradients:
    """The gradients a multi-head result adds: d_W_o and the sums over heads, exact and certified."""

    def __init__(self, result: MultiHeadResult, dY: Matrix) -> None:
        self.result, self.dY = result, dY
        self.problem = result.problem

    def d_W_o(self) -> Matrix | None:
        """concatᵀ·dY (None without W_o)."""
        if self.problem.W_o is None:
            return None
        return sympy.ImmutableMatrix(self.result.concat.T * self.dY)

    def _summed(self, step: str, heads: list[int]) -> Matrix:
        steps = [self.result.traces[h].step(step) for h in heads]
        rows, cols = steps[0].shape
        return sympy.ImmutableMatrix(rows, cols, lambda i, j: sympy.Add(*[s[int(i), int(j)] for s in steps]))

    def d_X(self) -> Matrix:
        """Σ over the heads of each head's d_X (every head reads X)."""
        if self.problem.direct:
            raise ProblemError("these heads are given as Q, K, V, not projected from X: read each "
                               "head's d_Q (result.head(h).step(\"d_Q\"))")
        return self._summed("d_X", list(range(self.problem.heads)))

    def kv_gradient(self, step: str, group: int) -> Matrix:
        """d_W_k or d_W_v (d_K, d_V with direct heads) of key/value head ``group``: the sum over its
        query heads."""
        return self._summed(step, [h for h, g in enumerate(self.problem.kv_of) if g == group])

    @staticmethod
    def decimals(M: Matrix, rounding: Rounding | int) -> list[list[CertifiedDecimal]]:
        return [[certify(M[i, j], rounding) for j in range(M.cols)] for i in range(M.rows)]
