"""Claims: figures a person asserts (weights, outputs) for a fact to check.

A fact is a theorem about true attention, so it can only fail on numbers
someone *wrote down*.  A claims file is TOML with ``weights`` (n × m) and/or
``output`` (n × d_v); entries are read exactly (TOML floats by their text),
never through ``eval``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy

from symattn.errors import ParseError, ProblemError
from symattn.matrix import exact_matrix
from symattn.tomlfile import load_toml

CLAIM_KEYS = ("weights", "output")


@dataclass(frozen=True)
class Claims:
    """Exact matrices a person claims are the weights and/or the output."""

    weights: sympy.ImmutableMatrix | None = None
    output: sympy.ImmutableMatrix | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "claims") -> "Claims":
        """Read ``{"weights": [[...]], "output": [[...]]}`` exactly."""
        if not isinstance(data, Mapping):
            raise ProblemError(f"{source} must be a table with weights and/or output")
        unknown = [k for k in data if k not in CLAIM_KEYS]
        if unknown:
            raise ProblemError(f"{source}: unknown key {unknown[0]!r}; the keys are weights, output")
        if not any(k in data for k in CLAIM_KEYS):
            raise ProblemError(f"{source}: give weights = [[...]] and/or output = [[...]]")
        try:
            found = {k: exact_matrix(k, data[k]).to_sympy() for k in CLAIM_KEYS if k in data}
        except (ParseError, ProblemError) as exc:
            raise ProblemError(f"{source}: {exc}") from None
        return cls(**found)

    @classmethod
    def from_toml(cls, path: str | Path) -> "Claims":
        """Read a claims file (TOML)."""
        data = load_toml(path, what="a TOML file with weights = [[...]]")
        return cls.from_mapping(data, source=str(path))

    def check_shapes(self, n: int, m: int, d_v: int) -> None:
        """Refuse claims whose shape does not fit the problem."""
        for name, matrix, shape in (("weights", self.weights, (n, m)), ("output", self.output, (n, d_v))):
            if matrix is not None and matrix.shape != shape:
                raise ProblemError(f"claimed {name} is {matrix.rows}×{matrix.cols} but the problem's "
                                   f"{name} are {shape[0]}×{shape[1]}")
