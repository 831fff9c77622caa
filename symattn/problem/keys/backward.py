"""The ``backward`` key: what the gradient of attention is taken of.

One of three forms, as courses set the exercise::

    backward = { grad_output = [[1, 0, -1], [0, 2, 0], [1, 1, 1]] }   # dL/dO given (CS336 does this)
    backward = { loss = "half-squared-error", target = [[...]] }       # L = ½‖O − T‖², so dO = O − T
    backward = { loss = "sum" }                                        # L = Σ O, so dO is all ones

``grad_output`` and ``target`` are n × d_v, like the output.  Plain values in, a frozen
:class:`Backward` out; the backward steps themselves are ``symattn.trace.backward``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from symattn.errors import ProblemError
from symattn.problem.keys.context import KeyContext
from symattn.problem.matrix import ExactMatrix, exact_matrix


class Loss(enum.StrEnum):
    """What dO = dL/dO comes from."""

    GRAD_OUTPUT = "grad_output"              # dO given; the loss itself is not known
    HALF_SQUARED_ERROR = "half-squared-error"   # L = ½ Σ (O − T)², dO = O − T
    SUM = "sum"                              # L = Σ O, dO = 1


BACKWARD_KEYS = ("grad_output", "loss", "target")
_FORMS = ('backward = { grad_output = [[...]] }, backward = { loss = "half-squared-error", '
          'target = [[...]] } or backward = { loss = "sum" }')


@dataclass(frozen=True)
class Backward:
    """The validated ``backward`` key: the loss, and dO or the target when given."""

    loss: Loss
    grad_output: ExactMatrix | None = None
    target: ExactMatrix | None = None

    @property
    def value(self) -> dict:
        """As ``Problem(backward=...)`` takes it."""
        if self.loss is Loss.GRAD_OUTPUT:
            assert self.grad_output is not None
            return {"grad_output": self.grad_output.to_sympy()}
        if self.loss is Loss.HALF_SQUARED_ERROR:
            assert self.target is not None
            return {"loss": str(self.loss), "target": self.target.to_sympy()}
        return {"loss": str(self.loss)}

    @property
    def has_loss(self) -> bool:
        """Whether L itself is known (not only its gradient dO)."""
        return self.loss is not Loss.GRAD_OUTPUT


def parse_backward(value: object, *, n: int, d_v: int, symbols: bool | Collection[str]) -> Backward:
    """The ``backward`` key checked against the output's shape n × d_v."""
    if isinstance(value, Backward):      # a rebuilt problem: the shapes may have changed
        for name, matrix in (("grad_output", value.grad_output), ("target", value.target)):
            if matrix is not None:
                _output_shaped(f"backward {name}", matrix, n, d_v, symbols)
        return value
    if not isinstance(value, Mapping):
        raise ProblemError(f"backward is {value!r}: write {_FORMS}")
    unknown = [k for k in value if k not in BACKWARD_KEYS]
    if unknown:
        raise ProblemError(f"backward has the unknown key {str(unknown[0])!r}; its keys are "
                           f"{', '.join(BACKWARD_KEYS)}: write {_FORMS}")
    if "grad_output" in value:
        if "loss" in value or "target" in value:
            raise ProblemError("backward: give either grad_output (dL/dO itself) or a loss, not both")
        return Backward(Loss.GRAD_OUTPUT, grad_output=_output_shaped(
            "backward grad_output", value["grad_output"], n, d_v, symbols))
    loss = value.get("loss")
    if loss is None:
        raise ProblemError(f"backward needs grad_output or a loss: write {_FORMS}")
    names = [str(x) for x in Loss if x is not Loss.GRAD_OUTPUT]
    if not isinstance(loss, str) or loss.strip().lower() not in names:
        raise ProblemError(f"backward loss is {loss!r}: the losses are {' and '.join(map(repr, names))} "
                           "(or give grad_output = [[...]] for dL/dO itself)")
    kind = Loss(loss.strip().lower())
    if kind is Loss.SUM:
        if "target" in value:
            raise ProblemError('backward loss "sum" takes no target (L = Σ O): remove target, or use '
                               'loss = "half-squared-error"')
        return Backward(kind)
    if "target" not in value:
        raise ProblemError('backward loss "half-squared-error" needs target = [[...]] (n × d_v, like the '
                           "output): L = ½‖O − T‖²")
    return Backward(kind, target=_output_shaped("backward target", value["target"], n, d_v, symbols))


def _output_shaped(name: str, value: object, n: int, d_v: int,
                   symbols: bool | Collection[str]) -> ExactMatrix:
    matrix = value if isinstance(value, ExactMatrix) else exact_matrix(name, value, symbols=symbols)
    if (matrix.rows, matrix.cols) != (n, d_v):
        raise ProblemError(f"{name} is {matrix.rows}×{matrix.cols} but the output is {n}×{d_v} "
                           f"(n × d_v): give one row per query and {d_v} column{'s' * (d_v != 1)}")
    return matrix


def backward_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """What the gradient is taken of (None: forward only)."""
    return {"backward": None if value is None else parse_backward(value, n=ctx.n, d_v=ctx.d_v,
                                                                  symbols=ctx.symbols)}
