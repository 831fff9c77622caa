"""The ``tokens`` and ``key_tokens`` keys, and the rule for every name and title a view prints.

Names are printed raw by the terminal, LaTeX and the exports, and written into XML: control
characters, bidirectional overrides and what XML 1.0 forbids are refused when the problem is read."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from symattn.errors import ProblemError
from symattn.problem.keys.context import KeyContext

# control characters (ESC starts terminal escapes) and bidirectional overrides
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# characters XML 1.0 forbids (the exports are XML): noncharacters U+FFFE/U+FFFF, lone surrogates
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def check_printable(text: str, where: str) -> None:
    """Names and titles are printed raw by the views (terminal, LaTeX) and written into XML
    exports: refuse controls and the characters XML 1.0 forbids."""
    bad = _NOT_XML.search(text)
    if bad:
        raise ProblemError(f"{where} contains the character U+{ord(bad.group()):04X} at position "
                           f"{bad.start() + 1}, which XML files cannot hold: use printable text")
    bad = _UNPRINTABLE.search(text)
    if bad:
        raise ProblemError(f"{where} contains the control character {bad.group()!r} at "
                           f"position {bad.start() + 1}: use printable text")


def parse_tokens(name: str, value: object, count: int, default_prefix: str) -> tuple[str, ...]:
    if value is None:
        return tuple(f"{default_prefix}{i}" for i in range(count))
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ProblemError(f"{name} must be a list of names such as [\"I\", \"love\", \"cats\"]")
    names = tuple(value)
    for i, t in enumerate(names):
        if not isinstance(t, str) or not t.strip():
            raise ProblemError(f"{name}[{i}] must be a non-empty string, got {t!r}")
        check_printable(t, f"{name}[{i}]")
        if t.strip().lstrip("-").isdigit():
            raise ProblemError(
                f"{name}[{i}] is {t!r}, which reads as an index: give tokens names that are not numbers"
            )
        if any(c in t for c in "[],"):
            raise ProblemError(f"{name}[{i}] is {t!r}: token names cannot contain '[', ']' or ','")
    if len(names) != count:
        raise ProblemError(f"{name} has {len(names)} names but there are {count} rows to name")
    if len(set(names)) != len(names):
        dup = next(t for t in names if names.count(t) > 1)
        raise ProblemError(f"{name} names {dup!r} twice: every token needs its own name")
    return names


def tokens_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The queries' names (t0, t1, ... unless given)."""
    return {"tokens": parse_tokens("tokens", value, ctx.n, "t")}


def key_tokens_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The keys' names: the queries' own in self-attention of one sequence, else k0, k1, ...
    unless given."""
    if value is None and ctx.same_sequence:
        return {"key_tokens": ctx.parsed["tokens"]}
    return {"key_tokens": parse_tokens("key_tokens", value, ctx.m, "k")}
