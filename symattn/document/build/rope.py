"""The RoPE sections of a derivation: Q_rot and K_rot, with one rotated row worked by hand.

Read from the Trace's public API (its problem's ``rope``, the Q/K and Q_rot/K_rot
steps).  The hand form of a row shows what a person writes: each pair, its angle
p·θ_i, the pair rotated as (x·cos φ − y·sin φ, x·sin φ + y·cos φ) and the exact result.
"""

from __future__ import annotations

from typing import Callable

import sympy

from symattn.document import handforms as hf
from symattn.document.blocks import (Chain, Exact, Factor, Int, Neg, Note, Product, Row, Section, Sum,
                                     Sym)
from symattn.trace.steps import spec
from symattn.trace.trace import Trace

SHOWN_PAIRS = 4     # a wider row works its first pairs by hand and says how many are left


PHI = Sym("φ")
THETA_I = Sym("θ", "i")


def _int(k: int) -> Int | Neg:
    return Int(k) if k >= 0 else Neg(Int(-k))


def _term(x: sympy.Expr, trig: sympy.Expr) -> Product:
    return Product((hf.factor(x), Factor(hf.exact(trig))))


def _rotated_pair(x: sympy.Expr, y: sympy.Expr, phi: sympy.Expr) -> tuple[Sum, Sum]:
    """(x·cos φ − y·sin φ, x·sin φ + y·cos φ) as written, cos φ and sin φ evaluated exactly."""
    c, s = sympy.cos(phi), sympy.sin(phi)
    return Sum((_term(x, c), Neg(_term(y, s)))), Sum((_term(x, s), _term(y, c)))


def worked_rotation(trace: Trace, name: str, i: int) -> tuple[Note, ...]:
    """Row i of Q_rot (or K_rot) by hand: one line per pair."""
    p = trace.problem
    rope = p.rope
    assert rope is not None          # Q_rot and K_rot exist only with RoPE
    source = trace.step("Q" if name == "Q_rot" else "K")
    rotated = trace.step(name)
    token = source.row_labels[i]
    position = (rope.positions if name == "Q_rot" else rope.key_positions)[i]
    x_row, r_row = source[i], rotated[i]
    notes: list[Note] = [Note((f"Row '{token}' is at position ", Chain((Sym("p"), _int(position)), ("=",)),
                               "; pair ", Sym("i"), " turns by ",
                               Chain((PHI, Product((Sym("p"), THETA_I))), ("=",)), ":"))]
    for k, (a, b) in enumerate(rope.pairs()[:SHOWN_PAIRS]):
        phi = rope.angle(position, k)
        angle = Chain((PHI, Product((_int(position), Factor(Exact(rope.theta[k])))), hf.exact(phi)),
                      ("=", "="))
        first, second = _rotated_pair(x_row[a], x_row[b], phi)
        pair = Chain((Row((hf.exact(x_row[a]), hf.exact(x_row[b]))), Row((first, second)),
                      Row((hf.exact(r_row[a]), hf.exact(r_row[b])))), ("→", "="))
        notes.append(Note((f"pair ({a}, {b}): ", angle, "; ", pair)))
    left = len(rope.pairs()) - SHOWN_PAIRS
    if left > 0:
        notes.append(Note((f"… and {left} more pair{'s' if left != 1 else ''} the same way.",)))
    return tuple(notes)


def rope_sections(trace: Trace, matrix: Callable, formula: Callable, rows: list[int]) -> list[Section]:
    """The Q_rot and K_rot sections (empty without RoPE); ``matrix`` and ``formula`` are the
    builder's own, so the matrices look like every other step's."""
    p = trace.problem
    if p.rope is None:
        return []
    rope = p.rope
    pairing = ("pairs (0, 1), (2, 3), …" if rope.layout == "interleaved"
               else f"pairs (i, i + {rope.d // 2})")
    given = Row(tuple(Exact(t) for t in rope.theta))
    rule = () if rope.theta_given else (
        Chain((Sym("θ", "i"), Exact(sympy.Pow(rope.base, -2 * sympy.Symbol("i") / rope.d))), ("=",)), ": ")
    intro = Note((f"RoPE, {rope.layout} layout ({pairing}); frequencies ", *rule,
                  Chain((Sym("θ"), given), ("=",)), "."))
    out = []
    # a row at position 0 is not turned at all: work the first chosen row that is
    turned = [i for i in (*rows, *range(p.n)) if p.rope.positions[i] != 0]
    for name, worked in (("Q_rot", (turned or rows)[:1]), ("K_rot", [])):
        children: list = [intro] if name == "Q_rot" else []
        children.append(matrix(name, Sym(name[0], "rot")))
        for i in worked:
            children += worked_rotation(trace, name, i)
        out.append(Section(name, spec(name, p).title, tuple(children), formula=formula(name)))
    return out


__all__ = ["rope_sections", "worked_rotation"]
