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

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.errors import SymattnError
from symattn.floatref.sdpa import causal_pattern
from symattn.floatref.binary import BINARY_FORMATS, BinaryFormat
from symattn.floatref.errors import FloatRefError
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

#: the most (batch × heads) slices one call works: each is an exact trace of its own
MAX_BACKWARD_SLICES = 256
#: the most (query, key) pairs over all heads the conditional reference (``given=``) evaluates as
#: arb balls: 2^20, about 10 s of CPU (0.15 s at one 128 × 128 head, benchmarks/bench_floatref_backward.py)
MAX_CONDITIONAL_PAIRS = 1 << 20
#: the same cap when the float64 enclosures (floatref/backfast.py) decide first: 2^24 pairs,
#: about 10 float64 (L × S) temporaries per head at a time
MAX_FAST_PAIRS = 1 << 24
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
    #: (…, L) each query row's condition number κ = Σ_j P·(|dP| + |D|) / Σ_j P·|dP − D| (float64
    #: estimates; ∞ where dP − D cancels exactly, 1 where nothing cancels)
    condition: Any = None
    #: {"dQ", "dK", "dV"}: each entry's sum of absolute terms, the scale float errors grow with
    scales: Any = None
    #: True for the gradient *given* a kernel's saved O and lse (``given=``)
    conditional: bool = False
    #: ``balls(name, index, prec)``: an arb ball of the exact entry (None: use ``traces``)
    balls: Any = None
    #: on request (``extras``): dS = P∘(dP − D) (…, L, S), the gradient of the scaled, masked logits
    #: (0 on blocked keys); dP = dO·Vᵀ (…, L, S), every key; D = rowsum(dO∘O) (…, L); None otherwise
    dS: Any = None
    dP: Any = None
    D: Any = None

    def exact_ball(self, name: str, index: tuple, prec: int) -> Any:
        """The arb ball of the exact value of ``name`` ('dQ', 'dK' or 'dV') at ``index``, at
        ``prec`` bits (call inside :func:`symattn.numbers.precision.precision`): what a report
        certifies the exact value from."""
        if self.balls is not None:
            return self.balls(name, tuple(index), prec)
        lead = self.dQ.shape[:-2]
        at = tuple(index[:-2])
        k = 0
        for n, size in zip(at, lead):
            k = k * size + n
        return self.traces[k].enclosure("d_" + name[1], index[-2], prec)[index[-1]]


def _numpy():
    import numpy

    return numpy


