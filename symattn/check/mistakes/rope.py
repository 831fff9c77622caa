"""The RoPE mistakes: the same engine on a problem with one RoPE change (symattn.check.mistakes.catalog).

``rope-layout``      the other pairing (interleaved ↔ half; the recurring checkpoint bug)
``rope-degrees``     every θ_i read as degrees: θ_i·π/180
``rope-on-values``   V rotated too, by the key positions (only when d_v = d_k)
``rope-query-only``  K not rotated: the keys all at position 0 (K_rot = K)
"""

from __future__ import annotations

from typing import Callable

import sympy

from symattn.problem.problem import Problem
from symattn.problem.keys.rope import Rope, rotate
from symattn.trace.trace import Trace
from symattn.check.codes import MistakeCode
from symattn.vocab import StepName, StepKind

_AFTER_SCORES = StepName.span(StepName.SCORES, StepName.OUTPUT)
ROTATED = frozenset((*StepName.of_kind(StepKind.ROTATION), *_AFTER_SCORES))

Variant = tuple[str, str, frozenset[str], Trace]


def rope_variants(trace: Trace, attempt: Callable[[Callable[[], Problem]], Trace | None]) -> list[Variant]:
    """Each RoPE mistake that can be built for this problem, as (code, detail, steps, trace)."""
    p = trace.problem
    rope = p.rope
    if rope is None:
        return []
    out: list[Variant] = []

    def add(code: str, detail: str, steps: frozenset[str], build: Callable[[], Problem]) -> None:
        variant = attempt(build)
        if variant is not None:
            out.append((code, detail, steps, variant))

    if rope.d >= 4:      # with one pair the two layouts are the same
        other = "half" if rope.layout == "interleaved" else "interleaved"
        add(MistakeCode.ROPE_LAYOUT, f"the {other} pairing instead of {rope.layout}", ROTATED,
            lambda: p.rebuilt(rope={**rope.as_value(), "layout": other}))
    degrees = {**rope.as_value(), "theta": [t * sympy.pi / 180 for t in rope.theta]}
    degrees.pop("base", None)
    add(MistakeCode.ROPE_DEGREES, "the angles p·θ_i read as degrees (θ_i·π/180)", ROTATED,
        lambda: p.rebuilt(rope=degrees))
    if p.d_v == p.d_k:
        add(MistakeCode.ROPE_ON_VALUES, "V rotated by the key positions too", frozenset(("output",)),
            lambda: Problem(Q=trace.Q.matrix, K=trace.K.matrix, V=_rotated_values(trace, rope),
                            tokens=list(p.tokens),
                            key_tokens=list(p.key_tokens), scale=p.scale, mask=p.mask_value,
                            **p.variant_keys, rope=rope))
    if any(rope.key_positions):
        add(MistakeCode.ROPE_QUERY_ONLY, "only Q rotated (K left as it is)",
            frozenset((StepName.K_ROT, *_AFTER_SCORES)),
            lambda: p.rebuilt(rope={**rope.as_value(), "key_positions": [0] * p.m}))
    return out


def _rotated_values(trace: Trace, rope: Rope) -> sympy.ImmutableMatrix:
    """V with each row turned as its key is (the student's rotation applied to V)."""
    from symattn.problem.matrix import ExactMatrix

    return rotate(ExactMatrix.from_sympy(trace.V.matrix), rope.key_positions, rope).to_sympy()
