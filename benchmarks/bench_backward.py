"""Benchmark: the exact backward pass against the forward of the same problem (issue 20).

Not a test.  Run it from the repository root:

    python benchmarks/bench_backward.py             # n = 128, d = 64, 30 digits
    python benchmarks/bench_backward.py --n 64 --d 32 --digits 100

One seeded random problem (Q, K, V and dO given, two-place decimals in [-1, 1]).  In one
process, alternating, best of ``--repeat``: (a) the forward, weights and output certified to
``--digits`` significant digits; (b) every backward step certified to the same digits, after
the forward of a fresh trace (so (b) counts only the backward).  Prints CPU seconds and the
ratio b / a; the issue's target is a ratio of at most 3.
"""

from __future__ import annotations

import argparse
import random
import time

import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.problem.problem import Problem


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--digits", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    rng = random.Random(1)

    def matrix(rows: int, cols: int) -> list[list[str]]:
        return [[f"{rng.randint(-99, 99) / 100}" for _ in range(cols)] for _ in range(rows)]

    n, d = args.n, args.d
    Q, K, V, G = matrix(n, d), matrix(n, d), matrix(n, d), matrix(n, d)
    mask = "causal" if args.causal else None
    rounding = Rounding(digits=args.digits)
    forward, backward = [], []
    for _ in range(args.repeat):
        start = time.process_time()
        trace = sa.attend(Problem(Q=Q, K=K, V=V, mask=mask))
        trace.step("weights").decimals(rounding)
        trace.step("output").decimals(rounding)
        forward.append(time.process_time() - start)
        trace = sa.attend(Problem(Q=Q, K=K, V=V, mask=mask, backward={"grad_output": G}))
        trace.step("weights").decimals(rounding)
        trace.step("output").decimals(rounding)
        start = time.process_time()
        steps = trace.step_names[trace.step_names.index("lse"):]
        for name in steps:
            trace.step(name).decimals(rounding)
        backward.append(time.process_time() - start)
    a, b = min(forward), min(backward)
    print(f"n = {n}, d = {d}, {args.digits} digits{', causal' if mask else ''}: "
          f"forward {a:.3f} s, backward ({len(steps)} steps) {b:.3f} s, ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
