"""The base of every closed vocabulary: a ``StrEnum`` whose members print as their strings."""

from __future__ import annotations

from enum import StrEnum


class Vocabulary(StrEnum):
    """A ``StrEnum`` whose ``repr`` is its string's too.

    Why: members flow into messages that quote names with ``!r`` (``no step named 'scores'``);
    with the enum's own ``repr`` (``<StepName.SCORES: 'scores'>``) a converted name would change
    what users read.  ``str``, ``format``, ``==``, ``hash`` and ``json.dumps`` already give
    the plain string."""

    def __repr__(self) -> str:
        return str.__repr__(self.value)
