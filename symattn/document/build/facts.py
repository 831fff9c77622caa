"""Proofs of facts as a document: one section per fact (its verdict in the title), the
statement, the general argument, the exact checks on the given data, any counterexample.

A :class:`~symattn.facts.proof.Proof` keeps each line in two forms (text and
LaTeX); the document carries both (:class:`ProofLine`) so every printer shows
the line the fact wrote, and no format re-derives anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from symattn.document.blocks import Document, Note, ProofLine, ProofLines, Section
from symattn.facts.proof import Proof

__all__ = ["build_facts_document", "proof_section", "GENERAL", "CHECKS"]

GENERAL = "In general (verified with SymPy on symbols)"
CHECKS = "On the given data (exact)"


def verdict_title(proof: Proof) -> str:
    """``rows-sum-to-one: ✓ holds`` or ``… ✗ FAILS``."""
    return f"{proof.fact}: " + ("✓ holds" if proof.holds else "✗ FAILS")


def proof_section(proof: Proof) -> Section:
    """One fact as a section (its key is the fact's name, stable across formats)."""
    children: list = [ProofLines("", (ProofLine(proof.statement.text, proof.statement.latex),))]
    for heading, lines in ((GENERAL, proof.general), (CHECKS, proof.checks)):
        if lines:
            children.append(ProofLines(heading, tuple(ProofLine(x.text, x.latex) for x in lines)))
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
