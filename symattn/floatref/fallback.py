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


def _trace(pr, idx: tuple, rows: list[int], cols: list[int]):
    import sympy

    from symattn.problem import Problem
    from symattn.trace import Trace

    Q, K, V = pr.Q[idx][rows], pr.K[idx], pr.V[idx][:, cols]   # only the columns in doubt
    q, k = _exact_rows(Q), _exact_rows(K)
    mask = None if pr.allowed is None else [[int(x) for x in r] for r in pr.allowed[idx][rows].tolist()]
    if pr.additive is not None:
        add = pr.additive[idx][rows]
        if add.any():
            if pr.scale == 0:
                raise FloatRefError("scale is 0 with a non-zero additive mask: give a non-zero scale")
            inv = 1 / (sympy.sympify(pr.scale) if isinstance(pr.scale, sympy.Basic) else
                       sympy.Rational(pr.scale.numerator, pr.scale.denominator))
            for r, row in enumerate(q):
                row.extend(1 if c == r else 0 for c in range(len(rows)))
            for j, row in enumerate(k):
                row.extend(sympy.Rational(*Fraction(float(add[r, j])).as_integer_ratio()) * inv
                           for r in range(len(rows)))
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


def decide_slice(pr, idx: tuple, w, w_ok, o, o_ok, fmt: BinaryFormat) -> int:
    """Fill the undecided entries of one slice in place; returns how many there were."""
    import numpy as np

    from symattn.limits import MAX_SIDE

    all_rows = sorted(set(np.nonzero(~w_ok.all(axis=1) | ~o_ok.all(axis=1))[0].tolist()))
    S = w.shape[1]
    if S > MAX_SIDE or pr.Q.shape[-1] > MAX_SIDE:
        undecided_count = int((~w_ok).sum() + (~o_ok).sum())
        raise FloatRefError(f"{undecided_count} entries of head {list(idx)} lie too near a rounding boundary "
                            f"for float64 and need the arb path, which takes at most {MAX_SIDE:,} keys and "
                            f"E ≤ {MAX_SIDE:,} (MAX_SIDE); this head has S = {S:,}, E = {pr.Q.shape[-1]:,}")
    count = 0
    chunk = max(1, MAX_SIDE - pr.Q.shape[-1])   # rows per Trace: ≤ MAX_SIDE, and E + rows with a float mask
    for start in range(0, len(all_rows), chunk):
        count += _decide_rows(pr, idx, all_rows[start:start + chunk], w, w_ok, o, o_ok, fmt)
    return count


def _decide_rows(pr, idx, rows, w, w_ok, o, o_ok, fmt) -> int:
    import numpy as np

    cols = sorted(set(np.nonzero(~o_ok[rows].all(axis=0))[0].tolist())) or [0]
    trace = _trace(pr, idx, rows, cols)
    where = {"weights": {j: j for j in range(w.shape[1])}, "output": {c: k for k, c in enumerate(cols)}}
    count = 0
    for r, i in enumerate(rows):
        for step, values, ok in (("weights", w, w_ok), ("output", o, o_ok)):
            for c in np.nonzero(~ok[i])[0].tolist():
                values[i, c] = decide_entry(trace, step, r, where[step][c], fmt)
                ok[i, c] = True
                count += 1
    return count
