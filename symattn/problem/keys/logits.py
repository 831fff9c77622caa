"""ALiBi and soft-capping: the problem keys that change the softmax's logits.

Plain attention takes the softmax of ``scaled = scale · scores``.  Two keys
add steps between the scaled scores and the softmax (the *logits* are the
last of them):

* ``alibi = { slope = "1/4" }`` (Press et al., *Train Short, Test Long*,
  2022): ``bias[i, j] = −slope · (i − j)`` and ``biased = scaled + bias``.
  Query i sits at position i and key j at position j (also in
  cross-attention, m ≠ n: both sequences count from 0, as the top-left
  causal mask does).  The paper uses it with a causal mask; without one the
  same formula holds for every key, so a future key gets
  ``+slope · (j − i)``: exactly the weights of the reference code's and
  BLOOM's ``slope · j`` (they differ by −slope·i per row, which the softmax
  cancels).  ``symmetric = true`` gives ``−slope · |i − j|`` (encoders).
* ``softcap = c`` (Gemma 2): ``capped = c · tanh(logit / c)``, after the bias
  when both are present.  tanh is increasing, so the row maximum and the tied
  keys are those of the logits before the cap (decided exactly there).

A third, ``sink = s``, adds one more column to every softmax (read here too).

This module validates the keys, says what each entry is exactly, and holds their rows of the
key table (:data:`LOGIT_KEYS`, spliced into :mod:`symattn.problem.keys.table`) and the
Problem attributes they set (:class:`LogitKeys`): a new logit variant's key is this module's
change alone.  The engine (``symattn.engine``) computes with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import sympy

from symattn.errors import ProblemError
from symattn.exact.coerce import to_exact
from symattn.problem.keys.context import KeyContext
from symattn.problem.keys.key import Key, free_symbols
from symattn.problem.matrix import plain_scalar, check_magnitude, check_symbols

ALIBI_KEYS = ("slope", "symmetric", "positions", "key_positions")


@dataclass(frozen=True)
class Alibi:
    """ALiBi's linear bias: ``−slope·(i − j)``, or ``−slope·|i − j|`` when symmetric."""

    slope: sympy.Expr
    symmetric: bool = False
    #: absolute positions of the queries and keys (None: row i and key j sit at i and j); a
    #: KV-cache decode step is one query at position t over the cached keys' positions
    positions: tuple[int, ...] | None = None
    key_positions: tuple[int, ...] | None = None

    def distance(self, i: int, j: int) -> int:
        """The factor the slope multiplies: i − j, or |i − j| when symmetric (by position)."""
        if self.positions is not None:
            i = self.positions[i]
        if self.key_positions is not None:
            j = self.key_positions[j]
        return abs(i - j) if self.symmetric else i - j

    def max_distance(self, n: int, m: int) -> int:
        """The largest |distance| over n queries and m keys."""
        rows = self.positions if self.positions is not None else range(n)
        keys = self.key_positions if self.key_positions is not None else range(m)
        return max(abs(a - b) for a in (min(rows), max(rows)) for b in (min(keys), max(keys)))

    def bias(self, i: int, j: int) -> sympy.Expr:
        return -self.slope * self.distance(i, j)

    @property
    def value(self) -> dict:
        """As ``Problem(alibi=...)`` takes it."""
        out: dict = {"slope": self.slope, "symmetric": self.symmetric}
        if self.positions is not None:
            out["positions"] = list(self.positions)
        if self.key_positions is not None:
            out["key_positions"] = list(self.key_positions)
        return out

    @property
    def slope_rational(self) -> flint.fmpq | None:
        return flint.fmpq(int(self.slope.p), int(self.slope.q)) if self.slope.is_Rational else None


def _number(value: object, where: str, symbols: bool | Sequence[str], example: str) -> sympy.Expr:
    """One exact real number (through the safe parser for text), bounded in size."""
    value = plain_scalar(value)
    if isinstance(value, (Mapping, list, tuple)) or value is None:
        raise ProblemError(f"{where} is {value!r}: give one number such as {example}")
    exact = to_exact(value, where=where, symbols=bool(symbols) or isinstance(value, sympy.Basic))
    if not isinstance(value, sympy.Basic):
        check_symbols(exact, where, symbols)
    if exact.is_real is False or exact.has(sympy.zoo, sympy.oo, sympy.nan):
        raise ProblemError(f"{where} is {exact}, which is not a real number: give a number such "
                           f"as {example}")
    check_magnitude(flint.fmpq(int(exact.p), int(exact.q)) if exact.is_Rational else exact, where)
    return exact


def _positive(exact: sympy.Expr, where: str, why: str) -> None:
    """Refuse a number that is not > 0 (decided exactly; symbols are not decided here)."""
    if exact.free_symbols:
        return
    from symattn.numbers.compare import sign

    if sign(exact) <= 0:
        raise ProblemError(f"{where} is {exact}: {why}")


