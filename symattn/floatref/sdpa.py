"""Correctly rounded references of torch's scaled_dot_product_attention, proved.

:func:`correctly_rounded` takes SDPA's arguments on numpy arrays (read by
their exact binary values) and returns the weights and the output with
every entry the round-to-nearest-even of the exact value in the target
format.  Most entries are decided by float64 enclosures
(:mod:`symattn.floatref.fast`; double-double ones, :mod:`symattn.floatref.fast64`,
for float64 targets); an entry whose enclosure straddles a rounding
boundary is decided by the arb path (:mod:`symattn.floatref.rows`: arb
balls of rising precision from exact integer scores; exact rationals such
as a tied row's midpoint exactly).  docs/floatref.md has the semantics and
the error analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.floatref.binary import BINARY_FORMATS, BinaryFormat, round_array
from symattn.floatref.errors import FloatRefError

#: float32/16/bf16 and fp8 are decided from float64 enclosures (fast.py), float64 from
#: double-double ones (fast64.py)
FAST_FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is in the test extra
        raise FloatRefError("floatref needs numpy: pip install numpy") from None
    return numpy


@dataclass(frozen=True)
class SDPAReference:
    """The correctly rounded weights (…, L, S) and output (…, L, Ev) of SDPA.

    ``dtype`` is the target format.  bfloat16 values are returned in float32
    arrays (numpy has no bfloat16; every bfloat16 is a float32 exactly).
    A fully masked row (no key may be attended to) has NaN weights and
    output, and is True in ``fully_masked`` (…, L).  Zeros are +0.
    ``arb_entries`` counts the entries that needed the arb path.  With ``return_lse``,
    ``lse`` and ``lse2`` hold each row's log-sum-exp of the scaled logits t_j (mask
    added), base e and base 2, correctly rounded to ``lse_dtype``; −inf on a fully
    masked row (the log of an empty sum; FlashAttention-2 stores +inf there)."""

    output: Any
    weights: Any
    dtype: str
    fully_masked: Any
    arb_entries: int
    entries: int
    lse: Any = None        # (…, L) log Σ_j e^(t_j), base e, in lse_dtype; −inf on a fully masked row
    lse2: Any = None       # (…, L) the same in base 2: lse / ln 2
    lse_dtype: str | None = None


@dataclass(frozen=True)
class Problem4:
    """SDPA's arguments, normalised: float64 arrays broadcast to one batch shape."""

    Q: Any          # (B..., L, E) float64
    K: Any          # (B..., S, E)
    V: Any          # (B..., S, Ev)
    allowed: Any    # (B..., L, S) bool or None
    additive: Any   # (B..., L, S) finite float64 (0 where blocked) or None
    scale: Any      # exact: a Fraction or a SymPy 1/sqrt(E)
    scale_f: float  # float64 of the scale
    scale_err: float
    batch: tuple


