"""Every step's name as a :class:`StepName`, with its kind and its place in the computation.

The step table (``symattn.trace.steps``) says how each step is written; this says which steps
there are and what kind each is, so the subsets the code uses — the softmax's steps, the steps
after the scores, the gradients — are queries (``StepName.span(StepName.EXP, StepName.OUTPUT)``,
``StepName.of_kind(StepKind.GRADIENT)``) instead of hand-kept tuples that drift when a step is
added.  It sits below ``problem/`` and ``engine/`` because both name steps (the input keys
``X``, ``W_q``, …; the engine's per-step rules); it imports nothing.

Two families are named by a pattern, not by a member: ``running_output_<b>`` (one step per
key block of the online softmax) and ``decode_<t>_<part>`` (the decode steps of token t);
:func:`kind_of` knows them too.

The members are listed in the order of the computation, which is :attr:`StepName.order`: the
inputs (the data ``X``, ``X_kv``, then the weights), the projections, RoPE's rotations, the
scores, the logit variants (ALiBi, the soft-cap), the mask, the softmax, the output, the
online softmax's and decoding's own steps, then the backward pass in the order the Trace
holds it.  (The Trace itself lists ``X_kv`` after the weights; nothing reads that order from
here.)
"""

from __future__ import annotations

import re
from enum import StrEnum

from symattn.vocab.base import Vocabulary

__all__ = ["StepName", "StepKind", "kind_of"]


class StepKind(StrEnum):
    """What a step is."""

    EMBEDDING = "embedding"     # X, X_kv: the data, one row per token
    WEIGHT = "weight"           # W_q, W_k, W_v: the learned projections
    PROJECTION = "projection"   # Q, K, V (projected, or given)
    ROTATION = "rotation"       # RoPE's rotated queries and keys
    SCORE = "score"             # the scores and the scaled scores
    LOGIT = "logit"             # a variant's logits: ALiBi's bias, the biased and capped scores
    MASK = "mask"               # the masked logits
    SOFTMAX = "softmax"         # shifted, exponentials, row sums, weights
    OUTPUT = "output"           # the output
    ONLINE = "online"           # the online softmax's running values (running_output_<b> too)
    DECODE = "decode"           # KV-cache decoding (decode_<t>_<part> and the work counts)
    BACKWARD = "backward"       # the backward's saved log-sum-exp and its loss
    GRADIENT = "gradient"       # the gradients d_…, and the softmax's row dot products


#: the kinds of plain attention: a problem with no variant key has steps of these kinds only
PLAIN_KINDS = frozenset((StepKind.EMBEDDING, StepKind.WEIGHT, StepKind.PROJECTION, StepKind.SCORE,
                         StepKind.MASK, StepKind.SOFTMAX, StepKind.OUTPUT))
#: the kinds of the backward pass
BACKWARD_KINDS = frozenset((StepKind.BACKWARD, StepKind.GRADIENT))


