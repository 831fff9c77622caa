"""The ``mask`` key: causal, a 0/1 matrix (1 = may attend) or a sliding window.

Plain values in, a 0/1 matrix and its kind out; nothing here sees the half-built Problem."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, cast

import sympy

from symattn.errors import ProblemError
from symattn.problem.keys.context import KeyContext
from symattn.problem.matrix import plain_scalar, rows_of

Matrix: TypeAlias = sympy.ImmutableMatrix


def parse_window(value: Mapping) -> tuple[int, bool]:
    """``{window = W, causal = true}``: the width W ≥ 1 and whether the band is causal."""
    unknown = [k for k in value if k not in ("window", "causal")]
    if unknown:
        raise ProblemError(f"mask has the unknown key {str(unknown[0])!r}: a sliding window is "
                           "mask = { window = W } or { window = W, causal = false }")
    width = value.get("window")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ProblemError(f"mask window is {width!r}: give the window width as a whole number "
                           "W ≥ 1 (query i sees W keys, itself included)")
    causal = value.get("causal", True)
    if not isinstance(causal, bool):
        raise ProblemError(f"mask causal is {causal!r}: use true or false")
    return width, causal


def window_allows(i: int, j: int, width: int, causal: bool) -> bool:
    """Mistral's sliding window: i − W < j ≤ i (W keys, itself included); |i − j| < W
    when not causal."""
    return (i - width < j <= i) if causal else abs(i - j) < width


def is_causal_rows(value: object, n: int) -> bool:
    """Whether a 0/1 matrix is the causal mask (a rebuilt problem passes its mask as rows)."""
    return not isinstance(value, (str, Mapping)) and value is not None and \
        causal_window_width(value, n) == n


def parse_mask(value: object, n: int, m: int) -> tuple[Matrix | None, str | None]:
    """The mask as a 0/1 matrix (1 = may attend, PyTorch SDPA's boolean convention)."""
    if value is None or value is False:
        return None, None
    if isinstance(value, Mapping):
        width, causal = parse_window(value)
        return Matrix(n, m, lambda i, j: 1 if window_allows(i, j, width, causal) else 0), "window"
    if isinstance(value, str):
        if value.strip().lower() != "causal":
            raise ProblemError(f"mask is {value!r}: use \"causal\" or a 0/1 matrix where 1 = may attend")
        # top-left alignment, as torch.nn.functional.scaled_dot_product_attention(is_causal=True)
        return Matrix(n, m, lambda i, j: 1 if j <= i else 0), "causal"
    rows = rows_of("mask", value)
    if len(rows) != n or len(rows[0]) != m:
        raise ProblemError(
            f"mask is {len(rows)}×{len(rows[0])} but the scores are {n}×{m} (queries × keys)"
        )
    out = []
    for i, row in enumerate(rows):
        out_row = []
        for j, v in enumerate(row):
            v = plain_scalar(v)
            if isinstance(v, sympy.Integer):  # a mask read back from Problem.mask
                v = int(v)
            if v is True or v is False or (isinstance(v, int) and v in (0, 1)):
                out_row.append(int(v))
            else:
                raise ProblemError(f"mask[{i}][{j}] is {v!r}: use 1 (may attend) or 0 (blocked)")
        out.append(out_row)
    return Matrix(out), "matrix"


def causal_window_width(mask: object, n: int) -> int | None:
    """W when a 0/1 matrix (as a rebuilt problem passes it) is the causal band i − W < j ≤ i
    (W = n: the causal mask), else None."""
    try:
        # duck-typed: anything that is not rows of 0/1 numbers raises, and is no window
        rows = [[int(x) for x in r] for r in cast(Iterable[Iterable[Any]], mask)]
    except (TypeError, ValueError):
        return None
    if len(rows) != n or any(len(r) != n for r in rows):
        return None
    width = sum(rows[-1])
    if width < 1 or any(r[j] != (1 if i - width < j <= i else 0)
                        for i, r in enumerate(rows) for j in range(n)):
        return None
    return width


def mask_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The 0/1 mask, its kind and the window (W, causal) of a sliding one; decoding (read
    before it) implies the causal mask.  Every query must keep at least one key."""
    if ctx.parsed.get("prefill") is not None and (value is None or is_causal_rows(value, ctx.n)):
        value = "causal"       # decoding is causal; a causal sliding window stays one
    mask, kind = parse_mask(value, ctx.n, ctx.m)
    window = parse_window(value) if isinstance(value, Mapping) else None
    if mask is not None:
        tokens = cast(tuple[str, ...], ctx.parsed["tokens"])
        for i in range(ctx.n):
            if not any(mask[i, j] for j in range(ctx.m)):
                raise ProblemError(
                    f"mask row {i} ({tokens[i]!r}) blocks every key: each query must be "
                    "allowed at least one key (PyTorch returns NaN or zeros for such a row)"
                )
    return {"mask": mask, "mask_kind": kind, "window": window}