def correctly_rounded_backward(Q: Any, K: Any, V: Any, dO: Any, *, dtype: str = "float32",
                               is_causal: bool = False, attn_mask: Any = None, scale: Any = None,
                               mode: str = "binary", causal_align: str = "top_left",
                               enable_gqa: bool = False, mask_value: float | None = None,
                               given: dict[str, Any] | None = None, fast_path: bool = True,
                               extras: Any = ()) -> BackwardReference:
    """dQ, dK, dV of ``softmax(scale·Q·Kᵀ + mask)·V`` against ``dO``, each entry correctly rounded
    to ``dtype`` (float64, float32, float16, bfloat16, float8_e4m3fn or float8_e5m2; inputs of any
    of these, ml_dtypes' arrays or torch tensors).

    ``given={"out": O, "lse": lse}`` (a kernel's own saved output and natural log-sum-exp):
    the exact gradient of FlashAttention's backward recipe on them instead (P = e^(t − lse),
    D = rowsum(dO ∘ O); :mod:`symattn.floatref.conditional`).  ``causal_align``,
    ``enable_gqa`` and ``mask_value`` as :func:`symattn.floatref.correctly_rounded` (dK, dV per kv
    head, summed exactly over its query heads); ``mask_value`` needs ``given`` (the engine's
    exact path has no finite sentinels).
    ``condition`` holds each query row's condition number (the cancellation in dP − D).
    ``fast_path`` (targets narrower than float64): decide most entries by float64 enclosures
    first (:mod:`symattn.floatref.backfast` with ``given=``, :mod:`symattn.floatref.plainref`
    without; the same arrays, bit for bit); False gives every entry an arb ball (``given=``) or
    the engine's exact trace, as before.  ``extras``: any of "dS", "dP", "D" (plain reference
    only), returned correctly rounded in ``dS``, ``dP``, ``D``."""
    fmt = BINARY_FORMATS.get(dtype)
    if fmt is None:
        raise FloatRefError(f"dtype is {dtype!r}: use one of {', '.join(BINARY_FORMATS)}")
    if given is not None:
        if extras:
            raise FloatRefError("extras (dS, dP, D) come with the plain reference: drop given= or extras")
        if mode != "binary":
            raise FloatRefError("given= reads the kernel's arrays by their binary values: drop mode='text'")
        return _conditional(Q, K, V, dO, fmt, given, dict(
            attn_mask=attn_mask, is_causal=is_causal, scale=_float_scale(scale, need=True),
            enable_gqa=enable_gqa, causal_align=causal_align, mask_value=mask_value), fast_path)
    from symattn.floatref import attend_mask     # the package's own reader (no cycle)

    if mask_value is not None:
        raise FloatRefError("mask_value needs given={'out': O, 'lse': lse} (the kernel's saved forward): "
                            "the exact engine has no finite sentinels")
    np = _numpy()
    arrays = {name: np.asarray(_plain(value)) for name, value in (("Q", Q), ("K", K), ("V", V), ("dO", dO))}
    lead = arrays["Q"].shape[:-2]
    group = _gqa_group(arrays, lead) if enable_gqa else 1
    if group > 1:                         # query head h reads kv head h // group (torch's enable_gqa)
        arrays["K"], arrays["V"] = (np.repeat(arrays[n], group, axis=-3) for n in ("K", "V"))
    for name, array in arrays.items():
        if array.ndim < 2 or array.shape[:-2] != lead:
            raise FloatRefError(f"{name} has shape {array.shape}: give (…, L, E) arrays with the same "
                                f"leading shape as Q {arrays['Q'].shape}")
    want = lead + (arrays["Q"].shape[-2], arrays["V"].shape[-1])
    if arrays["dO"].shape != want:
        raise FloatRefError(f"dO has shape {arrays['dO'].shape}: give the output's shape {want} (…, L, Ev)")
    slices = list(np.ndindex(*lead)) if lead else [()]
    if len(slices) > MAX_BACKWARD_SLICES:
        raise FloatRefError(f"{len(slices):,} (batch × heads) slices is over the cap of {MAX_BACKWARD_SLICES} "
                            "(MAX_BACKWARD_SLICES): check fewer heads at a time")
    if is_causal and attn_mask is not None:
        raise FloatRefError("give is_causal=True or attn_mask, not both")
    L, S = arrays["Q"].shape[-2], arrays["K"].shape[-2]
    mask: object = None if attn_mask is None else attend_mask(attn_mask)
    if is_causal:
        mask = "causal" if causal_align == "top_left" and L == S else causal_pattern(L, S, causal_align).astype(int).tolist()
    exact_scale = Fraction(scale) if isinstance(scale, float) else scale
    extras = _extras(extras)

    def make_trace(idx: tuple, rows: list | None = None) -> Trace:
        return _slice_trace(arrays, idx, mode, mask, exact_scale, rows)

    fscale = _float_scale(scale, need=False)
    if fast_path and mode == "binary" and fmt.name != "float64" and (scale is None or fscale is not None):
        return _plain_fast(arrays, K, V, fmt, dict(attn_mask=attn_mask, is_causal=is_causal, scale=fscale,
                                                   enable_gqa=enable_gqa, causal_align=causal_align),
                           group, extras, make_trace)
    traces = {idx: make_trace(idx) for idx in slices}
    out = _rounded_gradients(traces, lead, group, fmt, extras)
    condition, scales = _exact_conditioning(arrays, mode, attn_mask, is_causal, scale, causal_align)
    if group > 1 and scales is not None:
        scales = {**scales, **{k: _group_sum(scales[k], group) for k in ("dK", "dV")}}
    return BackwardReference(out["dQ"], out["dK"], out["dV"], out["lse"], fmt.name, tuple(traces.values()),
                             condition, scales, balls=_trace_balls(traces, group), dS=out.get("dS"),
                             dP=out.get("dP"), D=out.get("D"))


