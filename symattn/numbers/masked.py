"""The masked marker: the value a step holds where the mask removed a key.

One typed singleton, below every layer that shows or checks a step, so a view can test
``value is NEG_INF`` without reaching into the engine."""

from __future__ import annotations

from typing import Final


class Masked:
    """−∞ at a masked position; prints as the lesson writes it.  There is one instance."""

    _instance: "Masked | None" = None

    def __new__(cls) -> "Masked":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "-inf"

    __str__ = __repr__

    def __reduce__(self) -> str:
        return "NEG_INF"


NEG_INF: Final = Masked()
