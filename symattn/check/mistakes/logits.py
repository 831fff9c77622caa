"""The mistakes of ALiBi, soft-capping and sinks: the same engine on a problem with one change.

``alibi-sign``         the bias added with the wrong sign: +slope·(i − j), so a farther
                       (earlier) key gets a *higher* logit (``slope * (i - j)`` without the
                       minus, or the distance taken as j − i)
``alibi-scaled``       the bias added before the scaling, so it is divided by √d_k too:
                       scale·(scores + bias), i.e. the slope times the scale
``softcap-missing``    the soft-cap left out: softmax of the uncapped logits (the bug early
                       Gemma 2 ports shipped; FlashAttention had no soft-cap at first)
``sink-renormalized``  the sink's column dropped and the rest renormalised to sum 1: the
                       plain softmax, as if there were no sink
``sink-kept``          the sink's weight left in the row: m + 1 weights summing to 1 (the
                       softmax over the keys and the sink, its column never dropped); the
                       first m are right, so the figure is told apart by its extra entry
                       (:func:`sink_kept_trace`; the checker reads such a figure against it)

Why not ``softcap-after-softmax``: capping the weights (numbers in (0, 1)) with c ≥ 1 changes
them by less than a rounding at the places a student writes, so it would explain right
figures, not wrong ones; a cap that is forgotten is what ships.

Each is a :class:`Problem` rebuilt from the base one and run through ``attend`` (never a
second softmax): the sink kept is the sink as one more key whose logit is s and whose value
row is 0 (a Q, K, V problem whose scores are the logits, as ``early-rounding`` builds).
"""

from __future__ import annotations

from typing import Callable

import sympy

from symattn.problem.keys.logits import Alibi
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace
from symattn.check.codes import MistakeCode
from symattn.vocab import StepName, StepKind

_LOGITS = StepName.span(StepName.MASKED, StepName.OUTPUT)
_WITH_LOGITS = (*StepName.of_kind(StepKind.LOGIT), *_LOGITS)   # bias, biased, capped and the rest

Variant = tuple[str, str, frozenset[str], Trace]


def logit_variants(trace: Trace, attempt: Callable[[Callable[[], Problem]], Trace | None]
                   ) -> list[Variant]:
    """Each ALiBi, soft-cap and sink mistake that can be built for this problem."""
    p = trace.problem
    out: list[Variant] = []

    def add(code: str, detail: str, steps: tuple[str, ...], build: Callable[[], Problem]) -> None:
        variant = attempt(build)
        if variant is not None:
            out.append((code, detail, frozenset(steps), variant))

    if p.alibi is not None:
        alibi = p.alibi
        add(MistakeCode.ALIBI_SIGN, "the bias added with the wrong sign, +slope·(i − j)", _WITH_LOGITS,
            lambda: p.rebuilt(alibi=Alibi(-alibi.slope, alibi.symmetric)))
        if p.scale != 1 and p.scale.is_positive:
            add(MistakeCode.ALIBI_SCALED, "the bias added before the scaling, so it is scaled too", _WITH_LOGITS,
                lambda: p.rebuilt(alibi={**alibi.value, "slope": alibi.slope * p.scale}))
    if p.softcap is not None:
        add(MistakeCode.SOFTCAP_MISSING, "the soft-cap c·tanh(x/c) left out", _LOGITS,
            lambda: p.rebuilt(softcap=None))
    if p.sink is not None:
        add(MistakeCode.SINK_RENORMALIZED, "the sink's column dropped and the rest renormalised to sum 1",
            StepName.span(StepName.ROW_SUM, StepName.OUTPUT), lambda: p.rebuilt(sink=None))
    return out


def sink_kept_trace(trace: Trace) -> Trace:
    """Softmax over the keys and the sink, the sink's column kept (weights n × (m + 1)).

    The same engine on a Q, K, V problem: Q is the logits with the sink logit as one more
    column, K the identity and scale 1 (so its scores are those logits), V the values
    with a row of 0 for the sink, the mask with the sink's column allowed."""
    p = trace.problem
    n, m = p.n, p.m
    logit = trace.step(trace.logit_step)
    Q = sympy.Matrix([[p.sink if j == m else (logit[i, j] if trace.is_allowed(i, j) else 0)
                       for j in range(m + 1)] for i in range(n)])
    V = trace.step("V").matrix.col_join(sympy.zeros(1, p.d_v))
    mask = None if p.mask is None else [[int(p.mask[i, j]) for j in range(m)] + [1] for i in range(n)]
    keys = list(p.key_tokens)
    sink_name = next(name for name in ("sink", "sink_", "σ", "sink0") if name not in keys)
    return Trace(Problem(Q=Q, K=sympy.eye(m + 1), V=V, scale=1, mask=mask, tokens=list(p.tokens),
                         key_tokens=[*keys, sink_name]))
