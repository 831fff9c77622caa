"""Correctly rounded gradients of float attention: dQ, dK, dV (and the LSE) in a float format.

The float inputs Q, K, V and dO are read by their exact binary values (``mode="binary"``,
the default) or their shortest decimal text, the exact backward pass is taken by the one
engine (``symattn.trace.backward``), and each gradient entry is rounded to the format
(round to nearest, ties to even) from an arb ball whose two ends round alike, the precision
doubling until they do; an entry no ball decides is rounded from its exact value when that
is rational (an exact 0, a tied row's gradient).  So every entry is *the* correctly rounded
value, proved: a kernel's gradient can be judged in ULPs against it.

Masks follow SDPA (``attn_mask`` True = attend; ``is_causal`` top-left, as PyTorch).  Inputs
are 2-D (L × E) or batched (…, L, E) with the same leading shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.errors import SymattnError
from symattn.floatref import attend_mask, exact_values
from symattn.floatref.binary import BINARY_FORMATS, BinaryFormat, round_ball, round_fraction
from symattn.floatref.errors import FloatRefError
from symattn.numbers.precision import precision
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

#: the most (batch × heads) slices one call works: each is an exact trace of its own
MAX_BACKWARD_SLICES = 256
_PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class BackwardReference:
    """The correctly rounded gradients (numpy arrays of ``dtype``'s values, in float64 storage
    for the formats numpy lacks) and the natural log-sum-exp of each query row."""

    dQ: Any
    dK: Any
    dV: Any
    lse: Any
    dtype: str
    traces: tuple[Trace, ...]


def _numpy():
    import numpy

    return numpy


def correctly_rounded_backward(Q: Any, K: Any, V: Any, dO: Any, *, dtype: str = "float32",
                               is_causal: bool = False, attn_mask: Any = None, scale: Any = None,
                               mode: str = "binary") -> BackwardReference:
    """dQ, dK, dV of ``softmax(scale·Q·Kᵀ)·V`` against ``dO``, each entry correctly rounded to ``dtype``."""
    np = _numpy()
    fmt = BINARY_FORMATS.get(dtype)
    if fmt is None:
        raise FloatRefError(f"dtype is {dtype!r}: use one of {', '.join(BINARY_FORMATS)}")
    arrays = {name: np.asarray(_plain(value)) for name, value in (("Q", Q), ("K", K), ("V", V), ("dO", dO))}
    lead = arrays["Q"].shape[:-2]
    for name, array in arrays.items():
        if array.ndim < 2 or array.shape[:-2] != lead:
            raise FloatRefError(f"{name} has shape {array.shape}: give (…, L, E) arrays with the same "
                                f"leading shape as Q {arrays['Q'].shape}")
    slices = list(np.ndindex(*lead)) if lead else [()]
    if len(slices) > MAX_BACKWARD_SLICES:
        raise FloatRefError(f"{len(slices):,} (batch × heads) slices is over the cap of {MAX_BACKWARD_SLICES} "
                            "(MAX_BACKWARD_SLICES): check fewer heads at a time")
    if is_causal and attn_mask is not None:
        raise FloatRefError("give is_causal=True or attn_mask, not both")
    mask: object = "causal" if is_causal else None if attn_mask is None else attend_mask(attn_mask)
    if isinstance(scale, float):
        scale = Fraction(scale)
    out: dict[str, Any] = {}
    traces = []
    for idx in slices:
        inputs = {k: exact_values(arrays[k][idx], mode, name=k) for k in ("Q", "K", "V", "dO")}
        try:
            problem = Problem(Q=inputs["Q"], K=inputs["K"], V=inputs["V"], scale=scale, mask=mask,
                              backward={"grad_output": inputs["dO"]})
        except SymattnError as exc:
            raise FloatRefError(f"slice {idx}: {exc}" if idx else str(exc)) from None
        trace = Trace(problem)
        traces.append(trace)
        for name, step in (("dQ", "d_Q"), ("dK", "d_K"), ("dV", "d_V"), ("lse", "lse")):
            rounded = rounded_step(trace, step, fmt)
            if name not in out:
                out[name] = np.empty(lead + rounded.shape)
            out[name][idx] = rounded
    out["lse"] = out["lse"][..., 0]
    return BackwardReference(out["dQ"], out["dK"], out["dV"], out["lse"], fmt.name, tuple(traces))


def _plain(value: Any) -> Any:
    """A torch tensor as a numpy array (duck-typed: torch is never imported here)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        return tensor.numpy()
    return value


def rounded_step(trace: Trace, name: str, fmt: BinaryFormat) -> Any:
    """Every entry of a step rounded to ``fmt``, proved: balls whose ends round alike, else the
    exact rational entry."""
    np = _numpy()
    step = trace.step(name)
    rows, cols = step.shape
    out = np.empty((rows, cols))
    for i in range(rows):
        pending = list(range(cols))
        for prec in _PRECISIONS:
            balls = trace.enclosure(name, i, prec)
            left = []
            with precision(prec):     # the ball's ends are taken at its own precision
                for j in pending:
                    y = round_ball(balls[j], fmt)
                    if y is None:
                        left.append(j)
                    else:
                        out[i, j] = y
            pending = left
            if not pending:
                break
        for j in pending:
            exact = step[i, j]
            if not exact.is_Rational:
                raise FloatRefError(f"{name}[{i}, {j}] sits on a {fmt.name} rounding boundary as far as "
                                    f"{_PRECISIONS[-1]} bits show, and is not a rational number: it cannot "
                                    "be rounded here")
            out[i, j] = round_fraction(Fraction(int(exact.p), int(exact.q)), fmt)
    return out
