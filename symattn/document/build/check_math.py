"""The math of a check report as nodes: exact values in their hand forms, certified roundings,
and the formulas the mistakes are named by.

A verdict's message is one line of text (the terminal and ``--json`` print it as it is); the
values in it are data the verdict keeps (each entry's cell and written precision).  So the
builder does not parse numbers out of prose: it rebuilds each value as a node from that data
(``notation.hand`` for e^(−2/√3)/(e^(−2/√3) + 2), a ``Decimal`` for a certified rounding) and
puts it where the message has the same value's text, and the mistakes' formulas (√d_k, Q·Kᵀ)
come from one table whose nodes print, as text, exactly as the catalogue writes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from symattn.check.verdict import EntryVerdict, FigureVerdict
from symattn.notation.hand import hand
from symattn.notation.nodes import (Approx, Decimal, Exp, Frac, Func, Int, Math, Neg, Product, Seq, Sqrt,
                                    Sum, Sup, Sym, Words)
from symattn.numbers.certify import Rounding
from symattn.numbers.masked import NEG_INF, Masked

__all__ = ["FORMULAS", "expected_math", "says"]

_SHOW = Rounding(digits=6)         # as check.verdict shows an exact value in a message
_HAND_LIMIT = 120                  # a longer value is cut in the message: it stays text there
_LIST = 12                         # values a figure's message lists (check.diagnosis)


def _T(x: Math) -> Sup:
    return Sup(x, Sym("T"))


def _dot(*factors: Math) -> Product:
    return Product(factors)


_Q, _K, _V, _P, _dO, _dS = Sym("Q"), Sym("K"), Sym("V"), Sym("P"), Sym("dO"), Sym("dS")

#: the formulas in the mistakes' descriptions (check/mistakes), each as the node that prints,
#: as text, exactly as the key (a test holds every entry to that)
FORMULAS: dict[str, Math] = {
    "√d_k": Sqrt(Sym("d_k")),
    "softmax(Q·Kᵀ)": Func("softmax", _dot(_Q, _T(_K))),
    "Q·Kᵀ": _dot(_Q, _T(_K)), "K·Qᵀ": _dot(_K, _T(_Q)),
    "−∞": Neg(Sym("∞")),
    "p·θ_i": _dot(Sym("p"), Sym("θ", "i")),
    "θ_i·π/180": _dot(Sym("θ", "i"), Frac(Sym("π"), Int(180))),
    "c·tanh(x/c)": _dot(Sym("c"), Func("tanh", Frac(Sym("x"), Sym("c")))),
    "e^(m_old − m_new)": Exp(Sum((Sym("m_old"), Neg(Sym("m_new"))))),
    "dO·Vᵀ": _dot(_dO, _T(_V)), "Pᵀ·dO": _dot(_T(_P), _dO), "dSᵀ·Q": _dot(_T(_dS), _Q),
    "dO·V": _dot(_dO, _V), "P·dO": _dot(_P, _dO), "dS·Q": _dot(_dS, _Q),
}


def _decimal(e: EntryVerdict) -> Math | None:
    """The entry's certified rounding at its written precision, as a node."""
    if e.cell is None or e.rounding is None:
        return None
    r = e.cell.rounded(e.rounding)
    return Decimal(NEG_INF) if isinstance(r, Masked) else Decimal(r)


def _shown(e: EntryVerdict) -> tuple[str | Math, ...] | None:
    """The exact value as the message shows it (``check.verdict._show``), as parts."""
    cell = e.cell
    if cell is None or not e.shown:
        return None
    if cell.neg_inf:
        return (Neg(Sym("∞")), " (a masked position)")
    if len(cell.hand) > _HAND_LIMIT or cell.hand.startswith("an exact number"):
        return None
    exact = hand(cell.exact)
    if cell.exact.is_Rational and len(cell.hand) < 20:
        return (exact,)
    rounded = cell.rounded(_SHOW)
    return (Approx(exact, Decimal(rounded)),) if not isinstance(rounded, Masked) else None


def expected_math(v: FigureVerdict) -> Math | None:
    """The Expected column as math: one rounding, or the entries' roundings in a row."""
    values = [_decimal(e) for e in v.entries]
    if not values or any(x is None for x in values):
        return None
    if v.shape is None or v.shape == (1, 1):
        return values[0]
    return Seq(tuple(x for x in values if x is not None))


def _values(entries: Sequence[EntryVerdict]) -> Math | None:
    """A figure's list of right values (``check.diagnosis._values``), as math."""
    shown = [_decimal(e) for e in entries[:_LIST]]
    if any(x is None for x in shown):
        return None
    items = [x for x in shown if x is not None]
    return Seq(tuple(items) + ((Words("…"),) if len(entries) > _LIST else ()))


def _replacements(v: FigureVerdict) -> dict[str, tuple[str | Math, ...]]:
    """Text in the message → the same thing as words and nodes (the words around a value are
    part of the key, so a bare number that only looks like a value is left alone)."""
    found: dict[str, tuple[str | Math, ...]] = {}
    for e in v.entries:
        shown = _shown(e)
        if shown is not None:
            for before in ("= ", "value is ", ": "):
                found.setdefault(before + e.shown, (before, *shown))
        rounded = _decimal(e)
        if rounded is not None and e.expected:
            found.setdefault(f"rounds to {e.expected}", ("rounds to ", rounded))
    values = _values(v.entries) if len(v.entries) > 1 else None
    if values is not None:
        listed = ", ".join(e.expected or "" for e in v.entries[:_LIST]) + (", …" if len(v.entries) > _LIST else "")
        found.setdefault(f"right ({listed})", ("right (", values, ")"))
        found.setdefault(f"values are {listed}", ("values are ", values))
    for text, node in FORMULAS.items():
        found.setdefault(text, (node,))
    return found


def _split(text: str, table: dict[str, tuple[str | Math, ...]]) -> list[str | Math]:
    if not table:
        return [text]
    keys = sorted(table, key=len, reverse=True)      # the longest match wins at a position
    pattern = re.compile("|".join(f"{re.escape(k)}(?![\\w.])" for k in keys))
    parts: list[str | Math] = []
    at = 0
    for match in pattern.finditer(text):
        parts.append(text[at:match.start()])
        parts.extend(table[match.group(0)])
        at = match.end()
    parts.append(text[at:])
    return parts


def _joined(parts: Iterable[str | Math]) -> tuple[str | Math, ...]:
    out: list[str | Math] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    return tuple(out)


def says(v: FigureVerdict) -> tuple[str | Math, ...]:
    """The verdict's message as words and math nodes (empty when it holds no math)."""
    parts = _joined(_split(v.message, _replacements(v)))
    return () if all(isinstance(p, str) for p in parts) else parts