def _array(x: Any, name: str):
    np = _numpy()
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        t = x.detach().cpu()
        x = (t.float() if str(t.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2") else t).numpy()
    a = np.asarray(x)
    if a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # ml_dtypes: exact in float32
        a = a.astype(np.float32)
    if a.dtype.kind not in "fiub":
        raise FloatRefError(f"{name} has dtype {a.dtype}: give float or integer arrays")
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:
        raise FloatRefError(f"{name} has dtype {a.dtype} (long double), wider than float64, which "
                            "floatref would round: convert to float32 or float64")
    if a.dtype.kind in "iu" and a.size and (int(a.max()) > 2 ** 53 or int(a.min()) < -2 ** 53):
        raise FloatRefError(f"{name} holds integers beyond 2^53, which float64 cannot hold exactly: "
                            "give smaller values or floats")
    return a


def check_budget(batch: tuple, L: int, S: int, E: int, Ev: int) -> None:
    """Refuse a problem past the float caps (symattn.limits) before anything is allocated.

    Why: tiny inputs whose batch dimensions broadcast, or a long L and S with a small E,
    ask for work and weights far beyond the inputs' own size (32 GiB from a few KiB)."""
    from symattn.limits import MAX_FLOAT_BATCH, MAX_FLOAT_WEIGHTS, MAX_FLOAT_WORK

    heads = math.prod(batch)
    shape = f"batch {tuple(batch)}, L = {L:,}, S = {S:,}, E = {E:,}, Ev = {Ev:,}"
    if heads > MAX_FLOAT_BATCH:
        raise FloatRefError(f"the batch dimensions broadcast to {tuple(batch)}, {heads:,} heads, over the cap "
                            f"of {MAX_FLOAT_BATCH:,} (MAX_FLOAT_BATCH); check a slice of the heads at a time")
    if heads * L * S > MAX_FLOAT_WEIGHTS:
        raise FloatRefError(f"{shape} make {heads * L * S:,} weights, over the cap of {MAX_FLOAT_WEIGHTS:,} "
                            f"(MAX_FLOAT_WEIGHTS); check fewer heads or rows at a time")
    if heads * L * S * (E + Ev) > MAX_FLOAT_WORK:
        raise FloatRefError(f"{shape} need {heads * L * S * (E + Ev):,} multiply-adds, over the cap of "
                            f"{MAX_FLOAT_WORK:,} (MAX_FLOAT_WORK); check fewer heads or rows at a time")


#: where the causal diagonal sits when L ≠ S (the field's two conventions, FIELD-NOTES.md)
CAUSAL_ALIGNS = ("top_left", "bottom_right")


def causal_pattern(L: int, S: int, causal_align: str = "top_left"):
    """The (L, S) boolean causal mask, True = may attend.

    ``top_left`` (PyTorch SDPA's ``is_causal``, FlashAttention < 2.1): query i sees keys j ≤ i.
    ``bottom_right`` (FlashAttention ≥ 2.1, chunked prefill, TransformerEngine's
    ``causal_bottom_right``): the last query sees every key, query i sees j ≤ i + S − L; when
    L > S the first L − S queries see no key (fully masked rows)."""
    np = _numpy()
    if causal_align not in CAUSAL_ALIGNS:
        raise FloatRefError(f"causal_align is {causal_align!r}: use 'top_left' (PyTorch is_causal) "
                            "or 'bottom_right' (FlashAttention ≥ 2.1)")
    return np.tril(np.ones((L, S), dtype=bool), k=0 if causal_align == "top_left" else S - L)


def normalise(Q: Any, K: Any, V: Any, attn_mask: Any = None, is_causal: bool = False,
              scale: float | None = None, enable_gqa: bool = False, *,
              causal_align: str = "top_left", mask_value: float | None = None) -> Problem4:
    """SDPA's argument rules: shapes, broadcasting, GQA, masks and the scale, checked.

    ``mask_value`` (a finite "−inf" sentinel such as −5e4, −1e9 or a format's minimum): every
    blocked key (causal, False in a boolean mask, −inf in an additive one) gets this value
    *added* to its scaled score instead of being removed, as a kernel that masks with a
    finite number computes; a row then has a value even when every key is blocked."""
    np = _numpy()
    if causal_align not in CAUSAL_ALIGNS:
        causal_pattern(1, 1, causal_align)               # the one message
    if mask_value is not None and (isinstance(mask_value, bool) or not isinstance(mask_value, (int, float))
                                   or not math.isfinite(mask_value)):
        raise FloatRefError(f"mask_value is {mask_value!r}: give a finite number such as -5e4 "
                            "(None removes blocked keys, as -inf)")
    q, k, v = _checked_arrays(Q, K, V)
    batch, k, v = _batch(q, k, v, enable_gqa)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    f64 = np.float64
    Qb = np.broadcast_to(np.asarray(q, dtype=f64), batch + q.shape[-2:])   # no copy of a float64 input
    Kb = np.broadcast_to(np.asarray(k, dtype=f64), batch + k.shape[-2:])
    Vb = np.broadcast_to(np.asarray(v, dtype=f64), batch + v.shape[-2:])
    if is_causal and attn_mask is not None:
        raise FloatRefError("give is_causal=True or attn_mask, not both (as torch's SDPA)")
    allowed, additive = _masks(attn_mask, is_causal, causal_align, mask_value, batch + (L, S))
    exact, scale_f, err = _scale(scale, E)
    return Problem4(Qb, Kb, Vb, allowed, additive, exact, scale_f, err, batch)


def _checked_arrays(Q: Any, K: Any, V: Any) -> tuple[Any, Any, Any]:
    """Q, K, V as arrays of finite numbers whose shapes fit (E and S agree, nothing empty)."""
    np = _numpy()
    q, k, v = (_array(x, n) for x, n in ((Q, "Q"), (K, "K"), (V, "V")))
    for a, n in ((q, "Q"), (k, "K"), (v, "V")):
        if a.ndim < 2:
            raise FloatRefError(f"{n} has shape {a.shape}: give (..., L, E), (..., S, E) and (..., S, Ev) arrays")
        if a.size and not np.isfinite(a).all():
            raise FloatRefError(f"{n} holds inf or NaN: give finite numbers")
    if k.shape[-1] != q.shape[-1]:
        raise FloatRefError(f"Q has E = {q.shape[-1]} but K has E = {k.shape[-1]}: give equal last dimensions")
    if k.shape[-2] != v.shape[-2]:
        raise FloatRefError(f"K has S = {k.shape[-2]} rows but V has {v.shape[-2]}: give equal key counts")
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:
        raise FloatRefError(f"an input is empty (Q {q.shape}, K {k.shape}, V {v.shape}): give non-empty arrays")
    return q, k, v


def _batch(q: Any, k: Any, v: Any, enable_gqa: bool) -> tuple[tuple[int, ...], Any, Any]:
    """The broadcast batch shape (within the budget), and K and V with their kv heads
    repeated for grouped-query attention."""
    np = _numpy()
    kb, vb = k.shape[:-2], v.shape[:-2]
    if enable_gqa:
        if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
            raise FloatRefError("enable_gqa needs (..., heads, L, E) arrays")
        hq, hk = q.shape[-3], k.shape[-3]
        if v.shape[-3] != hk or hq % hk:
            raise FloatRefError(f"enable_gqa: Q has {hq} heads, K {hk}, V {v.shape[-3]}: "
                                "K and V need equal head counts that divide Q's")
        kb, vb = kb[:-1] + (hq,), vb[:-1] + (hq,)
    try:
        batch = np.broadcast_shapes(q.shape[:-2], kb, vb)   # shapes only: nothing allocated
    except ValueError:
        raise FloatRefError(f"the batch dimensions of Q {q.shape}, K {k.shape} and V {v.shape} do not "
                            "broadcast (for grouped-query heads pass enable_gqa=True)") from None
    check_budget(batch, q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1])
    if enable_gqa:
        k = np.repeat(k, hq // hk, axis=-3)   # query head h reads kv head h // (hq / hk)
        v = np.repeat(v, hq // hk, axis=-3)
    return batch, k, v


def _masks(attn_mask: Any, is_causal: bool, causal_align: str, mask_value: float | None,
           shape: tuple[int, ...]) -> tuple[Any, Any]:
    """(allowed, additive) over the full (..., L, S) shape: which keys a query may read (None:
    all) and what is added to the scaled scores (None: nothing), a finite ``mask_value``
    turning every blocked key into an added sentinel."""
    np = _numpy()
    allowed = additive = None
    if is_causal:
        allowed = np.broadcast_to(causal_pattern(shape[-2], shape[-1], causal_align), shape)
    elif attn_mask is not None:
        allowed, additive = _given_mask(attn_mask, shape)
    if mask_value is not None and allowed is not None:
        blocked = np.where(allowed, 0.0, float(mask_value))
        additive = blocked if additive is None else np.where(allowed, additive, float(mask_value))
        allowed = None
        if not additive.any():
            additive = None
    return allowed, additive


def _given_mask(attn_mask: Any, full: tuple[int, ...]) -> tuple[Any, Any]:
    """A boolean (True = attend) or additive float mask, checked and broadcast to ``full``."""
    np = _numpy()
    m = _array(attn_mask, "attn_mask")
    try:
        shape = np.broadcast_shapes(m.shape, full)
    except ValueError:
        shape = None
    if shape != full:
        raise FloatRefError(f"attn_mask has shape {m.shape}, which does not broadcast to {full}")
    if m.dtype == bool:
        return np.broadcast_to(m, shape), None
    if m.dtype.kind != "f":
        raise FloatRefError(f"attn_mask has dtype {m.dtype}: give a boolean (True = attend) "
                            "or a float (additive) mask")
    m = m.astype(np.float64)
    if np.isnan(m).any() or np.isposinf(m).any():
        raise FloatRefError("attn_mask holds NaN or +inf: an additive mask takes finite values or -inf")
    allowed = np.broadcast_to(~np.isneginf(m), shape)
    additive = np.broadcast_to(np.where(np.isneginf(m), 0.0, m), shape)
    return allowed, (additive if additive.any() else None)


def _default_scale_error(scale_f: float, E: int) -> float:
    """A float ≥ |s̃ − s|, s = 1/√E, from exact rationals: |s̃² − 1/E| = |s̃ − s|(s̃ + s), and
    s ≥ s̃(1 − 3u) (two correctly rounded operations), so s̃ + s ≥ s̃(2 − 4u).  0 when √E is
    a power of two (E = 64: s̃ = 1/8); at E = 128 0.8u·s̃, where the worst case 3u·s̃ used
    before fed 3u·|t| into every score's error."""
    s = Fraction(scale_f)
    gap = abs(s * s * E - 1) / (E * s * (2 - Fraction(4, 2 ** 53)))
    return math.nextafter(float(gap), math.inf) if gap else 0.0


def _scale(scale: float | None, E: int) -> tuple[Any, float, float]:
    """The scale exactly, as the float used, and the float's error bound."""
    if scale is None:
        import sympy
        exact: Any = 1 / sympy.sqrt(E)
        scale_f = 1.0 / math.sqrt(E)
        return exact, scale_f, _default_scale_error(scale_f, E)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise FloatRefError(f"scale is {scale!r}: give a finite float (read by its binary value)")
    return Fraction(float(scale)), float(scale), 0.0


def correctly_rounded(Q: Any, K: Any, V: Any, *, dtype: str = "float32", attn_mask: Any = None,
                      is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
                      causal_align: str = "top_left", mask_value: float | None = None,
                      fully_masked: str = "nan", return_lse: bool = False,
                      lse_dtype: str | None = None) -> SDPAReference:
    """softmax(scale·Q·Kᵀ + mask)·V and its weights, each entry correctly rounded to ``dtype``.

    Arguments as torch.nn.functional.scaled_dot_product_attention (no dropout);
    inputs by their exact binary values; the default scale is exactly 1/√E.
    ``causal_align``: 'top_left' (torch) or 'bottom_right' (FlashAttention ≥ 2.1) when L ≠ S.
    ``mask_value``: a finite sentinel added where keys are blocked (see :func:`normalise`).
    ``fully_masked``: 'nan' (the math backend; 0/0 has no value) or 'zero' (fused kernels)
    for the weights and output of rows with no key.  ``return_lse``: also the log-sum-exp of
    each row's scaled logits, base e (``lse``, as FlashAttention stores it) and base 2
    (``lse2``), correctly rounded to ``lse_dtype`` (default ``dtype``; FlashAttention keeps
    float32), proved with arb balls (:mod:`symattn.floatref.lse`)."""
    from symattn.floatref.rows import decide_all

    np = _numpy()
    fmt = _format(dtype, "dtype")
    lse_fmt = _format(lse_dtype or dtype, "lse_dtype")
    if fully_masked not in ("nan", "zero"):
        raise FloatRefError(f"fully_masked is {fully_masked!r}: use 'nan' (PyTorch's math backend) "
                            "or 'zero' (fused kernels such as FlashAttention)")
    pr = normalise(Q, K, V, attn_mask, is_causal, scale, enable_gqa, causal_align=causal_align,
                   mask_value=mask_value)
    L, S, Ev = pr.Q.shape[-2], pr.K.shape[-2], pr.V.shape[-1]
    np_type = _np_type(dtype)
    out = np.empty(pr.batch + (L, Ev), dtype=np_type)       # the format's values, held exactly
    weights = np.empty(pr.batch + (L, S), dtype=np_type)
    empty_all = np.zeros(pr.batch + (L,), dtype=bool)
    w_ok_all = np.zeros(pr.batch + (L, S), dtype=bool)
    o_ok_all = np.zeros(pr.batch + (L, Ev), dtype=bool)
    for idx in np.ndindex(*pr.batch):
        allowed = None if pr.allowed is None else pr.allowed[idx]
        additive = None if pr.additive is None else pr.additive[idx]
        views = (weights[idx], w_ok_all[idx], out[idx], o_ok_all[idx], empty_all[idx])
        if fmt.name != "float64":
            got = _fast_slice(pr, idx, allowed, additive, fmt, out=views)
        else:
            got = _fast64_slice(pr, idx, allowed, additive, out=views)
        for view, array in zip(views, got):             # written in place: no (L, S) copies
            if array is not view:
                view[...] = array
        w, w_ok, o, o_ok, empty = views
        w_ok[empty], o_ok[empty] = True, True
        w[empty], o[empty] = np.nan, np.nan
        if fmt.name != "float64":
            _refine64(pr, idx, allowed, additive, fmt, w, w_ok, o, o_ok)
    arb_count = decide_all(pr, weights, w_ok_all, out, o_ok_all, fmt)
    if fully_masked == "zero":
        weights[empty_all], out[empty_all] = 0.0, 0.0
    lse = lse2 = None
    if return_lse:
        from symattn.floatref.lse import log_sum_exp

        lse64, lse2_64 = log_sum_exp(pr, lse_fmt)
        lse, lse2 = lse64.astype(_np_type(lse_fmt.name)), lse2_64.astype(_np_type(lse_fmt.name))
    return SDPAReference(out, weights, dtype, empty_all, arb_count,
                         weights.size + out.size, lse, lse2, lse_fmt.name if return_lse else None)


def _format(name: str, what: str) -> BinaryFormat:
    if name not in BINARY_FORMATS:
        raise FloatRefError(f"{what} is {name!r}: use {', '.join(BINARY_FORMATS)}")
    return BINARY_FORMATS[name]


def _np_type(name: str):
    """The numpy type that holds a format's values exactly (bfloat16 and fp8: float32)."""
    np = _numpy()
    return {"float64": np.float64, "float16": np.float16}.get(name, np.float32)


def _fast_slice(pr, idx: tuple, allowed, additive, fmt: BinaryFormat, out: tuple | None = None):
    """One head by the fast path (heads.fast_head: small blocks of rows, decided in cache):
    (w, w_ok, o, o_ok, empty), w and o in the format's numpy type; written into ``out``
    (views of the result arrays) when given."""
    from symattn.floatref import heads

    np = _numpy()
    Q, K, V = pr.Q[idx], pr.K[idx], pr.V[idx]
    if out is None:
        out = _head_arrays(Q.shape[0], K.shape[0], V.shape[1], _np_type(fmt.name))
    cast = fmt.name == "float32" and ieee_conversions_hold()
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        heads.fast_head(Q, K, V, allowed, additive, pr.scale_f, pr.scale_err, fmt, cast, out)
    return out


def _head_arrays(L: int, S: int, Ev: int, dtype) -> tuple:
    np = _numpy()
    return (np.empty((L, S), dtype=dtype), np.empty((L, S), dtype=bool), np.empty((L, Ev), dtype=dtype),
            np.empty((L, Ev), dtype=bool), np.empty(L, dtype=bool))


def _fast64_slice(pr, idx: tuple, allowed, additive, out: tuple | None = None):
    """One head by the double-double path (float64 targets; heads.fast64_head); blocked
    weights are +0; written into ``out`` when given, as :func:`_fast_slice`."""
    from symattn.floatref import fast64, heads

    np = _numpy()
    Q, K, V = pr.Q[idx], pr.K[idx], pr.V[idx]
    ieee_conversions_hold()
    if out is None:
        out = _head_arrays(Q.shape[0], K.shape[0], V.shape[1], np.float64)
    heads.fast64_head(Q, K, V, allowed, additive, fast64.scale_dd(pr.scale), out)
    return out


def _refine64(pr, idx: tuple, allowed, additive, fmt: BinaryFormat, w, w_ok, o, o_ok) -> None:
    """The rows the float64 enclosures left undecided, again through the double-double ones
    (``fast64``, about 2^-100 where float64 gives 2^-50), in place; the rest go to arb.

    Each double-double enclosure is rounded into ``fmt`` at both ends
    (:func:`heads.decide_dd_into`): a small output from cancellation, whose radius is too
    wide for its float64 rounding, is still decided for float32 and the narrower formats.
    Weights proved to round to +0 in float64 are +0 in ``fmt`` (RN is monotonic and +0 is a
    value of every format)."""
    from symattn.floatref import fast64, heads

    np = _numpy()
    rows = np.nonzero(~w_ok.all(axis=1) | ~o_ok.all(axis=1))[0]
    if rows.size == 0:
        return
    Q, K, V = pr.Q[idx], pr.K[idx], pr.V[idx]
    cast = ieee_conversions_hold() and fmt.name == "float32"
    scale = fast64.scale_dd(pr.scale)
    # only the value columns with an undecided output (often a third of them): the row sums
    # need every weight, an output column only its own products
    cols = np.nonzero(~o_ok[rows].all(axis=0))[0]
    scores, products = fast64.products(K, V[:, cols], Q.shape[1])     # once per head, as enclose64
    step = max(heads.MIN_ROWS, heads.ENTRIES // max(K.shape[0], V.shape[1], 1))
    for a in range(0, rows.size, step):
        block = rows[a:a + step]
        mask = None if allowed is None else allowed[block]
        weights, output, weights_zero = fast64._block(Q[block], scores, products, mask,
                                                      None if additive is None else additive[block],
                                                      scale, cols.size)
        for (hi, lo, rad), values, ok, where in ((weights, w, w_ok, None), (output, o, o_ok, cols)):
            y, decided = np.empty(hi.shape, dtype=values.dtype), np.empty(hi.shape, dtype=bool)
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                heads.decide_dd_into(hi, lo, rad, fmt, cast, y, decided)
            if where is None:
                zeros = weights_zero if mask is None else weights_zero | ~mask
                y[zeros] = 0.0
                decided |= zeros
            known = ok[block] if where is None else ok[block][:, where]
            r, c = np.nonzero(decided & ~known)              # the entries still undecided
            at = c if where is None else where[c]             # the output's own columns
            values[block[r], at] = y[r, c]
            ok[block[r], at] = True


def _decide(mid, rad, fmt: BinaryFormat):
    """Round both ends of [mid − rad, mid + rad] (the radius covers computing the ends in
    round-to-nearest: fast.py); decided where they round alike.  float32 by the IEEE
    conversion (checked by :func:`ieee_conversions_hold`), the other formats by round_array."""
    np = _numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = mid - rad, mid + rad
        if fmt.name == "float32" and ieee_conversions_hold():
            rl, rh = lo.astype(np.float32), hi.astype(np.float32)
        else:
            rl, rh = round_array(lo, fmt), round_array(hi, fmt)
        ok = (rl == rh) & np.isfinite(rad) & np.isfinite(rh)
    return np.where(ok, rh.astype(np.float64) + 0.0, np.nan), ok


def ieee_conversions_hold() -> bool:
    """float64 → float32 conversion rounds to nearest even with subnormals, and float64
    subnormals survive arithmetic (no flush-to-zero or denormals-are-zero, e.g. after
    torch.set_flush_denormal(True)).  Checked on every call: cheap, and the FPU mode can change."""
    np = _numpy()
    x = np.array([1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 3 * 2.0 ** -150, -(1 + 2.0 ** -24)])
    want = [1.0, 1 + 2.0 ** -22, 2.0 ** -148, -1.0]
    tiny = np.array([2.0 ** -1074]) * np.array([1.0])
    if x.astype(np.float32).astype(np.float64).tolist() != want or tiny[0] == 0:
        raise FloatRefError("the floating-point unit flushes subnormals to zero or does not round to "
                            "nearest (e.g. torch.set_flush_denormal(True)); the float64 bounds assume "
                            "IEEE arithmetic: restore the default mode")
    return True


__all__ = ["SDPAReference", "check_budget", "correctly_rounded", "normalise"]