def _plain_fast(arrays: dict, K: Any, V: Any, fmt: BinaryFormat, sdpa: dict, group: int, extras: tuple,
                make_trace: Any) -> BackwardReference:
    """The plain reference by enclosures first (:mod:`symattn.floatref.plainref`)."""
    from symattn.floatref.plainref import plain_backward

    np = _numpy()
    got = plain_backward(arrays["Q"], np.asarray(_plain(K)), np.asarray(_plain(V)), arrays["dO"], fmt, sdpa,
                         group, extras, make_trace)
    return BackwardReference(got["dQ"], got["dK"], got["dV"], got["lse"], fmt.name, (), got["condition"],
                             got["scales"], balls=got["balls"], dS=got.get("dS"), dP=got.get("dP"), D=got.get("D"))


def _extras(extras: Any) -> tuple[str, ...]:
    """The extra outputs asked for, checked: a subset of dS, dP, D."""
    names = (extras,) if isinstance(extras, str) else tuple(extras)
    bad = [n for n in names if n not in ("dS", "dP", "D")]
    if bad:
        raise FloatRefError(f"extras has {bad[0]!r}: ask for any of 'dS' (the logits' gradient P∘(dP − D)), "
                            "'dP' (dO·Vᵀ) and 'D' (rowsum(dO∘O))")
    return tuple(n for n in ("dS", "dP", "D") if n in names)


def _slice_trace(arrays: dict, idx: tuple, mode: str, mask: Any, exact_scale: Any, rows: list | None) -> Trace:
    """The engine's exact backward of one slice (only the query ``rows`` when given)."""
    from symattn.floatref import exact_values

    inputs = {k: exact_values(arrays[k][idx], mode, name=k) for k in ("Q", "K", "V", "dO")}
    L = len(inputs["Q"])
    if rows is not None and len(rows) < L:
        if mask == "causal":
            mask = causal_pattern(L, len(inputs["K"])).astype(int).tolist()
        inputs["Q"], inputs["dO"] = ([inputs[k][i] for i in rows] for k in ("Q", "dO"))
        mask = None if mask is None else [mask[i] for i in rows]
    try:
        problem = Problem(Q=inputs["Q"], K=inputs["K"], V=inputs["V"], scale=exact_scale, mask=mask,
                          backward={"grad_output": inputs["dO"]})
    except SymattnError as exc:
        raise FloatRefError(f"slice {idx}: {exc}" if idx else str(exc)) from None
    return Trace(problem)


def _gqa_group(arrays: dict, lead: tuple) -> int:
    """Query heads per kv head for enable_gqa (K, V: (…, H_kv, S, ·), Q: (…, H_q, L, E))."""
    k = arrays["K"]
    if len(lead) < 1 or k.ndim < 3 or k.shape[:-3] != lead[:-1] or arrays["V"].shape[:-2] != k.shape[:-2] \
            or lead[-1] % k.shape[-3]:
        raise FloatRefError(f"enable_gqa: Q has shape {arrays['Q'].shape}, K {k.shape}, V {arrays['V'].shape}: "
                            "give (…, H_q, L, E) and (…, H_kv, S, ·) with H_kv dividing H_q")
    return lead[-1] // k.shape[-3]


