"""Checking's closed vocabularies as enums: the verdict codes and the mistake codes.

A member is its string (``Verdict.MISTAKE == "mistake"``; JSON, ``str``, ``format`` and
``repr`` give the string), so ``--json``, the CSV reports and every page read as before; the
enum is what the code compares against, so a misspelt code is an error, not a silent miss.
"""

from __future__ import annotations

from enum import StrEnum

from symattn.vocab import Vocabulary

__all__ = ["MistakeCode", "MistakeFamily", "Verdict"]


class Verdict(Vocabulary):
    """A verdict code, from best to worst (the order :func:`symattn.check.verdict.worst` uses)."""

    EXACT = "exact"             # the exact value itself
    ROUNDED = "rounded"         # the certified rounding at the written precision
    LAST_DIGIT = "last-digit"   # off in the last digit only (a truncation, or rounded the wrong way)
    MISTAKE = "mistake"         # wrong, and reproduced by a named mistake
    WRONG = "wrong"             # wrong, and no named mistake reproduces it
    INVALID = "invalid"         # unreadable, or for a target that does not exist
    BLANK = "blank"             # no answer given (grading)

    @property
    def right(self) -> bool:
        """Exact or rounded: the codes that count as right."""
        return self in (Verdict.EXACT, Verdict.ROUNDED)


class MistakeFamily(StrEnum):
    """Where a mistake is modelled."""

    FORWARD = "forward"     # plain attention (symattn.check.mistakes.catalog)
    MASK = "mask"           # masks and windows (the catalog)
    ROPE = "rope"           # symattn.check.mistakes.rope
    LOGITS = "logits"       # ALiBi, soft-cap, sinks: symattn.check.mistakes.logits
    ONLINE = "online"       # the online softmax: symattn.check.mistakes.online
    BACKWARD = "backward"   # the backward pass: symattn.check.mistakes.backward
    GRADING = "grading"     # named by grading a class, not reproduced by the catalog
    HEADS = "heads"         # named by the multi-head checker (symattn.heads.check)


class MistakeCode(Vocabulary):
    """A named mistake's code, as ``--json`` writes it in ``mistake``, with its family.

    The catalog's mistakes (every family but grading's and heads') come first, in the
    order the catalog lists them (``MISTAKE_CODES``)."""

    _value_: str
    family: MistakeFamily

    def __new__(cls, value: str, family: MistakeFamily) -> MistakeCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.family = family
        return member

    UNSCALED = "unscaled", MistakeFamily.FORWARD
    SCALED_BY_D_K = "scaled-by-d_k", MistakeFamily.FORWARD
    SCALED_ANYWAY = "scaled-anyway", MistakeFamily.FORWARD
    TRANSPOSED_SCORES = "transposed-scores", MistakeFamily.FORWARD
    SOFTMAX_OVER_COLUMNS = "softmax-over-columns", MistakeFamily.FORWARD
    SCALED_AFTER_SOFTMAX = "scaled-after-softmax", MistakeFamily.FORWARD
    E_AS_2_7 = "e-as-2.7", MistakeFamily.FORWARD
    VALUES_FROM_KEYS = "values-from-keys", MistakeFamily.FORWARD
    TRANSPOSED_OUTPUT = "transposed-output", MistakeFamily.FORWARD
    WRONG_STEP = "wrong-step", MistakeFamily.FORWARD
    EARLY_ROUNDING = "early-rounding", MistakeFamily.FORWARD      # also online's and the backward's
    MASK_AFTER_SOFTMAX = "mask-after-softmax", MistakeFamily.MASK
    MASKED_BY_ZERO = "masked-by-zero", MistakeFamily.MASK
    WINDOW_OFF_BY_ONE = "window-off-by-one", MistakeFamily.MASK
    ONLINE_NO_RESCALE = "online-no-rescale", MistakeFamily.ONLINE
    ROPE_LAYOUT = "rope-layout", MistakeFamily.ROPE
    ROPE_DEGREES = "rope-degrees", MistakeFamily.ROPE
    ROPE_ON_VALUES = "rope-on-values", MistakeFamily.ROPE
    ROPE_QUERY_ONLY = "rope-query-only", MistakeFamily.ROPE
    ALIBI_SIGN = "alibi-sign", MistakeFamily.LOGITS
    ALIBI_SCALED = "alibi-scaled", MistakeFamily.LOGITS
    SOFTCAP_MISSING = "softcap-missing", MistakeFamily.LOGITS
    SINK_RENORMALIZED = "sink-renormalized", MistakeFamily.LOGITS
    SINK_KEPT = "sink-kept", MistakeFamily.LOGITS
    FORGOT_ROW_DOT = "forgot-row-dot", MistakeFamily.BACKWARD
    ROW_DOT_AS_ROW_SUM = "row-dot-as-row-sum", MistakeFamily.BACKWARD
    DP_NOT_TRANSPOSED = "dp-not-transposed", MistakeFamily.BACKWARD
    DV_NOT_TRANSPOSED = "dv-not-transposed", MistakeFamily.BACKWARD
    DK_NOT_TRANSPOSED = "dk-not-transposed", MistakeFamily.BACKWARD
    BACKWARD_UNSCALED = "backward-unscaled", MistakeFamily.BACKWARD
    BACKWARD_SCALED_TWICE = "backward-scaled-twice", MistakeFamily.BACKWARD
    UNSCALED_FORWARD = "unscaled-forward", MistakeFamily.BACKWARD
    GRADIENT_ASCENT = "gradient-ascent", MistakeFamily.BACKWARD
    CARRIED_FORWARD = "carried-forward", MistakeFamily.GRADING    # right for the student's own slip
    OTHER_VERSION = "other-version", MistakeFamily.GRADING        # right for another version's key
    GQA_TILED = "gqa-tiled", MistakeFamily.HEADS                  # the wrong key/value head read

    @classmethod
    def of_family(cls, *families: MistakeFamily) -> tuple[MistakeCode, ...]:
        """The codes of these families, in order."""
        return tuple(c for c in cls if c.family in families)

    @classmethod
    def catalogued(cls) -> tuple[MistakeCode, ...]:
        """The codes the catalog reproduces (symattn.check.mistakes), in its order."""
        return tuple(c for c in cls if c.family not in (MistakeFamily.GRADING, MistakeFamily.HEADS))
