"""The entries float64 enclosures leave undecided, decided through the Trace.

One Trace per (batch, head) slice, holding only the rows that need it.  An
additive float mask enters the one engine as extra columns: query row r
gets a 1 in column E + r and key j gets m[r, j] / scale there, so that
scale·(q'·k') = scale·q·k + m exactly; −inf entries are the 0/1 mask.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from symattn.floatref.binary import BinaryFormat, round_ball, round_fraction
from symattn.floatref.errors import FloatRefError
from symattn.precision import precisions, undecided


def _exact(x: float) -> str | Fraction:
    """A float's exact value: its terminating decimal (every dyadic has one), which the
    Problem reads on its fast path, or the Fraction when that has over 60 decimals."""
    text = format(Decimal(x), "f")
    whole, _, frac = text.lstrip("-").partition(".")
    return text if len(whole) <= 60 and len(frac) <= 60 else Fraction(x)


def _exact_rows(a) -> list[list[str | Fraction]]:
    return [[_exact(x) for x in row] for row in a.tolist()]


def _trace(pr, pairs: list[tuple[tuple, int]], cols: list[int]):
    """One Trace for query rows (batch index, row) that share K and V (those of the first)."""
    import numpy as np
    import sympy

    from symattn.problem import Problem
    from symattn.trace import Trace

    idx0 = pairs[0][0]
    Q = np.stack([pr.Q[idx][i] for idx, i in pairs])
    K, V = pr.K[idx0], pr.V[idx0][:, cols]                   # only the columns in doubt
    q, k = _exact_rows(Q), _exact_rows(K)
    mask = None if pr.allowed is None else [[int(x) for x in pr.allowed[idx][i].tolist()] for idx, i in pairs]
    if pr.additive is not None:
        add = np.stack([pr.additive[idx][i] for idx, i in pairs])
        if add.any():
            if pr.scale == 0:
                raise FloatRefError("scale is 0 with a non-zero additive mask: give a non-zero scale")
            inv = 1 / (pr.scale if isinstance(pr.scale, sympy.Basic) else
                       sympy.Rational(pr.scale.numerator, pr.scale.denominator))
            for r, row in enumerate(q):
                row.extend(1 if c == r else 0 for c in range(len(pairs)))
            for j, row in enumerate(k):
                row.extend(sympy.Rational(*Fraction(float(add[r, j])).as_integer_ratio()) * inv
                           for r in range(len(pairs)))
    return Trace(Problem(Q=q, K=k, V=_exact_rows(V), scale=pr.scale, mask=mask))


def _digits(fmt: BinaryFormat) -> int:
    return math.ceil(fmt.p * math.log10(2)) + 2


def decide_entry(trace, step: str, i: int, c: int, fmt: BinaryFormat) -> float:
    """The RNE of one exact entry: exactly when it is rational, else by balls of rising precision."""
    known = trace.algebraic_value(step, i, c)
    if known is not None and known.is_Rational:
        return round_fraction(Fraction(int(known.p), int(known.q)), fmt)
    for prec in precisions(_digits(fmt)):
        ball = trace.enclosure(step, i, prec)[c]
        value = round_ball(ball, fmt)
        if value is not None:
            return value + 0.0
    raise undecided(f"{step}[{i}, {c}]", f"the {fmt.name} rounding", prec,
                    "it may sit exactly on a rounding boundary")


def decide_all(pr, w, w_ok, o, o_ok, fmt: BinaryFormat) -> int:
    """Fill every undecided entry in place (arrays (B..., L, ·)); returns how many there were.

    Heads that share K and V (grouped-query heads, broadcast batch dimensions) share one
    Trace: building the exact K and V is most of the arb path's cost."""
    import numpy as np

    from symattn.limits import MAX_SIDE

    groups: dict[tuple, list[tuple]] = {}
    for idx in np.ndindex(*pr.batch):
        if w_ok[idx].all() and o_ok[idx].all():
            continue
        S, E = pr.K.shape[-2], pr.Q.shape[-1]
        if S > MAX_SIDE or E > MAX_SIDE:
            count = int((~w_ok[idx]).sum() + (~o_ok[idx]).sum())
            raise FloatRefError(f"{count} entries of head {list(idx)} lie too near a rounding boundary "
                                f"for float64 and need the arb path, which takes at most {MAX_SIDE:,} keys "
                                f"and E ≤ {MAX_SIDE:,} (MAX_SIDE); this head has S = {S:,}, E = {E:,}")
        key = (hash(pr.K[idx].tobytes()), hash(pr.V[idx].tobytes()))
        while key in groups and not (np.array_equal(pr.K[groups[key][0]], pr.K[idx])
                                     and np.array_equal(pr.V[groups[key][0]], pr.V[idx])):
            key = key + (len(key),)                      # a hash collision: another group
        groups.setdefault(key, []).append(idx)
    count = 0
    chunk = max(1, MAX_SIDE - pr.Q.shape[-1])   # rows per Trace: ≤ MAX_SIDE, and E + rows with a float mask
    for members in groups.values():
        pairs = [(idx, i) for idx in members
                 for i in np.nonzero(~w_ok[idx].all(axis=1) | ~o_ok[idx].all(axis=1))[0].tolist()]
        for start in range(0, len(pairs), chunk):
            count += _decide_rows(pr, pairs[start:start + chunk], w, w_ok, o, o_ok, fmt)
    return count


def _decide_rows(pr, pairs, w, w_ok, o, o_ok, fmt) -> int:
    import numpy as np

    cols = sorted({c for idx, i in pairs for c in np.nonzero(~o_ok[idx][i])[0].tolist()}) or [0]
    trace = _trace(pr, pairs, cols)
    where = {"weights": {j: j for j in range(w.shape[-1])}, "output": {c: k for k, c in enumerate(cols)}}
    count = 0
    for r, (idx, i) in enumerate(pairs):
        for step, values, ok in (("weights", w, w_ok), ("output", o, o_ok)):
            for c in np.nonzero(~ok[idx][i])[0].tolist():
                values[idx + (i, c)] = decide_entry(trace, step, r, where[step][c], fmt)
                ok[idx + (i, c)] = True
                count += 1
    return count