def _group_sum(a: Any, group: int) -> Any:
    """(…, H_q, S, ·) summed over each kv head's query heads: (…, H_q / group, S, ·)."""
    return a.reshape(a.shape[:-3] + (a.shape[-3] // group, group) + a.shape[-2:]).sum(axis=-3)


def _members(idx: tuple, group: int) -> list[tuple]:
    """The query-head slices that read kv slice ``idx``."""
    return [idx[:-1] + (idx[-1] * group + k,) for k in range(group)] if group > 1 else [idx]


def _rounded_gradients(traces: dict, lead: tuple, group: int, fmt: BinaryFormat,
                       extras: tuple = ()) -> dict[str, Any]:
    """dQ, lse (and dS, dP, D) per query head; dK and dV per kv head, summed exactly over its
    query heads."""
    np = _numpy()
    out: dict[str, Any] = {}
    kv_lead = lead[:-1] + (lead[-1] // group,) if group > 1 else lead
    steps = {"dS": "d_logits", "dP": "d_weights", "D": "row_dot"}
    for name, step, shape in (("dQ", "d_Q", lead), ("lse", "lse", lead), ("dK", "d_K", kv_lead),
                              ("dV", "d_V", kv_lead)) + tuple((n, steps[n], lead) for n in extras):
        for idx in (np.ndindex(*shape) if shape else [()]):
            owners = _members(idx, group) if name in ("dK", "dV") else [idx]
            rounded = rounded_sum([traces[h] for h in owners], step, fmt)
            if name not in out:
                out[name] = np.empty(shape + rounded.shape)
            out[name][idx] = rounded
    out["lse"] = out["lse"][..., 0]
    if "D" in out:
        out["D"] = out["D"][..., 0]
    return out


def _trace_balls(traces: dict, group: int):
    def ball(name: str, index: tuple, prec: int) -> Any:
        """The exact entry's ball: dK and dV summed over the kv head's query heads."""
        idx, i, j = tuple(index[:-2]), index[-2], index[-1]
        owners = [idx] if name == "dQ" else _members(idx, group)
        total = 0
        for h in owners:
            total = traces[h].enclosure("d_" + name[1], i, prec)[j] + total
        return total
    return ball


def _float_scale(scale: Any, need: bool) -> float | None:
    """The scale as the float normalise takes (a Fraction only when a float holds it exactly)."""
    if scale is None or isinstance(scale, (int, float)):
        return scale
    if isinstance(scale, Fraction) and Fraction(float(scale)) == scale:
        return float(scale)
    if need:
        raise FloatRefError(f"scale is {scale!r}: with given=, give a float (read by its binary value)")
    return None


def _exact_conditioning(arrays: dict, mode: str, attn_mask: Any, is_causal: bool, scale: Any,
                        causal_align: str) -> tuple[Any, Any]:
    """(condition, scales) from the float64 reference forward (estimates; None when the scale
    or the text-read inputs have no float SDPA problem)."""
    from symattn.floatref.conditional import conditioning
    from symattn.floatref.sdpa import correctly_rounded, normalise

    fscale = _float_scale(scale, need=False)
    if mode != "binary" or (scale is not None and fscale is None):
        return None, None
    np = _numpy()
    sdpa = dict(attn_mask=attn_mask, is_causal=is_causal, scale=fscale, causal_align=causal_align)
    pr = normalise(arrays["Q"], arrays["K"], arrays["V"], **sdpa)
    ref = correctly_rounded(arrays["Q"], arrays["K"], arrays["V"], dtype="float64", **sdpa)
    P = np.nan_to_num(ref.weights.astype(np.float64))
    return conditioning(pr, np.asarray(arrays["dO"], dtype=np.float64), P, ref.output.astype(np.float64))


def _conditional(Q: Any, K: Any, V: Any, dO: Any, fmt: BinaryFormat, given: dict[str, Any],
                 sdpa: dict[str, Any], fast_path: bool = True) -> BackwardReference:
    """The recipe's gradients on a kernel's saved O and lse (symattn.floatref.conditional)."""
    from symattn.floatref.backfast import decide_given
    from symattn.floatref.conditional import conditional_backward, conditioning, probabilities
    from symattn.floatref.lse import log_sum_exp
    from symattn.floatref.sdpa import _array, _np_type, normalise

    np = _numpy()
    if not isinstance(given, dict) or set(given) != {"out", "lse"}:
        keys = sorted(given) if isinstance(given, dict) else type(given).__name__
        raise FloatRefError(f"given has {keys}: give {{'out': O, 'lse': lse}}, the kernel's saved output "
                            "and natural log-sum-exp")
    pr = normalise(Q, K, V, **sdpa)
    kq, kk = _array(Q, "Q").shape, _array(K, "K").shape
    group = kq[-3] // kk[-3] if sdpa["enable_gqa"] else 1
    kv_batch = pr.batch[:-1] + (pr.batch[-1] // group,) if group > 1 else pr.batch
    for name, a in (("K", _array(K, "K")), ("V", _array(V, "V"))):
        if a.shape[:-2] != kv_batch:
            raise FloatRefError(f"{name} has shape {a.shape}: the backward needs K and V with Q's batch "
                                f"shape {pr.batch} (or its heads grouped, enable_gqa), not broadcast")
    if math.prod(pr.batch) > MAX_BACKWARD_SLICES:
        raise FloatRefError(f"{math.prod(pr.batch):,} heads is over the cap of {MAX_BACKWARD_SLICES} "
                            "(MAX_BACKWARD_SLICES): check fewer heads at a time")
    L, Ev = pr.Q.shape[-2], pr.V.shape[-1]
    pairs = math.prod(pr.batch) * L * pr.K.shape[-2]
    if pairs > (MAX_FAST_PAIRS if fast_path and fmt.name != "float64" else MAX_CONDITIONAL_PAIRS):
        raise FloatRefError(f"{pairs:,} (query, key) pairs over all heads is over the cap of "
                            f"{MAX_FAST_PAIRS if fast_path and fmt.name != 'float64' else MAX_CONDITIONAL_PAIRS:,} "
                            "(MAX_FAST_PAIRS with the float64 enclosures, else MAX_CONDITIONAL_PAIRS) for the "
                            "conditional reference: "
                            "check fewer heads or rows at a time")
    arrays = {}
    for name, value, shape in (("dO", dO, pr.batch + (L, Ev)), ("out", given["out"], pr.batch + (L, Ev)),
                               ("lse", given["lse"], pr.batch + (L,))):
        a = _array(value, name if name == "dO" else f"given[{name!r}]").astype(np.float64)
        if a.shape != shape:
            raise FloatRefError(f"{'dO' if name == 'dO' else 'given[' + repr(name) + ']'} has shape {a.shape}: "
                                f"give {shape}")
        arrays[name] = a
    # the forward's LSE alone (no output needed), stored as correctly_rounded(return_lse=True) gives it
    lse_rounded = log_sum_exp(pr, fmt)[0].astype(_np_type(fmt.name)).astype(np.float64)
    live = np.ones(pr.batch + (L,), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed).any(axis=-1)
    for name in ("dO", "out", "lse"):
        rows = np.isfinite(arrays[name]) if name == "lse" else np.isfinite(arrays[name]).all(axis=-1)
        bad = live & ~rows if name != "dO" else ~rows
        if bad.any():
            at = [int(v) for v in np.argwhere(bad)[0]]
            what = "dO" if name == "dO" else f"given[{name!r}]"
            raise FloatRefError(f"{what} holds inf or NaN at row {at}: give finite values on rows that "
                                "attend to some key")
        if name != "dO":
            arrays[name] = np.where(live if name == "lse" else live[..., None], arrays[name], 0.0)
    known, P = None, None
    if fmt.name != "float64" and fast_path:     # float64 gradients: the float64 enclosures never decide
        known, P = decide_given(pr, arrays["dO"], arrays["out"], arrays["lse"], fmt, group, kv_batch)
    dQ, dK, dV, balls = conditional_backward(pr, arrays["dO"], arrays["out"], arrays["lse"], fmt, group, kv_batch,
                                             known, MAX_CONDITIONAL_PAIRS)
    P = probabilities(pr, arrays["lse"]) if P is None else P     # the enclosures' midpoints: the same estimate
    condition, scales = conditioning(pr, arrays["dO"], P, arrays["out"])
    if group > 1:
        shape = kv_batch + (group,)
        scales = {**scales, **{k: scales[k].reshape(shape + scales[k].shape[-2:]).sum(axis=-3)
                               for k in ("dK", "dV")}}
    return BackwardReference(dQ, dK, dV, lse_rounded, fmt.name, (), condition, scales,
                             conditional=True, balls=balls)


def _plain(value: Any) -> Any:
    """A torch tensor as a numpy array (duck-typed: torch is never imported here); bfloat16 and
    fp8 values (torch's or ml_dtypes') widened to float32, which holds each exactly."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            tensor = tensor.float()
        return tensor.numpy()
    if getattr(getattr(value, "dtype", None), "name", None) in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return value.astype("float32")
    return value


def rounded_step(trace: Trace, name: str, fmt: BinaryFormat) -> Any:
    """Every entry of a step rounded to ``fmt``, proved: balls whose ends round alike, else the
    exact rational entry."""
    return rounded_sum([trace], name, fmt)


def rounded_sum(traces: list[Trace], name: str, fmt: BinaryFormat) -> Any:
    """Every entry of the sum of one step over several traces (a GQA kv head's query heads)
    rounded to ``fmt``, proved: summed balls whose ends round alike, else the exact sum when it
    is rational."""
    np = _numpy()
    rows, cols = traces[0].step(name).shape
    from symattn.floatref.plainref import rounded_entries

    got = rounded_entries(traces, name, {i: list(range(cols)) for i in range(rows)}, fmt)
    return np.array([got[i] for i in range(rows)], dtype=float).reshape(rows, cols)
