"""Benchmark: numpy float64 SDPA against floatref.correctly_rounded (float32), side by side.

Not a test.  Run it from the repository root:

    python benchmarks/bench_floatref.py                 # (1, 8, 1024, 64) and (1, 1, 4096, 128)
    python benchmarks/bench_floatref.py --shape 1 8 256 64     # any (batch, heads, L, E)
    python benchmarks/bench_floatref.py --shape 1 2 256 64 --mask -1e9   # causal additive mask

Each (shape, method) runs in a fresh subprocess (imports excluded from the
time, peak RSS per run from ru_maxrss).  Inputs: seeded standard normal
float32 Q, K, V (L = S, Ev = E), default scale, no mask.  Every float method
runs 3 times and reports its best wall clock and its least CPU (the first run
of each pays for first touches of fresh arrays).  numpy: the max-subtraction
softmax in float64.  correctly_rounded: its count of entries that needed the
arb path is printed; floatref64: the same with
dtype="float64" (double-double enclosures, fast64.py; its exp table, built once per
process, is built before the clock starts).  enclose64: the
fast path alone (float64 enclosures of every head and their rounding; the
"arb entries" column then counts the undecided entries).  torch SDPA is
timed too when torch is importable (float32, its default CPU backend, one thread).  digits30: symattn's certified path
(Problem from decimal strings, as benchmarks/bench_attention.py makes them;
weights and output to 30 significant digits, every digit proved; best of 3,
each from the strings) at n = 128 and 512, d = 64.  Each row gives wall seconds and the child's CPU
seconds (user + system: numpy's BLAS may use both cores, so CPU can exceed
wall).  The load average is printed (2 cores shared with other work: times
vary; compare methods within one run, not across runs).

``--mask VALUE`` gives the floatref methods a causal mask: ``bool`` (boolean), or an
additive float mask of 0 and VALUE (``-1e9``, ``f32min`` = finfo(float32).min, ``-inf``),
in the inputs' float32 (the other methods run unmasked).

floatref16 and floatrefbf16: the float16 and bfloat16 targets.  ``--base DIR``
runs every method but numpy64 also from another checkout (``git worktree add
/tmp/base main``), alternating base, this, this, base; each row the least CPU
of its two rounds (docs/benchmarks.md, Round 4).

Run it with PYTHONPATH set to the checkout to measure (the script runs
``python benchmarks/...``, whose sys.path starts at benchmarks/).
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
#: the floatref methods and their target dtype
FLOATREF = {"floatref32": "float32", "floatref16": "float16", "floatrefbf16": "bfloat16",
            "floatref64": "float64"}
DIGIT_SIZES = [128, 512]


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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _mask(spec: str | None, L: int):
    """A causal mask of L × L: boolean, or additive 0 / VALUE in float32 (None: no mask)."""
    import numpy as np

    if spec is None:
        return None
    causal = np.tril(np.ones((L, L), dtype=bool))
    if spec == "bool":
        return causal
    value = float(np.finfo(np.float32).min) if spec == "f32min" else float(spec)
    return np.where(causal, 0.0, value).astype(np.float32)


def one(method: str, shape, mask: str | None = None) -> dict:
    extra = {}
    if method == "digits30":
        import random

        import symattn as sa
        n, d = shape[2], shape[3]
        rng = random.Random(f"0-{n}-{d}")

        def matrix():
            return [[f"{k / 10:.1f}" for k in (rng.randint(-30, 30) for _ in range(d))] for _ in range(n)]
        m = {"Q": matrix(), "K": matrix(), "V": matrix()}

        def run():                                   # from the strings: a new Problem each run
            trace = sa.Trace(sa.Problem(**m))
            trace.step("weights").decimals(sa.Rounding(digits=30))
            trace.step("output").decimals(sa.Rounding(digits=30))
        return _best_of_3(run, extra)
    Q, K, V = _inputs(shape)
    if method == "numpy64":
        run = lambda: _numpy_sdpa(Q, K, V)                         # noqa: E731
    elif method in FLOATREF:
        from symattn import floatref
        from symattn.floatref import fast64

        if method == "floatref64":
            fast64.exp_table()                                      # built once per process
        attn_mask = _mask(mask, shape[2])

        def run():
            ref = floatref.correctly_rounded(Q, K, V, dtype=FLOATREF[method], attn_mask=attn_mask)
            extra.update(arb_entries=ref.arb_entries, entries=ref.entries)
    elif method == "enclose64":   # the fast path alone: float64 enclosures and their rounding
        from symattn.floatref.binary import BINARY_FORMATS
        from symattn.floatref.sdpa import _fast_slice, normalise

        def run():
            pr = normalise(Q, K, V)
            undecided = 0
            for b in range(shape[0]):
                for h in range(shape[1]):
                    _, w_ok, _, o_ok, _ = _fast_slice(pr, (b, h), None, None, BINARY_FORMATS["float32"])
                    undecided += int((~w_ok).sum() + (~o_ok).sum())
            extra.update(arb_entries=undecided, entries=Q.size // shape[3] * (shape[2] + shape[3]))
    elif method == "torch32":
        import torch

        torch.set_num_threads(1)                                    # like BLAS: one thread
        q, k, v = (torch.from_numpy(x) for x in (Q, K, V))
        run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)   # noqa: E731
    else:
        raise SystemExit(f"unknown method {method}")
    return _best_of_3(run, extra)


def _best_of_3(run, extra: dict) -> dict:
    """Best of 3 runs, by wall clock and by CPU (the first run of each method also pays for
    first touches of fresh arrays: about 3x numpy's later runs; and one run on 2 shared
    cores can be 30 % off)."""
    seconds = cpu = float("inf")
    for _ in range(3):
        c0, t = _cpu(), time.perf_counter()
        run()
        seconds, cpu = min(seconds, time.perf_counter() - t), min(cpu, _cpu() - c0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB on Linux
    return {"seconds": seconds, "cpu": cpu, "peak_rss_mib": rss, **extra}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, nargs=4, action="append")
    parser.add_argument("--one", nargs=5, metavar=("METHOD", "B", "H", "L", "E"))
    parser.add_argument("--mask", help="causal mask for the floatref methods: bool, or an additive value "
                                       "(-1e9, f32min, -inf)")
    parser.add_argument("--base", metavar="DIR", help="another checkout (e.g. a worktree of main): every "
                        "method except numpy64 also runs with PYTHONPATH=DIR, alternating with this one, "
                        "2 rounds each; rows give the least CPU of the rounds")
    parser.add_argument("--methods", nargs="+", help="only these methods")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], tuple(int(x) for x in args.one[1:]), args.mask)))
        return
    methods = ["numpy64", "enclose64", *FLOATREF]
    try:
        import torch  # noqa: F401
        methods.append("torch32")
    except ImportError:
        pass
    if args.methods:
        methods = [m for m in methods if m in args.methods]
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores, python {sys.version.split()[0]}"
          + (f"; the floatref methods with the causal mask {args.mask}" if args.mask else "")
          + (f"; 'base' rows: PYTHONPATH={args.base}" if args.base else ""))
    print("| (batch, heads, L, E) | method | wall s | CPU s | × numpy64 (wall) | × numpy64 (CPU) "
          "| peak RSS (MiB) | arb entries |")
    print("|---|---|---|---|---|---|---|---|")
    runs = [(tuple(s), m) for s in (args.shape or SHAPES) for m in methods]
    if not args.shape and not args.methods:
        runs += [((1, 1, n, 64), "digits30") for n in DIGIT_SIZES]
    base = {}
    for shape, method in runs:
        mask = ["--mask=" + args.mask] if args.mask and method in FLOATREF else []
        here = os.environ.get("PYTHONPATH", "")
        paths = [("", here)] * (2 if args.base else 1) if not args.base or method == "numpy64" else \
            [(" (base)", args.base), ("", here), ("", here), (" (base)", args.base)]   # alternating
        results: dict[str, dict] = {}
        for label, path in paths:
            run = subprocess.run([sys.executable, __file__, "--one", method, *map(str, shape), *mask],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
            if run.returncode:
                print(f"| {shape} | {method}{label} | failed: {run.stderr.strip().splitlines()[-1][:200]} "
                      "| | | | | |")
                continue
            r = json.loads(run.stdout)
            best = results.get(label)
            if best is None or r["cpu"] < best["cpu"]:
                results[label] = {**r, "seconds": min(r["seconds"], best["seconds"]) if best else r["seconds"]}
        for label in sorted(results, key=lambda x: x != " (base)"):
            r = results[label]
            arb = f"{r['arb_entries']} of {r['entries']}" if "arb_entries" in r else ""
            if method == "numpy64":
                base[shape] = (r["seconds"], r["cpu"])
            ratios = [f"{r[key] / base[shape][k]:.1f}" if shape in base and method != "numpy64" else ""
                      for k, key in enumerate(("seconds", "cpu"))]
            print(f"| {shape} | {method}{label} | {r['seconds']:.3f} | {r['cpu']:.3f} | {ratios[0]} | {ratios[1]} | "
                  f"{r['peak_rss_mib']:.0f} | {arb} |", flush=True)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
