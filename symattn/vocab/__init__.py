"""The closed vocabularies as enums: step names (:class:`StepName`), below every layer that names a step.

A member *is* its string (``StepName.SCORES == "scores"``, same hash, same JSON, same ``str``,
``format`` and ``repr``), so every output and file format stays what it was; the enums add
what a string cannot say: a step's kind and its place in the computation, so the subsets the
code needs are queries, not hand-kept tuples.  The verdict and mistake codes are checking's
own vocabulary and live there (``symattn.check.codes``).
"""

from symattn.vocab.base import Vocabulary
from symattn.vocab.steps import StepName, StepKind, kind_of

__all__ = ["StepName", "StepKind", "Vocabulary", "kind_of"]
