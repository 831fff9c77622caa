"""Benchmark: numpy float64's SDPA backward against floatref's correctly rounded float32 gradients,
side by side in one run (issue 21, scope 7).

Not a test.  Run it from the repository root:

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_floatref_backward.py
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_floatref_backward.py --shape 1 8 1024 64 --skip-plain

Inputs: seeded standard normal float32 Q, K, V, dO of shape (batch, heads, L, E) (S = L, Ev = E),
default scale, no mask.  Methods, each timed in CPU seconds (``time.process_time``, this process;
imports and input making excluded; numpy best of 3, the references once):

* numpy64: the float64 backward from the formulas (softmax with the max subtracted, D = rowsum(dO∘O),
  dS = P∘(dP − D), dQ = s·dS·K, dK = s·dSᵀ·Q, dV = Pᵀ·dO);
* given: ``correctly_rounded_backward(..., dtype="float32", given={"out": O, "lse": lse})`` on a
  float32 kernel's O and lse (float64 enclosures first, floatref/backfast.py; arb balls for the
  entries left, floatref/conditional.py);
* arb: the same with ``fast_path=False`` (every entry by arb balls: the reference before
  backfast.py), where the pairs are within MAX_CONDITIONAL_PAIRS;
* plain: ``correctly_rounded_backward(..., dtype="float32")`` without ``given=``: float64
  enclosures of the softmax and the gradients first (floatref/plainfast.py), double-double ones
  and arb balls for the entries left (floatref/plainrest.py), the engine last (plainref.py);
* engine: the same with ``fast_path=False`` (the exact engine's backward for every entry,
  symattn/trace/backward.py: the plain reference before plainfast.py), up to 64 × 64 per head
  (``--skip-plain`` skips both plain columns).

The load average is printed: 2 cores shared with other work; compare methods within one run.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from symattn.floatref.backward import MAX_CONDITIONAL_PAIRS, correctly_rounded_backward  # noqa: E402


def numpy_backward(Q, K, V, dO):
    s = 1 / np.sqrt(Q.shape[-1])
    t = s * Q @ np.swapaxes(K, -1, -2)
    P = np.exp(t - t.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    O = P @ V  # noqa: E741
    dV = np.swapaxes(P, -1, -2) @ dO
    dS = P * (dO @ np.swapaxes(V, -1, -2) - (dO * O).sum(-1, keepdims=True))
    return s * dS @ K, s * np.swapaxes(dS, -1, -2) @ Q, dV


def kernel_forward(Q, K, V):
    """A float32 kernel's saved O and lse (computed in float64, rounded)."""
    t = Q.astype(np.float64) @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    m = t.max(-1, keepdims=True)
    z = np.exp(t - m).sum(-1)
    lse = np.log(z) + m[..., 0]
    return (np.exp(t - lse[..., None]) @ V).astype(np.float32), lse.astype(np.float32)


def cpu(fn, repeat=1):
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def run(shape, skip_plain: bool) -> None:
    rng = np.random.default_rng(0)
    Q, K, V, dO = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    base = cpu(lambda: numpy_backward(*(a.astype(np.float64) for a in (Q, K, V, dO))), repeat=3)
    out, lse = kernel_forward(Q, K, V)
    given = cpu(lambda: correctly_rounded_backward(Q, K, V, dO, given={"out": out, "lse": lse}))
    row = f"{str(tuple(shape)):>18}  numpy64 {base:9.4f} s  given {given:9.2f} s ({given / base:7.1f}×)"
    if np.prod(shape[:-1]) * shape[-2] <= MAX_CONDITIONAL_PAIRS:
        slow = cpu(lambda: correctly_rounded_backward(Q, K, V, dO, given={"out": out, "lse": lse}, fast_path=False))
        row += f"  arb {slow:9.2f} s ({slow / base:7.0f}×)"
    if not skip_plain:
        plain = cpu(lambda: correctly_rounded_backward(Q, K, V, dO))
        row += f"  plain {plain:9.2f} s ({plain / base:7.1f}×)"
    if not skip_plain and shape[-2] <= 64:
        engine = cpu(lambda: correctly_rounded_backward(Q, K, V, dO, fast_path=False))
        row += f"  engine {engine:9.2f} s ({engine / base:9.0f}×)"
    print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, action="append", metavar=("B", "H", "L", "E"))
    parser.add_argument("--skip-plain", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}; OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    for shape in args.shape or [(1, 1, 16, 16), (1, 1, 32, 32), (1, 1, 64, 64), (1, 1, 128, 64), (1, 1, 512, 64),
                                (1, 8, 1024, 64)]:
        run(tuple(shape), args.skip_plain)


if __name__ == "__main__":
    main()
