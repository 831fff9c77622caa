"""Proof objects: what a fact says, why it holds, and what was checked.

A :class:`Proof` is data, not prose: its lines carry both a text and a LaTeX
form, so the same proof renders in a terminal, in a notebook
(``_repr_latex_``) and as JSON, and a failing check keeps its
counterexample for the caller to inspect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from symattn.certify import certify
from symattn.render.texutil import tex_escape


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
        """A plain-text rendering (what ``symattn facts`` prints)."""
        mark = "✓ holds" if self.holds else "✗ FAILS"
        out = [f"{self.fact}: {mark}", f"  {self.statement.text}"]
        if self.general:
            out.append("  In general (verified with SymPy on symbols):")
            out += [f"    {line.text}" for line in self.general]
        if self.checks:
            out.append("  On the given data (exact):")
            out += [f"    {line.text}" for line in self.checks]
        if self.counterexample:
            pairs = ", ".join(f"{k} = {v}" for k, v in self.counterexample.items())
            out.append(f"  Counterexample: {pairs}")
        return "\n".join(out) + "\n"

    def latex(self) -> str:
        """A LaTeX fragment (itemize lists of display-math lines)."""
        mark = r"holds" if self.holds else r"\textbf{fails}"
        out = [rf"\paragraph{{\texttt{{{tex_escape(self.fact)}}}: {mark}.}} ${self.statement.latex}$"]
        for title, lines in (("In general (SymPy, on symbols)", self.general),
                             ("On the given data (exact)", self.checks)):
            if lines:
                out.append(rf"\par {title}:")
                out.append(r"\begin{itemize}")
                out += [rf"  \item ${line.latex}$" if line.latex else rf"  \item {tex_escape(line.text)}"
                        for line in lines]
                out.append(r"\end{itemize}")
        if self.counterexample:
            pairs = ", ".join(f"{k} = {v}" for k, v in self.counterexample.items())
            out.append(rf"\par Counterexample: \texttt{{{tex_escape(pairs)}}}")
        return "\n".join(out) + "\n"

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
