"""Inputs that tell a right attention kernel from a wrong one (issue 21), each named and seeded.

Random normal inputs pass almost every kernel, wrong ones included: a kernel that forgets to
rescale its running sums, aligns the causal mask the other way, or starts its running maximum
at −5e4 is still right on them.  Each case here is built so that a named mistake changes the
output (or the LSE) by far more than rounding:

=====================  =========================================================================
name                   what it is, and the mistakes it exposes
=====================  =========================================================================
max_far_from_rest      one key per head far above the others, late in the row (after the first
                       key block): a running sum or output not rescaled when the maximum grows
near_ties              the two largest logits one ulp apart, their values far apart
near_overflow          |q·k| near the format's largest finite value, at most float16's 65504:
                       scores formed or scaled in half precision overflow; a softmax without
                       the maximum subtracted overflows (e^8000)
first_block_masked     the first 64 keys masked for every query, the rest of the logits near −120:
                       a running maximum reset to 0 after a fully masked block underflows e^(s − 0)
all_below_sentinel     every logit near −6·10⁴: a running maximum initialised to −5e4 instead of
                       −inf zeroes the rows (flashinfer#4267)
v_ones                 V = 1 everywhere: the output is exactly 1 (fp8 P rounded gave 0.637)
midpoint_ties          equal logits, V alternating 1 and 1 + ulp: outputs exactly on a rounding
                       midpoint (round to nearest even gives 1); a wrong final rounding shows
causal_bottom_right    causal with L = S/2, aligned bottom-right: a top-left mask differs on every row
causal_top_left        causal with L = S/2, aligned top-left (torch): a bottom-right mask differs
gqa_middle_heads       grouped-query heads (Hq = 2·Hkv ≥ 4): a tiled head map differs from torch's
                       repeat_interleave on the middle heads
lse_offset             logits offset by +6: lse and lse2 = lse / ln 2 differ by far more than
                       rounding, so a kernel storing the other base fails
=====================  =========================================================================

Inputs are rounded to ``dtype`` exactly (round to nearest even from float64); bfloat16 and fp8
inputs come in float32 arrays holding the format's values (numpy has no such types without
ml_dtypes).  Shapes are (1, heads, L, E) for Q and (1, heads, S, E) for K and V (S = L unless
the case says otherwise).  ``case.options`` are the SDPA arguments the case means
(``is_causal``, ``causal_align``, ``attn_mask``, ``enable_gqa``); ``case.reference()`` is the
correctly rounded answer (:func:`symattn.floatref.correctly_rounded`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from symattn.floatref.binary import BINARY_FORMATS, round_array
from symattn.floatref.errors import FloatRefError

#: keys per block of the kernels the cases aim at (FlashAttention's tiles are 64–128 keys)
BLOCK = 64


@dataclass(frozen=True)
class HardCase:
    """One named input: Q, K, V in ``dtype``, the SDPA options it means, and what it exposes."""

    name: str
    about: str
    dtype: str
    Q: Any
    K: Any
    V: Any
    options: dict = field(default_factory=dict)

    def reference(self, **extra: Any):
        """The correctly rounded output (and, with return_lse=True, the LSE) of this case."""
        from symattn.floatref.sdpa import correctly_rounded

        return correctly_rounded(self.Q, self.K, self.V, dtype=self.dtype, **{**self.options, **extra})


def hard_cases(dtype: str = "float32", heads: int = 4, L: int = 256, E: int = 64,
               seed: int = 0) -> Iterator[HardCase]:
    """The cases of the table above, in its order, deterministic from ``seed``."""
    if dtype not in BINARY_FORMATS:
        raise FloatRefError(f"dtype is {dtype!r}: use {', '.join(BINARY_FORMATS)}")
    for n, what in ((heads, "heads"), (L, "L"), (E, "E")):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise FloatRefError(f"{what} is {n!r}: give a positive integer")
    if L < 2 * BLOCK or E < 4:
        raise FloatRefError(f"L = {L}, E = {E}: the cases need L ≥ {2 * BLOCK} (two key blocks of "
                            f"{BLOCK}) and E ≥ 4")
    g = _Maker(dtype, heads, L, E, seed)
    yield from _large_logits(g)           # one random stream: the groups draw in this order
    yield from _masked_and_sentinel(g)
    yield from _exact_outputs(g)
    yield from _layouts(g)


class _Maker:
    """What the cases are built from: the format, the shapes and one seeded random stream."""

    def __init__(self, dtype: str, heads: int, L: int, E: int, seed: int) -> None:
        import numpy as np

        self.np, self.dtype, self.heads, self.L, self.E = np, dtype, heads, L, E
        self.fmt = BINARY_FORMATS[dtype]
        self.big = float(self.fmt.max_finite)
        self.ulp1 = 2.0 ** (1 - self.fmt.p)                  # the ulp of 1
        self.rng = np.random.default_rng(seed)
        self.store = np.float64 if dtype == "float64" else np.float16 if dtype == "float16" else np.float32
        self.sq = math.sqrt(E)
        self.h = (1, heads)

    def put(self, x):
        """x rounded to the format, stored as the case hands it out."""
        return round_array(self.np.asarray(x, dtype=self.np.float64), self.fmt).astype(self.store)

    def normal(self, *shape, s=1.0):
        return self.rng.standard_normal(shape) * s


def _large_logits(g: _Maker) -> Iterator[HardCase]:
    """A maximum that grows late, near ties, and scores near overflow."""
    np, dtype, L, E, h, sq, put, normal = g.np, g.dtype, g.L, g.E, g.h, g.sq, g.put, g.normal
    big, ulp1, rng = g.big, g.ulp1, g.rng

    # one key per head far above the rest, after the first block: logit gap ≈ 30
    q, k, v = normal(*h, L, E, s=0.5), normal(*h, L, E, s=0.5), normal(*h, L, E)
    late = min(L - 1, BLOCK + BLOCK // 2)
    q[..., 0] = 4.0
    k[..., 0] = 0.0
    k[:, :, late, 0] = 8.0 * sq
    yield HardCase("max_far_from_rest", "one key per head 30 logits above the rest, after the first "
                   "block: catches running sums or outputs not rescaled when the maximum grows",
                   dtype, put(q), put(k), put(v))

    # the two largest logits one ulp of the score apart, with values −1 and +1
    q, k, v = normal(*h, L, E, s=0.25), normal(*h, L, E, s=0.25), normal(*h, L, E)
    q[..., 0] = 1.0
    k[..., 0] = 0.0
    a, b = L // 3, (2 * L) // 3
    k[:, :, a, 0] = 6.0 * sq
    k[:, :, b, 0] = 6.0 * sq * (1 + 2 * ulp1)
    v[:, :, a, :], v[:, :, b, :] = -1.0, 1.0
    yield HardCase("near_ties", "the two largest logits a few ulps apart, their values −1 and +1: the "
                   "output is a difference of two nearly equal weights", dtype, put(q), put(k), put(v))

    # |q·k| near the largest finite value of the format, at most float16's 65504: logits of
    # 10^37 are beyond any kernel's float32 arithmetic and floatref's fast paths alike (every
    # entry would need the exact arb path, over its cap)
    m = math.sqrt(0.9 * min(big, 65504.0) / E)
    q = np.sign(normal(*h, L, E)) * m * (0.5 + 0.5 * rng.random((*h, L, E)))
    k = np.sign(normal(*h, L, E)) * m * (0.5 + 0.5 * rng.random((*h, L, E)))
    v = normal(*h, L, E, s=min(1.0, big / 16))
    yield HardCase("near_overflow", "entries of Q and K near sqrt(max/E): q·k near the largest finite "
                   "value; scores formed or scaled in the input format overflow", dtype, put(q), put(k), put(v))


def _masked_and_sentinel(g: _Maker) -> Iterator[HardCase]:
    """A fully masked first block, and every logit below a finite sentinel."""
    np, dtype, L, E, h, sq, put, normal = g.np, g.dtype, g.L, g.E, g.h, g.sq, g.put, g.normal

    # the first key block fully masked, the other logits near −120
    q, k, v = normal(*h, L, E, s=0.1), normal(*h, L, E, s=0.1), normal(*h, L, E)
    d = E // 2                                              # spread over d dims: fp8 holds the entries
    q[..., :d] = 1.0
    k[..., :d] = -120.0 * sq / d
    mask = np.ones((L, L), dtype=bool)
    mask[:, :BLOCK] = False
    yield HardCase("first_block_masked", f"keys 0–{BLOCK - 1} masked for every query, the other logits "
                   "near −120: a running maximum reset to 0 after the masked block underflows e^(s − 0)",
                   dtype, put(q), put(k), put(v), {"attn_mask": mask})

    # every logit near −6e4, below a −5e4 sentinel
    q, k, v = normal(*h, L, E, s=0.1), normal(*h, L, E, s=0.1), normal(*h, L, E)
    q[..., :d] = math.sqrt(6e4 * sq / d)
    k[..., :d] = -math.sqrt(6e4 * sq / d)
    yield HardCase("all_below_sentinel", "every logit near −6·10⁴: a running maximum started at −5e4 "
                   "instead of −inf gives weights e^(−10⁴) = 0 and zeroes the rows (flashinfer#4267)",
                   dtype, put(q), put(k), put(v))


def _exact_outputs(g: _Maker) -> Iterator[HardCase]:
    """Outputs that are exactly 1, or exactly on a rounding midpoint."""
    np, dtype, L, E, h, put, normal = g.np, g.dtype, g.L, g.E, g.h, g.put, g.normal
    ulp1 = g.ulp1

    q, k = normal(*h, L, E), normal(*h, L, E)
    yield HardCase("v_ones", "V = 1: every output is exactly 1 (a kernel that rounds P before P·V "
                   "without renormalising is off)", dtype, put(q), put(k), put(np.ones((*h, L, E))))

    q = normal(*h, L, E)
    k = np.broadcast_to(normal(*h, 1, E), (*h, L, E)).copy()
    v = np.ones((*h, L, E))
    v[:, :, 1::2, :] = 1 + ulp1
    yield HardCase("midpoint_ties", "equal logits and V alternating 1 and 1 + ulp: every output is "
                   "exactly the midpoint 1 + ulp/2, which rounds to the even 1", dtype, put(q), put(k), put(v))


def _layouts(g: _Maker) -> Iterator[HardCase]:
    """Causal alignments, grouped-query heads and the LSE's base."""
    dtype, L, E, h, sq, put, normal = g.dtype, g.L, g.E, g.h, g.sq, g.put, g.normal
    heads = g.heads

    half = max(1, L // 2)
    for align in ("bottom_right", "top_left"):
        q, k, v = normal(*h, half, E), normal(*h, L, E), normal(*h, L, E)
        other = "top-left" if align == "bottom_right" else "bottom-right"
        yield HardCase(f"causal_{align}", f"causal with L = {half} queries and S = {L} keys, aligned "
                       f"{align.replace('_', '-')}: a {other} mask differs on every row", dtype,
                       put(q), put(k), put(v), {"is_causal": True, "causal_align": align})

    hq = max(4, heads + heads % 2)
    q, k, v = normal(1, hq, L, E), normal(1, hq // 2, L, E), normal(1, hq // 2, L, E)
    yield HardCase("gqa_middle_heads", f"{hq} query heads on {hq // 2} kv heads: query head h reads kv "
                   "head h // 2 (torch's repeat_interleave); a tiled map (h mod Hkv) differs on the "
                   "middle heads", dtype, put(q), put(k), put(v), {"enable_gqa": True})

    q, k, v = normal(*h, L, E, s=0.5), normal(*h, L, E, s=0.5), normal(*h, L, E)
    q[..., 0] = 1.0
    k[..., 0] = 6.0 * sq
    yield HardCase("lse_offset", "every logit offset by +6: lse ≈ 6 + ln S and lse2 = lse / ln 2 differ "
                   "by far more than rounding", dtype, put(q), put(k), put(v))
