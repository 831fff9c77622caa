"""Proof objects: what a fact says, why it holds, and what was checked.

A :class:`Proof` is data, not prose: each of its lines is a run of words and
math nodes (:mod:`symattn.notation.nodes`: ``Frac``, ``Exp``, ``SigmaSum``,
``Sym``, ...), so the same proof prints through the facts document
(``document.build.facts``) as text (Unicode), LaTeX, HTML (MathML) and in a
notebook, and as JSON (``to_json``, its lines as text); a failing check keeps
its counterexample for the caller to inspect.  No format is written here: a
line's ``text`` and ``latex`` come from ``document/``'s printers through the
display hook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from symattn.notation.nodes import Approx, Decimal, Exact, Math
from symattn.numbers.certify import certify
from symattn.trace.display import Displayable

Part = str | Math


@dataclass(frozen=True, init=False)
class Line(Displayable):
    """One line of a proof: words (``str``) and math nodes, in reading order.

    ``Line("row 'I': ", Chain(...), " exactly")``.  Every printer typesets the math
    in its own format; ``text`` and ``latex`` are the line as the text and LaTeX
    printers write it."""

    parts: tuple[Part, ...]
    tex: str = ""          # a line still written twice (``Line.written``): its LaTeX math

    def __init__(self, *parts: Part) -> None:
        for part in parts:
            if not isinstance(part, (str, Math)):
                raise TypeError(f"a proof line is words and math nodes, not a {type(part).__name__}")
        object.__setattr__(self, "parts", tuple(p for p in parts if p != ""))
        object.__setattr__(self, "tex", "")

    @classmethod
    def written(cls, text: str, latex: str = "") -> "Line":
        """A line in the older form, written twice: plain text, and LaTeX math for the LaTeX
        view (HTML shows the text).  New lines are words and nodes: ``Line(...)``."""
        line = cls(text)
        object.__setattr__(line, "tex", latex)
        return line

    @property
    def prose(self) -> bool:
        """True when the line has no math (words only)."""
        return all(isinstance(p, str) for p in self.parts)

    @property
    def text(self) -> str:
        """The line as plain text (Unicode math: e^(s_j), Σ_k, √3)."""
        if self.prose:
            return "".join(self.parts)          # type: ignore[arg-type]
        return self._shown("text") or ""

    @property
    def latex(self) -> str:
        """The line as LaTeX running text (its math in ``$…$``)."""
        return self._shown("latex") or ""

    def __str__(self) -> str:
        return self.text


def expr_line(label: str, expr: sympy.Expr, *, digits: int | None = None) -> Line:
    """``label expr`` with the exact value (and its certified decimal when asked)."""
    if digits is not None and not expr.free_symbols and not expr.is_Integer:
        return Line(label, Approx(Exact(expr), Decimal(certify(expr, digits))))
    return Line(label, Exact(expr))


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
