"""Benchmark: certification cost against the magnitude of the scores (issue 9 item 2).

Not a test.  Run it from the repository root:

    python benchmarks/bench_magnitude.py                 # magnitudes 10^1 ... 10^3000
    python benchmarks/bench_magnitude.py --max-exp 300   # a shorter sweep

For each k it builds two problems in a fresh subprocess and certifies EVERY
step (Q K V scores scaled shifted exp row_sum weights output) at 3 and 30
significant digits and at 2 decimal places (the LaTeX heat map's rounding):

* ``Q = [[10^k, 1], [1, 2]]``, ``K = [[1, 0], [0, 1], [1, 1]]``,
  ``V = [[1, 0], [2, 0], [3, 5]]`` with the default scale 1/√2: a weight
  of about e^(-0.7·10^k), and an output column whose exact value is a
  tiny positive number;
* the lesson with ``scale = 10^k``.

It prints wall time and peak RSS (the child's ru_maxrss) per k, and checks
one tiny weight's decimal exponent against mpmath.  The problems are built
small and then given the large entry, bypassing the loader's caps
(symattn.limits: |scaled score| <= 10^12) on purpose: this measures the
numbers layer alone, past the caps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import sympy
import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.problem.matrix import ExactMatrix
k = int(sys.argv[1]); kind = sys.argv[2]
big = sympy.Integer(10) ** k
t0 = time.perf_counter()
# Built small, then made large: the problem loader's caps (symattn.limits) are
# bypassed on purpose, to measure the numbers layer alone.
if kind == "scores":
    p = sa.Problem(Q=[[1, 1], [1, 2]], K=[[1, 0], [0, 1], [1, 1]], V=[[1, 0], [2, 0], [3, 5]])
    p.inputs["Q"] = ExactMatrix.from_sympy(sympy.ImmutableMatrix([[big, 1], [1, 2]]))
else:
    p = sa.load_example("i-love-cats")
    p.scale = big
trace = sa.Trace(p)
texts = {}
for rounding in (Rounding(digits=3), Rounding(digits=30), Rounding(places=2)):
    for step in trace.step_names:
        rows = trace.step(step).decimals(rounding)
        texts[f"{step}@{rounding}"] = [[str(d) for d in row] for row in rows]
elapsed = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(json.dumps({"seconds": elapsed, "rss_mb": rss,
                  "weight": texts["weights@3 significant digits"][0][1]}))
"""


def run(k: int, kind: str, timeout: float) -> dict:
    start = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(k), kind], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {out.returncode}: {last[:100]}"}
    result = json.loads(out.stdout)
    result["wall"] = time.perf_counter() - start
    return result


def mp_exponent(k: int) -> str:
    """The weight e^(-10^k/√2)/(1 + e^(-1/√2) + e^(-10^k/√2)) to 3 digits, from mpmath."""
    import mpmath
    with mpmath.workdps(k + 40):
        s2 = mpmath.sqrt(2)
        w = mpmath.exp(-mpmath.mpf(10) ** k / s2) / (1 + mpmath.exp(-1 / s2) + mpmath.exp(-mpmath.mpf(10) ** k / s2))
        e = int(mpmath.floor(mpmath.log10(w)))
        return f"{int(mpmath.nint(w / mpmath.mpf(10) ** (e - 2)))}e{e - 2}"


def as_digits(text: str) -> str:
    """'1.79e-307093' or '0.000569' as '179e-307095' / '569e-6' (3 digits)."""
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    return f"{digits}e{int(exp or 0) - len(frac)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-exp", type=int, default=3000)
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    ks = [k for k in (1, 3, 6, 9, 10, 11, 12, 15, 20, 30, 100, 300, 1000, 3000) if k <= args.max_exp]
    print(f"{'k':>5}  {'scores 10^k: s':>14}  {'MB':>5}  {'scale 10^k: s':>13}  {'MB':>5}  weights[0, 1] (3 digits)")
    for k in ks:
        a, b = run(k, "scores", args.timeout), run(k, "scale", args.timeout)
        cells = []
        for r in (a, b):
            cells += [f"{r['seconds']:.3f}", str(r["rss_mb"])] if "error" not in r else [r["error"], ""]
        weight = a.get("weight", "")
        if weight and k <= 300:
            ref = mp_exponent(k)
            weight += "  (mpmath " + ("agrees)" if ref == as_digits(weight) else f"says {ref}!)")
        print(f"{k:>5}  {cells[0]:>14}  {cells[1]:>5}  {cells[2]:>13}  {cells[3]:>5}  {weight}")


if __name__ == "__main__":
    main()
