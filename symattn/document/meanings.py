"""Step meanings with their math typeset: the words of trace/steps.py's table, with i, j, d_k,
−∞ and p·θ_i as math nodes, for the printers that set math apart (LaTeX, HTML).

Keyed by the meaning's own text, so a variant that rewrites a meaning falls back to plain words
instead of showing stale math; a test checks each entry spells its meaning exactly."""

from __future__ import annotations

import sympy

from symattn.document.blocks import Exact, Math, Product, Sym


def _rope(what: str) -> tuple[str | Math, ...]:
    return (f"each {what} rotated by its position ", Sym("p"), ", pair ", Sym("i"), " by the angle ",
            Product((Sym("p"), Sym("θ", "i"))))


MEANING_MATH: dict[str, tuple[str | Math, ...]] = {
    "how well query i matches key j (dot products)":
        ("how well query ", Sym("i"), " matches key ", Sym("j"), " (dot products)"),
    "scores scaled so they do not grow with the width d_k":
        ("scores scaled so they do not grow with the width ", Sym("d_k")),
    "blocked positions get −∞, so their weight is exactly 0":
        ("blocked positions get ", Exact(sympy.S.NegativeInfinity), ", so their weight is exactly 0"),
    "each query rotated by its position p, pair i by the angle p·θ_i": _rope("query"),
    "each key rotated by its position p, pair i by the angle p·θ_i": _rope("key"),
}


def meaning_parts(meaning: str) -> tuple[str | Math, ...]:
    """The meaning as words and math nodes; () when it has no math to set apart."""
    return MEANING_MATH.get(meaning, ())