class StepName(Vocabulary):
    """A step's name.  It is its string everywhere (``==``, ``hash``, JSON, ``str``, ``repr``)."""

    _value_: str
    kind: StepKind

    def __new__(cls, value: str, kind: StepKind) -> StepName:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        return member

    X = "X", StepKind.EMBEDDING
    X_KV = "X_kv", StepKind.EMBEDDING
    W_Q = "W_q", StepKind.WEIGHT
    W_K = "W_k", StepKind.WEIGHT
    W_V = "W_v", StepKind.WEIGHT
    Q = "Q", StepKind.PROJECTION
    K = "K", StepKind.PROJECTION
    V = "V", StepKind.PROJECTION
    Q_ROT = "Q_rot", StepKind.ROTATION
    K_ROT = "K_rot", StepKind.ROTATION
    SCORES = "scores", StepKind.SCORE
    SCALED = "scaled", StepKind.SCORE
    BIAS = "bias", StepKind.LOGIT
    BIASED = "biased", StepKind.LOGIT
    CAPPED = "capped", StepKind.LOGIT
    MASKED = "masked", StepKind.MASK
    SHIFTED = "shifted", StepKind.SOFTMAX
    EXP = "exp", StepKind.SOFTMAX
    ROW_SUM = "row_sum", StepKind.SOFTMAX
    WEIGHTS = "weights", StepKind.SOFTMAX
    OUTPUT = "output", StepKind.OUTPUT
    RUNNING_MAX = "running_max", StepKind.ONLINE
    RESCALE = "rescale", StepKind.ONLINE
    RUNNING_SUM = "running_sum", StepKind.ONLINE
    DECODE_WORK = "decode_work", StepKind.DECODE
    LSE = "lse", StepKind.BACKWARD
    LOSS = "loss", StepKind.BACKWARD
    D_OUTPUT = "d_output", StepKind.GRADIENT
    D_V = "d_V", StepKind.GRADIENT
    D_WEIGHTS = "d_weights", StepKind.GRADIENT
    ROW_DOT = "row_dot", StepKind.GRADIENT
    D_LOGITS = "d_logits", StepKind.GRADIENT
    D_SCORES = "d_scores", StepKind.GRADIENT
    D_Q_ROT = "d_Q_rot", StepKind.GRADIENT
    D_K_ROT = "d_K_rot", StepKind.GRADIENT
    D_Q = "d_Q", StepKind.GRADIENT
    D_K = "d_K", StepKind.GRADIENT
    D_SINK = "d_sink", StepKind.GRADIENT
    D_W_Q = "d_W_q", StepKind.GRADIENT
    D_W_K = "d_W_k", StepKind.GRADIENT
    D_W_V = "d_W_v", StepKind.GRADIENT
    D_X = "d_X", StepKind.GRADIENT
    D_X_KV = "d_X_kv", StepKind.GRADIENT

    @property
    def order(self) -> int:
        """The step's place in the computation (0 for ``X``)."""
        return _ORDER[self]

    @classmethod
    def of_kind(cls, *kinds: StepKind) -> tuple[StepName, ...]:
        """The steps of these kinds, in the order of the computation."""
        return tuple(s for s in cls if s.kind in kinds)

    @classmethod
    def plain(cls) -> tuple[StepName, ...]:
        """The steps of plain attention (no variant key: no RoPE, logit variant, tiles, decode
        or backward), in order."""
        return tuple(s for s in cls if s.kind in PLAIN_KINDS)

    @classmethod
    def backward(cls) -> tuple[StepName, ...]:
        """The backward pass's steps, in the order the Trace holds them."""
        return tuple(s for s in cls if s.kind in BACKWARD_KINDS)

    @classmethod
    def span(cls, first: StepName, last: StepName) -> tuple[StepName, ...]:
        """Plain attention's steps from ``first`` to ``last`` (both included), in order:
        ``span(EXP, OUTPUT)`` is the softmax's exponentials, row sums, weights and output."""
        return tuple(s for s in cls.plain() if first.order <= s.order <= last.order)


_ORDER: dict[StepName, int] = {s: k for k, s in enumerate(StepName)}
_BY_NAME: dict[str, StepName] = {s.value: s for s in StepName}

#: the step families named by a pattern: one step per key block, one per decoded token and part
RUNNING_OUTPUT = re.compile(r"running_output_(\d+)")
DECODE_STEP = re.compile(r"decode_(\d+)_(\w+)")


def kind_of(name: str) -> StepKind | None:
    """The kind of a step name (a member, ``running_output_<b>`` or ``decode_<t>_<part>``);
    None for a name that is no step."""
    step = _BY_NAME.get(name)
    if step is not None:
        return step.kind
    if RUNNING_OUTPUT.fullmatch(name):
        return StepKind.ONLINE
    if DECODE_STEP.fullmatch(name):
        return StepKind.DECODE
    return None
