"""Benchmark: the cost model behind ``floatref-run --blocks auto``, calibrated on this machine (issue 22).

Not a test.  Run it from the repository root:

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_floatrun_blocks.py

For a few head shapes (seeded standard normal q, k, v; out = float64 SDPA rounded once to the
format) it times ``check_shard`` of one row block in this process (best of ``--repeat``, the
process's CPU seconds, which the model fits, and the wall clock's), prints
the block's rows, the model's estimate
(:func:`symattn.floatrun.blocks.estimate`) and the ratio measured / estimated.  The
constants in ``symattn/floatrun/blocks.py`` are fitted to these rows (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

SHAPES = [  # (L, S, E, format, causal, blocks, block)
    (64, 64, 64, "float32", True, 1, 0),
    (256, 256, 64, "float32", True, 1, 0),
    (512, 512, 64, "float32", True, 1, 0),
    (1024, 1024, 64, "float32", True, 1, 0),
    (1024, 1024, 128, "float32", True, 1, 0),
    (1024, 1024, 64, "float32", False, 1, 0),
    (2048, 2048, 64, "float32", True, 4, 3),
    (2048, 2048, 128, "float32", True, 1, 0),
    (2048, 2048, 128, "float32", True, 8, 7),
    (4096, 4096, 64, "float32", True, 16, 15),
    (4096, 4096, 128, "float32", True, 16, 8),
    (1024, 1024, 64, "bfloat16", True, 1, 0),
    (1024, 1024, 128, "bfloat16", True, 1, 0),
    (1024, 1024, 64, "float16", True, 1, 0),
]
WORST = (0, 5)


def _arrays(L: int, S: int, E: int, fmt: str, causal: bool, seed: int = 0) -> dict:
    import ml_dtypes
    import numpy as np

    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[fmt]
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(shape).astype(dt) for shape in ((L, E), (S, E), (S, E)))
    s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(E)
    if causal:
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return {"q": q, "k": k, "v": v, "out": (p @ v.astype(np.float64)).astype(dt)}


def _time(shard, options, repeat: int) -> tuple[float, float]:
    """Best of ``repeat``: the CPU seconds of this process (what the model fits: on a shared
    machine the wall clock also counts the other work's share of the core) and the wall seconds."""
    from symattn.floatrun.shard import check_shard

    cpu = wall = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = check_shard(shard, options)
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - t)
        assert result["status"] == "ok", result
    return cpu, wall


def _fit(rows: list[tuple[list[float], float]]) -> list[float]:
    """FIXED, CERT, SCAN, ROW by least squares on the relative error (float32 rows only)."""
    import numpy as np

    X = np.array([f for f, _ in rows])
    y = np.array([t for _, t in rows])
    solution = np.linalg.lstsq(X / y[:, None], np.ones(len(y)), rcond=None)[0]
    return [float(c) for c in solution]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the shapes under L = 2048 only")
    args = parser.parse_args()
    from safetensors.numpy import save_file

    from symattn import floatrun
    from symattn.floatrun import blocks as model
    from symattn.floatrun.dump import plan

    print(f"load average {os.getloadavg()}")
    print(f"{'L':>5} {'S':>5} {'E':>4} {'format':>9} {'causal':>6} {'block':>6} {'worst':>5} {'rows':>6} "
          f"{'cpu s':>8} {'wall s':>8} {'model':>7} {'ratio':>6}")
    fit, measured = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (L, S, E, fmt, causal, blocks, block) in enumerate(SHAPES):
            if args.quick and L >= 2048:
                continue
            folder = Path(tmp) / f"d{n}"
            folder.mkdir()
            save_file(_arrays(L, S, E, fmt, causal), str(folder / "L0.H0.safetensors"))
            (shard,) = plan(folder).shards
            shard = replace(shard, block=block, blocks=blocks)
            for worst in WORST:
                options = floatrun.Options(causal="top-left" if causal else None, dtype=fmt, worst=worst)
                seconds, wall = _time(shard, options, args.repeat)
                shape = model.head_shape(shard, options)
                assert shape is not None
                estimate = model.estimate(shape, block, blocks, worst)
                rows = shape.rows(block, blocks)
                measured.append((shape, causal, block, blocks, worst, seconds))
                if fmt == "float32":
                    fit.append(([1.0, worst * S * (E + E), L * S * E, rows * S * (E + E)], seconds))
                print(f"{L:>5} {S:>5} {E:>4} {fmt:>9} {str(causal):>6} {f'{block}/{blocks}':>6} {worst:>5} "
                      f"{rows:>6,} {seconds:>8.3f} {wall:>8.3f} {estimate:>7.3f} {seconds / estimate:>6.2f}", flush=True)
    fixed, cert, scan, row = _fit(fit)
    print(f"fitted: FIXED = {fixed:.3g}, CERT = {cert:.3g}, SCAN = {scan:.3g}, ROW = {row:.3g}")
    for fmt in ("bfloat16", "float16"):
        ratios = [t / next(t32 for s32, c32, b32, n32, w32, t32 in measured if s32.format == "float32" and
                           (s32.L, s32.E, c32, b32, n32, w32) == (s.L, s.E, c, b, nb, w))
                  for s, c, b, nb, w, t in measured if s.format == fmt]
        if ratios:
            print(f"{fmt} against float32: {', '.join(f'{r:.2f}' for r in ratios)}")
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
