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
class Proof:
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
        """Plain text: the fact's section of the facts document (``document.build_facts``)."""
        from symattn.document.build.facts import proof_section
        from symattn.document.printers.text import TextPrinter

        lines = TextPrinter().print(proof_section(self))
        return "\n".join(lines[1:]) + "\n"      # the section without its leading blank line

    def latex(self) -> str:
        """A LaTeX fragment: the fact's section of the facts document."""
        from symattn.document.build.facts import proof_section
        from symattn.document.printers.latex import LatexPrinter

        return "\n".join(LatexPrinter().print(proof_section(self))) + "\n"

    def _repr_html_(self) -> str:  # Jupyter: a fragment whose CSS is scoped to its wrapper
        from symattn.document.build.facts import build_facts_document
        from symattn.document.formats import html_fragment

        return html_fragment(build_facts_document([self], title=self.fact))

    def _repr_latex_(self) -> str:  # Jupyter
        return self.latex()

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
