"""The plain backward reference (no ``given=``) by enclosures first, the exact engine last.

Three tiers, each entry decided by the first that proves its rounding (docs/floatref.md, "The
fast plain backward"): float64 enclosures of the softmax and the gradients
(:mod:`symattn.floatref.plainfast`, then backfast's exact-sum refinement), double-double
enclosures of P and O with one arb ball per entry left (:mod:`symattn.floatref.plainrest`), and
the engine's exact trace of the slice for what is still left (a value exactly on a rounding
boundary, scores out of the split product's range).  Targets narrower than float64 only.
"""

from __future__ import annotations

from typing import Any, Callable

from symattn.floatref.binary import BinaryFormat
from symattn.floatref.errors import FloatRefError

#: the extra outputs on request: name → the engine's step
EXTRAS = {"dS": "d_logits", "dP": "d_weights", "D": "row_dot"}
_STEPS = {"dQ": "d_Q", "dK": "d_K", "dV": "d_V", **EXTRAS}
#: entries the float64 enclosures may leave for the double-double and arb tiers
MAX_LEFT = 1 << 15
#: the most (query, key) pairs of one slice the engine's exact trace takes as the last tier
MAX_TRACE_PAIRS = 1 << 16
#: the precisions of the trace's balls, doubling (backward.py's)
_PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _np():
    import numpy

    return numpy


