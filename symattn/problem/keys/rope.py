"""RoPE (rotary position embeddings): the problem key, the frequencies, the rotation.

``rope = { base = 10000, layout = "interleaved" | "half", positions = [...],
key_positions = [...], theta = [...] }`` rotates each query and key pair by
an angle p·θ_i before the scores are taken (Su et al., RoFormer).  Pure
functions of exact values: the engine calls :func:`rotate` and
:func:`rotated_scores`, nothing here computes attention.

Conventions (FIELD-NOTES, "RoPE pair layout"):

* ``interleaved`` pairs dimensions (0, 1), (2, 3), … as RoFormer and Meta's
  Llama reference code (``(x0 + i·x1)·e^{i·p·θ}``); ``half`` pairs
  (i, i + d/2) as Hugging Face's ``rotate_half`` (GPT-NeoX style).
* θ_i = base^(−2i/d), exactly (10000^(−1/2) is 1/100); ``theta`` overrides them
  (``["pi/2"]`` makes every cosine 0 or ±1, ``["pi/3"]`` makes them 1/2, ±√3/2).
* Row vectors: a pair (x, y) at position p becomes
  (x·cos φ − y·sin φ, x·sin φ + y·cos φ) with φ = p·θ_i.

Why the scores are written by the angle-difference identity: the entry of
Q_rot·K_rotᵀ for pair i is (x·a + y·b)·cos((p − r)·θ_i) + (x·b − y·a)·sin((p − r)·θ_i)
(q = (x, y) at position p, k = (a, b) at position r).  It is the same number
as the dot product of the rotated rows, but written so that two equal scores
(a query against itself at equal positions, or equal offsets) are equal as
expressions: the row maximum and exact ties are then decided exactly instead
of by cos²φ + sin²φ straddling 1 in a ball forever.  :func:`symattn.numbers.compare.trig_is_zero`
decides the rest exactly (Lindemann–Weierstrass).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sympy

from symattn.errors import ParseError, ProblemError
from symattn.problem.keys.context import KeyContext
from symattn.limits import MAX_ENTRY_MAGNITUDE, MAX_POWER_EXPONENT, MAX_SYMBOLIC_SIDE
from symattn.problem.matrix import ExactMatrix, plain_scalar, sympy_to_fmpq, check_magnitude

__all__ = ["LAYOUTS", "MAX_ROPE_ANGLE", "Rope", "parse_rope", "pairs", "rope_statement", "rope_text", "rotate",
           "rotated_scores"]

LAYOUTS = ("interleaved", "half")
#: the largest |p·θ_i| (radians) a problem may ask cos and sin of: the parser's cap on cos(x)
MAX_ROPE_ANGLE = MAX_POWER_EXPONENT
ROPE_KEYS = ("base", "layout", "positions", "key_positions", "theta")
DEFAULT_BASE = 10000


@dataclass(frozen=True)
class Rope:
    """A validated RoPE specification for one problem (d = d_k)."""

    base: sympy.Expr
    layout: str
    positions: tuple[int, ...]
    key_positions: tuple[int, ...]
    theta: tuple[sympy.Expr, ...]
    theta_given: bool = False
    positions_given: bool = False
    key_positions_given: bool = False

    @property
    def d(self) -> int:
        return 2 * len(self.theta)

    def pairs(self) -> tuple[tuple[int, int], ...]:
        """The dimension pairs rotated together, in frequency order."""
        return pairs(self.d, self.layout)

    def angle(self, position: int, i: int) -> sympy.Expr:
        """φ = p·θ_i, exactly."""
        return sympy.Integer(position) * self.theta[i]

    @property
    def trig_rational(self) -> bool:
        """Every cos and sin used is rational: each θ_i is 0 or a multiple of π/2
        (integer positions), so the rotated matrices stay rational (flint's fast path)."""
        return all(_half_pi_multiple(t) for t in self.theta)

    def as_value(self) -> dict:
        """The key as ``Problem(rope=...)`` takes it (a rebuilt problem keeps it)."""
        out: dict = {"layout": self.layout}
        if self.theta_given:
            out["theta"] = list(self.theta)
        else:
            out["base"] = self.base
        if self.positions_given:
            out["positions"] = list(self.positions)
        if self.key_positions_given:
            out["key_positions"] = list(self.key_positions)
        return out

    def plain_value(self) -> dict:
        """The key as plain TOML values (strings for exact numbers): what a written problem
        file holds, read back to the same Rope."""
        out: dict = {"layout": self.layout}
        if self.theta_given:
            out["theta"] = [sympy.sstr(t) for t in self.theta]
        elif self.base != DEFAULT_BASE:
            out["base"] = int(self.base) if self.base.is_Integer else sympy.sstr(self.base)
        if self.positions_given:
            out["positions"] = list(self.positions)
        if self.key_positions_given:
            out["key_positions"] = list(self.key_positions)
        return out

    def picked(self, rows: Sequence[int], key_rows: Sequence[int]) -> dict:
        """The key for a problem made of some query and key rows (each keeps its position)."""
        return {**self.as_value(), "positions": [self.positions[i] for i in rows],
                "key_positions": [self.key_positions[j] for j in key_rows]}

    def describe(self) -> str:
        """One line for summaries and worksheets."""
        pairing = ("pairs (0, 1), (2, 3), …" if self.layout == "interleaved"
                   else f"pairs (i, i + {self.d // 2})")
        freq = ("frequencies θ_i given" if self.theta_given
                else f"θ_i = {sympy.sstr(self.base)}^(−2i/{self.d})")
        return f"RoPE, {self.layout} layout ({pairing}), {freq}"


def _half_pi_multiple(t: sympy.Expr) -> bool:
    ratio = t / sympy.pi
    return bool(ratio.is_Rational and (2 * ratio).is_Integer)


def pairs(d: int, layout: str) -> tuple[tuple[int, int], ...]:
    """(0, 1), (2, 3), … for interleaved; (0, d/2), (1, d/2 + 1), … for half."""
    if layout == "interleaved":
        return tuple((2 * i, 2 * i + 1) for i in range(d // 2))
    return tuple((i, i + d // 2) for i in range(d // 2))


def default_theta(base: sympy.Expr, d: int) -> tuple[sympy.Expr, ...]:
    """θ_i = base^(−2i/d) for i = 0 … d/2 − 1, exactly."""
    return tuple(sympy.Pow(base, sympy.Rational(-2 * i, d)) for i in range(d // 2))


class HasRope(Protocol):
    """What the RoPE sentences read of a problem (this layer sits below Problem)."""

    @property
    def rope(self) -> Rope | None: ...


def _rope_of(problem: HasRope) -> Rope:
    assert problem.rope is not None, "the RoPE sentences are written only for a problem with rope"
    return problem.rope


def rope_statement(problem: HasRope) -> str:
    """One LaTeX sentence for a worksheet: the layout, the frequencies and the positions."""
    rope = _rope_of(problem)
    pairing = (r"pairs $(0, 1), (2, 3), \dots$" if rope.layout == "interleaved"
               else rf"pairs $(i, i + {rope.d // 2})$")
    theta = ", ".join(sympy.latex(t) for t in rope.theta)
    rule = "" if rope.theta_given else rf"$\theta_i = {sympy.latex(rope.base)}^{{-2i/{rope.d}}}$, so "
    keys = ("" if rope.key_positions == rope.positions else
            rf"; keys at positions ${', '.join(map(str, rope.key_positions))}$")
    return (rf" RoPE ({rope.layout} layout, {pairing}): before the scores, each pair $(x, y)$ of a "
            rf"query or key at position $p$ becomes $(x\cos\varphi - y\sin\varphi,\ "
            rf"x\sin\varphi + y\cos\varphi)$ with $\varphi = p\,\theta_i$; {rule}"
            rf"$\theta = [{theta}]$. Queries at positions ${', '.join(map(str, rope.positions))}$"
            rf"{keys}.")


def rope_text(problem: HasRope) -> str:
    """The same sentence in plain Unicode (HTML exports, where the text is escaped)."""
    from symattn.exact.sympytext import unicode_text

    rope = _rope_of(problem)
    keys = ("" if rope.key_positions == rope.positions else
            "; keys at positions " + ", ".join(map(str, rope.key_positions)))
    return (f"{rope.describe()}: before the scores, each pair (x, y) of a query or key at position p "
            "becomes (x·cos φ − y·sin φ, x·sin φ + y·cos φ) with φ = p·θ_i; θ = ["
            + ", ".join(unicode_text(t) for t in rope.theta) + "]. Queries at positions "
            + ", ".join(map(str, rope.positions)) + keys + ".")


# -- reading the key --------------------------------------------------------------------

def _number(value: object, where: str) -> sympy.Expr:
    from symattn.exact.coerce import to_exact

    value = plain_scalar(value)
    try:
        exact = to_exact(value, where=where, symbols=False)
    except ParseError as exc:
        raise ProblemError(str(exc)) from None
    if exact.free_symbols or exact.is_real is not True:
        raise ProblemError(f"{where} is {exact}: give a real number (no symbols)")
    check_magnitude(sympy_to_fmpq(exact) if exact.is_Rational else exact, where)
    return exact


def _positions(value: object, count: int, where: str, what: str) -> tuple[int, ...]:
    if value is None:
        return tuple(range(count))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ProblemError(f"{where} must be a list of {count} whole numbers (one per {what})")
    if len(value) != count:
        raise ProblemError(f"{where} has {len(value)} entries but there are {count} {what}s: "
                           f"give one position per {what}")
    out = []
    for k, p in enumerate(value):
        p = plain_scalar(p)
        if isinstance(p, sympy.Integer):
            p = int(p)
        if isinstance(p, bool) or not isinstance(p, int):
            raise ProblemError(f"{where}[{k}] is {p!r}: positions are whole numbers such as 0, 1, 2")
        if abs(p) > MAX_ENTRY_MAGNITUDE:
            raise ProblemError(f"{where}[{k}] is {p}, over the magnitude cap of "
                               f"{MAX_ENTRY_MAGNITUDE:,} (MAX_ENTRY_MAGNITUDE)")
        out.append(p)
    return tuple(out)


def parse_rope(value: object, *, n: int, m: int, d_k: int) -> Rope:
    """Validate a ``rope`` key (a mapping or a :class:`Rope`) for n queries, m keys, width d_k."""
    if isinstance(value, Rope):
        value = value.as_value()
    if value is True:
        value = {}
    if not isinstance(value, Mapping):
        raise ProblemError('rope must be a table such as rope = { layout = "interleaved" } '
                           '(keys: ' + ", ".join(ROPE_KEYS) + ")")
    unknown = [k for k in value if k not in ROPE_KEYS]
    if unknown:
        raise ProblemError(f"rope has the unknown key {str(unknown[0])!r}: the keys are "
                           + ", ".join(ROPE_KEYS))
    if d_k % 2:
        raise ProblemError(f"rope needs an even d_k to pair dimensions, but d_k is {d_k}: "
                           "give Q and K (or W_q and W_k) an even number of columns")
    layout = value.get("layout", "interleaved")
    if layout not in LAYOUTS:
        raise ProblemError(f"rope layout is {layout!r}: use \"interleaved\" (pairs (0,1), (2,3), …; "
                           "RoFormer, Meta Llama) or \"half\" (pairs (i, i + d/2); HF rotate_half)")
    if "theta" in value and "base" in value:
        raise ProblemError("rope has both base and theta: theta gives the frequencies itself, "
                           "so drop one of them")
    base = _number(value.get("base", DEFAULT_BASE), "rope base")
    if not base.is_positive:
        raise ProblemError(f"rope base is {base}: give a positive number such as 10000")
    if "theta" in value:
        given = value["theta"]
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            given = [given]
        if len(given) != d_k // 2:
            raise ProblemError(f"rope theta has {len(given)} entries but d_k = {d_k} has "
                               f"{d_k // 2} pairs: give one frequency per pair")
        theta = tuple(_number(t, f"rope theta[{i}]") for i, t in enumerate(given))
    else:
        theta = default_theta(base, d_k)
    positions = _positions(value.get("positions"), n, "rope positions", "query")
    key_positions = _positions(value.get("key_positions"), m, "rope key_positions", "key")
    rope = Rope(base, layout, positions, key_positions, theta, "theta" in value,
                value.get("positions") is not None, value.get("key_positions") is not None)
    _check_angles(rope)
    if not rope.trig_rational:
        sizes = {"queries": n, "keys": m, "d_k": d_k}
        name, size = max(sizes.items(), key=lambda item: item[1])
        if size > MAX_SYMBOLIC_SIDE:
            raise ProblemError(
                f"rope angles p·θ_i whose cosines are not all rational make the scores "
                f"irrational, worked symbolically, which handles at most {MAX_SYMBOLIC_SIDE} "
                f"queries, keys and columns (MAX_SYMBOLIC_SIDE); {name} is {size}: use a smaller "
                "problem or theta = multiples of pi/2")
    return rope


def _check_angles(rope: Rope) -> None:
    """Refuse an angle |p·θ_i| over MAX_ROPE_ANGLE (cos and sin of it are what every view prints)."""
    from symattn.numbers.certify import to_arb

    far = max((abs(p) for p in (*rope.positions, *rope.key_positions)), default=0)
    for i, t in enumerate(rope.theta):
        bound = to_arb(abs(t), 64) * far
        if bound > MAX_ROPE_ANGLE:
            raise ProblemError(
                f"rope angle {far}·θ_{i} is about {bound.mid().str(3, radius=False)} radians, over "
                f"the cap of {MAX_ROPE_ANGLE:,} (MAX_ROPE_ANGLE): use smaller positions or "
                "frequencies (RoPE sees only position differences)")


# -- the rotation -----------------------------------------------------------------------

def _trig(phi: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    return sympy.cos(phi), sympy.sin(phi)


def rotate(matrix: ExactMatrix, positions: Sequence[int], rope: Rope) -> ExactMatrix:
    """Each row p rotated pair by pair: (x, y) ↦ (x·cos φ − y·sin φ, x·sin φ + y·cos φ),
    φ = positions[p]·θ_i (the row vector times R(φ)ᵀ)."""
    rows = matrix.to_sympy().tolist()
    out = []
    for r, row in enumerate(rows):
        new = list(row)
        for i, (a, b) in enumerate(rope.pairs()):
            c, s = _trig(rope.angle(positions[r], i))
            x, y = row[a], row[b]
            new[a] = sympy.expand(x * c - y * s)
            new[b] = sympy.expand(x * s + y * c)
        out.append(new)
    return ExactMatrix.from_sympy(sympy.ImmutableMatrix(out))


def rotated_scores(Q: ExactMatrix, K: ExactMatrix, Q_rot: ExactMatrix, K_rot: ExactMatrix,
                   rope: Rope) -> ExactMatrix:
    """Q_rot·K_rotᵀ, each entry written by the angle-difference identity (module docstring)."""
    if Q_rot.is_rational and K_rot.is_rational:
        return Q_rot.matmul(K_rot, transpose_other=True)
    q, k = Q.to_sympy(), K.to_sympy()
    trig = {}
    out = []
    for r in range(q.rows):
        row = []
        for c in range(k.rows):
            total = []
            for i, (a, b) in enumerate(rope.pairs()):
                offset = rope.positions[r] - rope.key_positions[c]
                if (offset, i) not in trig:
                    trig[offset, i] = _trig(rope.angle(offset, i))
                cos, sin = trig[offset, i]
                x, y, u, v = q[r, a], q[r, b], k[c, a], k[c, b]
                total.append((x * u + y * v) * cos + (x * v - y * u) * sin)
            row.append(sympy.expand(sympy.Add(*total)))
        out.append(row)
    return ExactMatrix.from_sympy(sympy.ImmutableMatrix(out))


def rope_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The validated RoPE key (None: no rotation)."""
    return {"rope": None if value is None else parse_rope(value, n=ctx.n, m=ctx.m, d_k=ctx.d_k)}
