"""Variant keys in multi-head files: at the top (every head) and per head (an override).

A variant (``mask``, ``rope``, ``alibi``, ``softcap``, ``sink``, ``tiles``,
``decode``) is a key of one head's :class:`~symattn.problem.problem.Problem`; the one
engine works it.  This module only decides which keys each query head gets:
the top-level value, replaced by the head's own when its ``[[head]]`` table
gives one (``false`` there switches a top-level key off for that head).

ALiBi's slopes per head: ``alibi = "default"`` (or ``{ slope = "default" }``,
to add ``symmetric = true``) gives query head h (counted 1…H here, as the
paper counts) the slope 2^(−8h/H) of Press et al.  For H not a power of two
the paper's reference code (ofirpress/attention_with_linear_biases,
``get_slopes``, copied by BLOOM and most ALiBi code) takes the slopes of the
nearest lower power of two P, then every other slope of 2P:
2^(−8h/P) for h = 1…P, then 2^(−4(2k + 1)/P) for k = 0…H − P − 1.
symattn does the same, so H = 6 gives 1/4, 1/16, 1/64, 1/256, 1/2, 1/8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import sympy

from symattn.errors import ProblemError
from symattn.limits import MAX_ALGEBRAIC_DEGREE
from symattn.problem.keys.table import per_head_keys

__all__ = ["VARIANT_KEYS", "DEFAULT_SLOPES", "alibi_slope_exponents", "alibi_default_slopes",
           "alibi_default_slope_values",
           "head_variants"]

#: The Problem keys a multi-head file may give at the top or per [[head]] (the key table's
#: per-head keys: mask, rope, alibi, softcap, sink, tiles, decode).
VARIANT_KEYS = per_head_keys()

#: The spelling that asks for the paper's slope of each head.
DEFAULT_SLOPES = "default"


def alibi_slope_exponents(heads: int) -> list[Fraction]:
    """e_h with slope_h = 2^(e_h), for query heads 0…H−1 (the reference code's ``get_slopes``)."""
    if heads < 1:
        raise ProblemError(f"ALiBi's default slopes need at least one head, got {heads}")
    power = 1 << (heads.bit_length() - 1)          # the largest power of two ≤ heads
    exponents = [Fraction(-8 * h, power) for h in range(1, power + 1)]
    if power == heads:
        return exponents
    return exponents + [Fraction(-4 * (2 * k + 1), power) for k in range(heads - power)]


def alibi_default_slopes(heads: int) -> list[str]:
    """The slopes as exact text for the safe parser (``"1/4"``, ``"2^(-1/2)"``)."""
    return [_power_of_two(e) for e in alibi_slope_exponents(heads)]


def alibi_default_slope_values(heads: int) -> list[sympy.Expr]:
    """The slopes as exact SymPy numbers (2^e_h)."""
    return [sympy.Integer(2) ** sympy.Rational(e.numerator, e.denominator)
            for e in alibi_slope_exponents(heads)]


def _power_of_two(e: Fraction) -> str:
    if e.denominator == 1:
        return f"1/{2 ** -e.numerator}" if e < 0 else str(2 ** e.numerator)
    return f"2^({e.numerator}/{e.denominator})"


def _default_slope(heads: int, head: int) -> str:
    """Head ``head``'s paper slope, refused past the root cap with the fix named."""
    e = alibi_slope_exponents(heads)[head]
    if e.denominator > MAX_ALGEBRAIC_DEGREE:
        raise ProblemError(
            f"head {head}: alibi = \"default\" with {heads} heads gives the slope 2^({e}), a root of "
            f"index {e.denominator}, over the algebraic-degree cap of {MAX_ALGEBRAIC_DEGREE} "
            "(MAX_ALGEBRAIC_DEGREE): up to 64 heads have default slopes; give this head "
            "alibi = { slope = ... } in its [[head]] table")
    return _power_of_two(e)


def _resolve_alibi(value: object, heads: int, head: int) -> object:
    """``"default"`` / ``{ slope = "default", ... }`` → this head's paper slope."""
    if isinstance(value, str) and value.strip().lower() == DEFAULT_SLOPES:
        return {"slope": _default_slope(heads, head)}
    if isinstance(value, Mapping) and isinstance(value.get("slope"), str) \
            and value["slope"].strip().lower() == DEFAULT_SLOPES:
        return {**value, "slope": _default_slope(heads, head)}
    return value


def head_variants(top: Mapping[str, object], own: Sequence[Mapping[str, object]] | None,
                  heads: int) -> list[dict]:
    """Each query head's variant keys as ``Problem(...)`` takes them: the top-level ones with
    the head's own on top (``false`` drops one), ALiBi's ``"default"`` made the head's slope."""
    unknown = [k for k in top if k not in VARIANT_KEYS]
    if unknown:
        raise ProblemError(f"{unknown[0]!r} is not a variant key; they are {', '.join(VARIANT_KEYS)}")
    if own is not None and len(own) != heads:
        raise ProblemError(f"{len(own)} [[head]] tables of variant keys for {heads} query heads: "
                           "give one per head")
    out = []
    for h in range(heads):
        keys = {k: v for k, v in top.items() if v is not None and v is not False}
        mine = own[h] if own is not None else {}
        strange = [k for k in mine if k not in VARIANT_KEYS]
        if strange:
            raise ProblemError(f"head {h}: {strange[0]!r} is not a variant key; they are "
                               f"{', '.join(VARIANT_KEYS)}")
        for key, value in mine.items():
            if value is False:
                keys.pop(key, None)
            else:
                keys[key] = value
        if "alibi" in keys:
            keys["alibi"] = _resolve_alibi(keys["alibi"], heads, h)
        out.append(keys)
    return out