def plain_backward(Q: Any, K: Any, V: Any, dO: Any, fmt: BinaryFormat, sdpa: dict, group: int,
                   extras: tuple, make_trace: Callable[[tuple, list], Any]) -> dict[str, Any]:
    """{dQ, dK, dV, lse, condition, scales, balls, and the extras}: every entry correctly
    rounded.  ``make_trace(idx, rows)``: the engine's trace of slice ``idx`` on those query rows."""
    from symattn.floatref.lse import log_sum_exp
    from symattn.floatref.lsefast import decide_from_sums, decide_lse
    from symattn.floatref.plainfast import decide_plain
    from symattn.floatref.plainrest import finish
    from symattn.floatref.plaintight import decide_tight
    from symattn.floatref.sdpa import normalise

    np = _np()
    pr = normalise(Q, K, V, **sdpa)
    dO64 = np.asarray(dO, dtype=np.float64)
    kv_batch = pr.batch[:-1] + (pr.batch[-1] // group,) if group > 1 else pr.batch
    known, (condition, scales), zero, sums = decide_plain(pr, dO64, fmt, group, kv_batch, extras, decide_tight)
    left = sum(int((~ok).sum()) for _, ok in known.values())
    if left > MAX_LEFT:
        raise FloatRefError(f"{left:,} gradient entries lie too near a {fmt.name} rounding boundary for float64 "
                            f"to decide, over the cap of {MAX_LEFT:,} decided by double-double and arb "
                            "(plainref.MAX_LEFT): check fewer heads or rows at a time")
    if left:
        finish(pr, dO64, fmt, group, kv_batch, known, zero)
    _last_tier(pr, dO64, known, group, fmt, make_trace)

    def decided(idx: tuple) -> tuple[Any, Any, Any]:
        if idx not in sums:
            return decide_lse(pr, idx, fmt)
        c, Z, RZ, rows = sums[idx]
        return decide_from_sums(c, Z, RZ, rows, fmt)

    lse = log_sum_exp(pr, fmt, decided)[0]
    if group > 1:
        shape = kv_batch + (group,)
        scales = {**scales, **{k: scales[k].reshape(shape + scales[k].shape[-2:]).sum(axis=-3)
                               for k in ("dK", "dV")}}
    out = {name: values for name, (values, _) in known.items()}
    out.update(lse=lse, condition=condition, scales=scales,
               balls=_Balls(pr, dO64, zero, group, make_trace))
    return out


def _members(idx: tuple, group: int) -> list[tuple]:
    return [idx[:-1] + (idx[-1] * group + k,) for k in range(group)] if group > 1 else [idx]


def _last_tier(pr: Any, dO: Any, known: dict, group: int, fmt: BinaryFormat, make_trace: Callable) -> None:
    """The entries both enclosures left, from the engine's exact traces of their slices (dP
    exactly, rows with no key as zeros)."""
    from symattn.floatref.plainrest import exact_dp

    np = _np()
    L, S = pr.Q.shape[-2], pr.K.shape[-2]
    live = np.ones(pr.batch + (L,), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed).any(axis=-1)
    traces: dict[tuple, tuple[Any, list]] = {}

    def trace(idx: tuple) -> tuple[Any, list]:
        if idx not in traces:
            if L * S > MAX_TRACE_PAIRS:
                raise FloatRefError(f"an entry of slice {list(idx)} sits too near a {fmt.name} rounding boundary for "
                                    f"the enclosures, and its {L:,} × {S:,} pairs are over the cap of "
                                    f"{MAX_TRACE_PAIRS:,} for the exact engine (plainref.MAX_TRACE_PAIRS): "
                                    "check fewer rows at a time")
            rows = np.nonzero(live[idx])[0].tolist()
            traces[idx] = (make_trace(idx, rows), rows)
        return traces[idx]

    if "dP" in known:
        exact_dp(pr, dO, known["dP"], fmt)
    for name in ("dQ", "dS", "D"):          # a row with no key: exact zeros (it contributes nothing)
        if name in known:
            dead = ~live if name == "D" else (~live)[..., None] & ~known[name][1]
            known[name][0][dead], known[name][1][dead] = 0.0, True
    for name, (values, ok) in known.items():
        for at in {tuple(int(x) for x in k[:-2 if name != "D" else -1]) for k in np.argwhere(~ok)}:
            owners = [at] if name in ("dQ", "dS", "dP", "D") else _members(at, group)
            parts = [trace(h) for h in owners]
            here = values[at], ok[at]
            entries: dict[int, list[int]] = {}
            for k in np.argwhere(~here[1]):
                r, c = (int(k[0]), 0) if name == "D" else (int(k[0]), int(k[1]))
                row = r if name in ("dK", "dV") else parts[0][1].index(r)
                entries.setdefault(row, []).append(c)
            got = rounded_entries([t for t, _ in parts], _STEPS[name], entries, fmt)
            for row, cols in entries.items():
                r = row if name in ("dK", "dV") else parts[0][1][row]
                for c, y in zip(cols, got[row]):
                    if name == "D":
                        here[0][r], here[1][r] = y, True
                    else:
                        here[0][r, c], here[1][r, c] = y, True


class _Balls:
    """``balls(name, index, prec)`` of the fast path: double-double and arb (plainrest), else the trace."""

    def __init__(self, pr: Any, dO: Any, zero: Any, group: int, make_trace: Callable) -> None:
        self.pr, self.dO, self.zero, self.group, self.make_trace = pr, dO, zero, group, make_trace
        self.heads: dict[tuple, Any] = {}

    def __call__(self, name: str, index: tuple, prec: int) -> Any:
        import flint

        from symattn.floatref.plainrest import PREC, entry_ball
        from symattn.floatref.rows import _scale_ball
        from symattn.numbers.precision import precision

        np = _np()
        idx, r, c = tuple(index[:-2]), int(index[-2]), int(index[-1])
        owners = [idx] if name == "dQ" else _members(idx, self.group)
        with precision(max(prec, PREC)):
            s = _scale_ball(self.pr.scale)
            total: Any = flint.arb(0)
            for h in owners:
                if h not in self.heads:
                    from symattn.floatref.plainrest import _Rows

                    self.heads[h] = _Rows(self.pr, h, self.dO, np.arange(self.pr.Q.shape[-2]), self.zero[h])
                ball = entry_ball(self.heads[h], name, r, c, s)
                if ball is None:
                    return self._trace_ball(name, index, prec)
                total = total + ball
        return +total

    def _trace_ball(self, name: str, index: tuple, prec: int) -> Any:
        np = _np()
        idx, r, c = tuple(index[:-2]), int(index[-2]), int(index[-1])
        owners = [idx] if name == "dQ" else _members(idx, self.group)
        L = self.pr.Q.shape[-2]
        total = 0
        for h in owners:
            live = np.ones(L, dtype=bool) if self.pr.allowed is None else np.asarray(self.pr.allowed[h]).any(axis=-1)
            rows = np.nonzero(live)[0].tolist()
            if name == "dQ" and r not in rows:
                return 0
            t = self.make_trace(h, rows)
            total = t.enclosure(_STEPS[name], rows.index(r) if name == "dQ" else r, prec)[c] + total
        return total


def rounded_entries(traces: list, name: str, entries: dict[int, list[int]],
                    fmt: BinaryFormat) -> dict[int, list[float]]:
    """The entries {row: columns} of the sum of one step over several traces, each rounded to
    ``fmt`` and proved (:func:`rounded_sum`): {row: values in the columns' order}."""
    from fractions import Fraction

    from symattn.floatref.binary import round_fraction
    from symattn.floatref.conditional import round_balls
    from symattn.numbers.precision import precision


    out: dict[int, list[float]] = {}
    for i, want in entries.items():
        values = dict.fromkeys(want, 0.0)
        pending = list(want)
        for prec in _PRECISIONS:
            with precision(prec):     # the balls are summed and their ends taken at this precision
                parts = [t.enclosure(name, i, prec) for t in traces]
                balls = [sum(p[j] for p in parts[1:]) + parts[0][j] if len(parts) > 1 else parts[0][j]
                         for j in pending]
                left = []
                for j, y in zip(pending, round_balls(balls, fmt)):
                    if y is None:
                        left.append(j)
                    else:
                        values[j] = y
            pending = left
            if not pending:
                break
        for j in pending:
            exact = sum((t.step(name)[i, j] for t in traces[1:]), traces[0].step(name)[i, j])
            if not exact.is_Rational:          # e.g. D = Σ_j P_ij·c with Σ_j P_ij = 1 left unsimplified
                import sympy

                exact = sympy.cancel(sympy.together(exact))
            if not exact.is_Rational:
                raise FloatRefError(f"{name}[{i}, {j}] sits on a {fmt.name} rounding boundary as far as "
                                    f"{_PRECISIONS[-1]} bits show, and is not a rational number: it cannot "
                                    "be rounded here")
            values[j] = round_fraction(Fraction(int(exact.p), int(exact.q)), fmt)
        out[i] = [values[j] for j in want]
    return out
