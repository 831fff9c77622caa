"""Benchmark: numpy float64 SDPA against floatref.correctly_rounded (float32), side by side.

Not a test.  Run it from the repository root:

    python benchmarks/bench_floatref.py                 # (1, 8, 1024, 64) and (1, 1, 4096, 128)
    python benchmarks/bench_floatref.py --shape 1 8 256 64     # any (batch, heads, L, E)

Each (shape, method) runs in a fresh subprocess (imports excluded from the
time, peak RSS per run from ru_maxrss).  Inputs: seeded standard normal
float32 Q, K, V (L = S, Ev = E), default scale, no mask.  numpy: the
max-subtraction softmax in float64, best of 3.  correctly_rounded: one run;
its count of entries that needed the arb path is printed.  enclose64: the
fast path alone (float64 enclosures of every head and their rounding; the
"arb entries" column then counts the undecided entries).  torch SDPA is
timed too when torch is importable.  The load average is printed (2 cores
shared with other work: times vary).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SHAPES = [(1, 8, 1024, 64), (1, 1, 4096, 128)]


def _inputs(shape):
    import numpy as np

    rng = np.random.default_rng(0)
    b, h, n, e = shape
    return tuple(rng.standard_normal((b, h, n, e)).astype(np.float32) for _ in range(3))


def _numpy_sdpa(Q, K, V):
    import numpy as np

    q, k, v = (x.astype(np.float64) for x in (Q, K, V))
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    a = np.exp(s - s.max(axis=-1, keepdims=True))
    a /= a.sum(axis=-1, keepdims=True)
    return a, a @ v


def one(method: str, shape) -> dict:
    Q, K, V = _inputs(shape)
    extra = {}
    if method == "numpy64":
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            _numpy_sdpa(Q, K, V)
            best = min(best, time.perf_counter() - t)
        seconds = best
    elif method == "floatref32":
        from symattn import floatref

        t = time.perf_counter()
        ref = floatref.correctly_rounded(Q, K, V, dtype="float32")
        seconds = time.perf_counter() - t
        extra = {"arb_entries": ref.arb_entries, "entries": ref.entries}
    elif method == "enclose64":   # the fast path alone: float64 enclosures and their rounding
        from symattn.floatref.binary import BINARY_FORMATS
        from symattn.floatref.sdpa import _fast_slice, normalise

        t = time.perf_counter()
        pr = normalise(Q, K, V)
        undecided = 0
        for b in range(shape[0]):
            for h in range(shape[1]):
                _, w_ok, _, o_ok, _ = _fast_slice(pr, (b, h), None, None, BINARY_FORMATS["float32"])
                undecided += int((~w_ok).sum() + (~o_ok).sum())
        seconds = time.perf_counter() - t
        extra = {"arb_entries": undecided, "entries": Q.size // shape[3] * (shape[2] + shape[3])}
    elif method == "torch32":
        import torch

        q, k, v = (torch.from_numpy(x) for x in (Q, K, V))
        t = time.perf_counter()
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
        seconds = time.perf_counter() - t
    else:
        raise SystemExit(f"unknown method {method}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB on Linux
    return {"seconds": seconds, "peak_rss_mib": rss, **extra}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, nargs=4, action="append")
    parser.add_argument("--one", nargs=5, metavar=("METHOD", "B", "H", "L", "E"))
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], tuple(int(x) for x in args.one[1:]))))
        return
    methods = ["numpy64", "enclose64", "floatref32"]
    try:
        import torch  # noqa: F401
        methods.append("torch32")
    except ImportError:
        pass
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print("| (batch, heads, L, E) | method | seconds | peak RSS (MiB) | arb entries |")
    print("|---|---|---|---|---|")
    for shape in [tuple(s) for s in args.shape] if args.shape else SHAPES:
        for method in methods:
            run = subprocess.run([sys.executable, __file__, "--one", method, *map(str, shape)],
                                 capture_output=True, text=True)
            if run.returncode:
                print(f"| {shape} | {method} | failed: {run.stderr.strip().splitlines()[-1][:200]} | | |")
                continue
            r = json.loads(run.stdout)
            arb = f"{r['arb_entries']} of {r['entries']}" if "arb_entries" in r else ""
            print(f"| {shape} | {method} | {r['seconds']:.3f} | {r['peak_rss_mib']:.0f} | {arb} |", flush=True)


if __name__ == "__main__":
    main()
