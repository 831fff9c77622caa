"""Proofs of facts as a document: one section per fact (its verdict in the title), the
statement, the general argument, the exact checks on the given data, any counterexample.

A :class:`~symattn.facts.proof.Proof` keeps each line as words and math nodes; the
document carries them (:class:`ProofLine`) so every printer typesets the line the
fact wrote in its own format (Unicode text, LaTeX math, MathML), and no format
re-derives anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from symattn.document.blocks import Document, Note, ProofLine, ProofLines, Section
from symattn.document.printers.text import TextPrinter
from symattn.facts.proof import Line, Proof

__all__ = ["build_facts_document", "proof_section", "GENERAL", "CHECKS"]

GENERAL = "In general (verified with SymPy on symbols)"
CHECKS = "On the given data (exact)"


def line_text(parts: tuple) -> str:
    """A proof line as plain text: its words, and its math as the text printer writes it."""
    printer = TextPrinter()
    return "".join(p if isinstance(p, str) else printer.print(p) for p in parts)


def proof_line(line: Line) -> ProofLine:
    if line.tex or line.prose:        # words only, or a line still written twice (text, LaTeX)
        return ProofLine(line.text, line.tex)
    return ProofLine(line_text(line.parts), "", line.parts)


def verdict_title(proof: Proof) -> str:
    """``rows-sum-to-one: ✓ holds`` or ``… ✗ FAILS``."""
    return f"{proof.fact}: " + ("✓ holds" if proof.holds else "✗ FAILS")


def proof_section(proof: Proof) -> Section:
    """One fact as a section (its key is the fact's name, stable across formats)."""
    children: list = [ProofLines("", (proof_line(proof.statement),))]
    for heading, lines in ((GENERAL, proof.general), (CHECKS, proof.checks)):
        if lines:
            children.append(ProofLines(heading, tuple(proof_line(x) for x in lines)))
    if proof.counterexample:
        pairs = ", ".join(f"{k} = {v}" for k, v in proof.counterexample.items())
        children.append(Note((f"Counterexample: {pairs}",)))
    return Section(f"fact-{proof.fact}", verdict_title(proof), tuple(children))


def build_facts_document(proofs: Sequence[Proof], title: str | None = None) -> Document:
    """The proofs as a document: an unnumbered summary (how many hold), then a section per fact."""
    held = sum(p.holds for p in proofs)
    head = f"{held} of {len(proofs)} facts hold" + ("." if held == len(proofs) else " — see ✗ below.")
    summary = Section("summary", "Summary", (Note((head + " Each fact is proved in general where it can "
                                                   "be, and checked exactly on the given data.",)),),
                      numbered=False)
    return Document(title or "Facts about attention", (summary, *(proof_section(p) for p in proofs)),
                    meta={"kind": "facts", "holds": [p.holds for p in proofs]})