def read_alibi(value: object, symbols: bool | Sequence[str], n: int = 0, m: int = 0) -> Alibi | None:
    """``{slope = "1/4"}`` or ``{slope = ..., symmetric = true}`` (a bare number is the slope);
    ``positions`` (n of them) and ``key_positions`` (m) place the queries and keys absolutely."""
    if value is None or value is False:
        return None
    if isinstance(value, Alibi):   # built in Python (the alibi-sign mistake flips its slope)
        _positions(value.positions, "positions", n)
        _positions(value.key_positions, "key_positions", m)
        return value
    if not isinstance(value, Mapping):
        value = {"slope": value}
    unknown = [k for k in value if k not in ALIBI_KEYS]
    if unknown:
        raise ProblemError(f"alibi has the unknown key {str(unknown[0])!r}: ALiBi is "
                           "alibi = { slope = \"1/4\" } or { slope = \"1/4\", symmetric = true }")
    if "slope" not in value:
        raise ProblemError("alibi has no slope: give alibi = { slope = \"1/4\" } (the paper's "
                           "slopes are 2^(-8h/H) for head h of H)")
    slope = _number(value["slope"], "alibi slope", symbols, "\"1/4\" or \"2^(-1)\"")
    _positive(slope, "alibi slope", "give a slope > 0 (the bias is −slope·(i − j), so a "
                                    "farther key gets less; the paper's slopes are 2^(-8h/H))")
    symmetric = value.get("symmetric", False)
    if not isinstance(symmetric, bool):
        raise ProblemError(f"alibi symmetric is {symmetric!r}: use true or false")
    found = [_positions(value.get(k), k, size) for k, size in (("positions", n), ("key_positions", m))]
    return Alibi(slope, symmetric, *found)


def _positions(value: object, key: str, size: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool)
                                                      for x in value):
        raise ProblemError(f"alibi {key} is {value!r}: give a list of whole numbers, one per "
                           f"{'query' if key == 'positions' else 'key'}")
    if size and len(value) != size:
        raise ProblemError(f"alibi {key} has {len(value)} entries but there are {size} "
                           f"{'queries' if key == 'positions' else 'keys'}: give one position each")
    if any(abs(x) > 10 ** 9 for x in value):
        raise ProblemError(f"alibi {key} holds a position beyond ±10^9: use smaller positions")
    return tuple(value)


def read_softcap(value: object) -> sympy.Expr | None:
    """The cap c > 0 of ``capped = c·tanh(logit / c)`` (a number: its sign must be known)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ProblemError(f"softcap is {value!r}: give the cap as a number c > 0 such as 50")
    cap = _number(value, "softcap", (), "50 or \"30\"")
    _positive(cap, "softcap", "give a cap c > 0 (capped = c·tanh(logit / c) lies in (−c, c); "
                              "Gemma 2 uses 50)")
    return cap


def capped(cap: sympy.Expr, logit: sympy.Expr) -> sympy.Expr:
    """c·tanh(logit / c), exactly (0 stays 0)."""
    return cap * sympy.tanh(logit / cap)


def read_sink(value: object, symbols: bool | Sequence[str]) -> sympy.Expr:
    """The sink logit: one exact real number of bounded size."""
    value = plain_scalar(value)
    exact = to_exact(value, where="sink", symbols=bool(symbols) or isinstance(value, sympy.Basic))
    if not isinstance(value, sympy.Basic):
        check_symbols(exact, "sink", symbols)
    if exact.is_real is False or exact.has(sympy.zoo, sympy.oo, sympy.nan):
        raise ProblemError(f"sink is {exact}, which is not a real number: give a real "
                           "number such as 0 or -1/2")
    check_magnitude(flint.fmpq(int(exact.p), int(exact.q)) if exact.is_Rational else exact, "sink")
    return exact


def sink_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The ``sink`` key's reader (None: no sink column)."""
    return {"sink": None if value is None else read_sink(value, ctx.symbols)}


def alibi_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The ``alibi`` key's reader (None: no bias)."""
    return {"alibi": read_alibi(value, ctx.symbols, n=ctx.n, m=ctx.m)}


def softcap_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The ``softcap`` key's reader (None: no cap)."""
    return {"softcap": read_softcap(value)}


# -- the keys' rows of the key table and the attributes they set -------------------------------

class LogitKeys:
    """The Problem attributes the logit keys set (``symattn.problem.keys.table.ParsedKeys``
    inherits them)."""

    #: the sink logit s, or None
    sink: sympy.Expr | None
    #: ALiBi's slope and form (:class:`Alibi`), or None
    alibi: Alibi | None
    #: the soft-cap c of capped = c·tanh(logit / c), or None
    softcap: sympy.Expr | None


def _alibi_free(spec: Alibi | None) -> frozenset[sympy.Symbol]:
    return frozenset() if spec is None else frozenset(spec.slope.free_symbols)


def _alibi_written(p: Any) -> object:
    """ALiBi as a version's file writes it: the slope, and the rest when symmetric."""
    alibi = p.alibi
    return None if alibi is None else alibi.value if alibi.symmetric else {"slope": alibi.slope}


#: the rows of the sink, ALiBi and the soft-cap, in the order the unknown-key error lists them
LOGIT_KEYS: tuple[Key, ...] = (
    Key("sink", "a sink logit: one more column in every softmax", read=sink_key, order=4,
        value=lambda p: p.sink, substitute=True, free=free_symbols, variant=True, per_head=5,
        in_versions=2),
    Key("alibi", "ALiBi's linear bias", read=alibi_key, order=5,
        value=lambda p: None if p.alibi is None else p.alibi.value, substitute=True,
        free=_alibi_free, variant=True, per_head=3, in_versions=1, written=_alibi_written),
    Key("softcap", "Gemma 2's soft-cap c·tanh(logit / c)", read=softcap_key, order=6,
        value=lambda p: p.softcap, variant=True, per_head=4, in_versions=3),
)
