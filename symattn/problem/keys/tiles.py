"""The ``tiles`` key: FlashAttention's key blocks, ``tiles = B`` or ``tiles = [split points]``.

Plain values in, the blocks [start, end) out; the online-softmax steps are trace/online.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from symattn.errors import ProblemError
from symattn.problem.keys.context import KeyContext

#: online steps hold about n·blocks·m exponentials: beyond this many the problem is refused
MAX_ONLINE_TERMS = 250_000

_TILES_HELP = ("give tiles = B (keys per block, B ≥ 1) or tiles = [split points] "
               "(increasing key indices between 1 and m − 1, e.g. [2])")


def parse_tiles(value: object, *, n: int, m: int, has_symbols: bool) -> tuple[tuple[int, int], ...]:
    """The key blocks [start, end) of ``tiles = B`` or ``tiles = [split points]`` over m keys
    (n queries: the online steps' size is capped)."""
    if isinstance(value, bool):
        raise ProblemError(f"tiles is {value!r}: {_TILES_HELP}")
    if isinstance(value, int):
        if value < 1:
            raise ProblemError(f"tiles is {value}: a block holds at least one key; {_TILES_HELP}")
        blocks = tuple((s, min(s + value, m)) for s in range(0, m, value))
    elif isinstance(value, Sequence) and not isinstance(value, str):
        points = list(value)
        for k, x in enumerate(points):
            if isinstance(x, bool) or not isinstance(x, int):
                raise ProblemError(f"tiles[{k}] is {x!r}: split points are whole numbers; {_TILES_HELP}")
            if not 0 < x < m:
                raise ProblemError(f"tiles[{k}] is {x}, outside 1..{m - 1}: a split point is the "
                                   f"first key of a block after the first ({m} keys)")
            if k and x <= points[k - 1]:
                raise ProblemError(f"tiles[{k}] is {x} after {points[k - 1]}: split points must "
                                   "increase, e.g. [2, 5]")
        edges = [0, *points, m]
        blocks = tuple(zip(edges[:-1], edges[1:]))
    else:
        raise ProblemError(f"tiles is {value!r}: {_TILES_HELP}")
    if has_symbols:
        raise ProblemError("tiles needs numbers: the running maximum of each block must be decided, "
                           "and symbols leave it open; substitute values first (problem.subs)")
    terms = n * m * len(blocks)
    if terms > MAX_ONLINE_TERMS:
        raise ProblemError(f"tiles: {n} queries × {m} keys × {len(blocks)} blocks is "
                           f"{terms:,} exact terms, over the cap of {MAX_ONLINE_TERMS:,} "
                           "(MAX_ONLINE_TERMS): use larger blocks or a smaller problem")
    return blocks


def tiles_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The key blocks (None: no online softmax) and the key as given (None, B or the points)."""
    blocks = None if value is None else parse_tiles(value, n=ctx.n, m=ctx.m, has_symbols=ctx.has_symbols)
    return {"tiles": blocks, "tiles_value": list(value) if isinstance(value, Sequence) else value}
