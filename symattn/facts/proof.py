"""Proof objects: what a fact says, why it holds, and what was checked.

A :class:`Proof` is data, not prose: its lines carry both a text and a LaTeX
form, so the same proof prints through the facts document
(``document.build_facts``) as text, LaTeX, HTML and in a notebook, and as
JSON (``to_json``); a failing check keeps its counterexample for the caller
to inspect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from symattn.numbers.certify import certify
from symattn.trace.display import Displayable


@dataclass(frozen=True)
class Line:
    """One line of a proof, written twice: plain text and LaTeX (math mode)."""

    text: str
    latex: str


def expr_line(label: str, expr: sympy.Expr, *, digits: int | None = None) -> Line:
    """``label: expr`` with the exact value (and its certified decimal when asked)."""
    text = f"{label}{sympy.sstr(expr)}"
    latex = rf"\text{{{label}}}{sympy.latex(expr)}"
    if digits is not None and not expr.free_symbols and not expr.is_Integer:
        d = certify(expr, digits)
        text += f" ≈ {d}"
        latex += rf" \approx {d}"
    return Line(text, latex)


@dataclass(frozen=True)
class Proof(Displayable):
    """The verdict on one named fact, with its general argument and its checks.

    ``general`` is an argument verified by SymPy on symbols; ``checks`` are
    exact verifications on given data (a problem or a user's claim).  A
    failing check sets ``holds`` to False and records a ``counterexample``.
    """

    fact: str
    holds: bool
    statement: Line
    general: tuple[Line, ...] = ()
    checks: tuple[Line, ...] = ()
    counterexample: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.holds

    @property
    def scope(self) -> str:
        """'general', 'given data' or 'general and given data'."""
        parts = [name for name, lines in (("general", self.general), ("given data", self.checks))
                 if lines]
        return " and ".join(parts) or "none"

    def text(self) -> str:
        """Plain text: the fact's section of the facts document (``document.build.facts``)."""
        return self._shown("text") or self.fact

    def latex(self) -> str:
        """A LaTeX fragment: the fact's section of the facts document."""
        return self._shown("latex") or ""

    def to_json(self) -> dict[str, Any]:
        """The JSON object of ``symattn facts --json``."""
        out: dict[str, Any] = {"fact": self.fact, "holds": self.holds,
                               "statement": self.statement.text, "scope": self.scope,
                               "general": [line.text for line in self.general],
                               "checks": [line.text for line in self.checks]}
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        out.update(self.data)
        return out
