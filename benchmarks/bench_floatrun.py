"""Benchmark: floatref-run serial against 2 local Dask workers, side by side (issue 22).

Not a test.  Run it from the repository root:

    PYTHONPATH=. python benchmarks/bench_floatrun.py                 # 16 heads of (L, E) = (1024, 64)
    PYTHONPATH=. python benchmarks/bench_floatrun.py --heads 16 --L 512 --E 64

It writes a dump of 16 heads (seeded standard normal float32 q, k, v; out = float64 SDPA
rounded to float32, causal) in a temporary folder and times, each from a cold start:

- ``serial``: ``floatrun.run(dump, engine="serial")``, every shard in this process;
- ``dask2``: ``floatrun.run(dump, engine="dask", client=client)`` on a LocalCluster of 2
  worker processes, one thread each, started before the clock (its start-up is printed
  apart: the ``--workers`` command pays it once per run);
- ``call``: ``check_shard`` of one shard in this process, and the same shard submitted to the
  cluster alone (``client.submit(...).result()``), 5 times each, best: Dask's per-shard
  overhead against the in-process call, both as the round trip's excess over the in-process
  call and as the round trip less the shard's own time inside the worker (``seconds`` in its
  result: what Dask itself adds, apart from the worker being slower or faster than this process).

``--repeat N`` alternates serial and 2-worker runs N times (the ratios each time).  The load
average is printed before and after: the machine is shared, so compare within one run only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def _dump(folder: Path, heads: int, L: int, E: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    for h in range(heads):
        q, k, v = (rng.standard_normal((L, E)).astype(np.float32) for _ in range(3))
        s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(E)
        s = np.where(np.tril(np.ones((L, L), dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out = ((p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)).astype(np.float32)
        np.savez(folder / f"L{h // 4}.H{h % 4}.npz", q=q, k=k, v=v, out=out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--L", type=int, default=1024)
    parser.add_argument("--E", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    from dask.distributed import Client

    from symattn import floatrun
    from symattn.floatrun.dump import plan
    from symattn.floatrun.runner import local_cluster
    from symattn.floatrun.shard import check_shard

    print(f"load average {os.getloadavg()}; {args.heads} heads of (L, E) = ({args.L}, {args.E}), causal")
    options = floatrun.Options(causal="top-left")
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp)
        _dump(dump, args.heads, args.L, args.E)
        times = []
        start = time.perf_counter()
        with local_cluster(2, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            print(f"cluster start-up {time.perf_counter() - start:.1f} s (before the clock)")
            for _ in range(args.repeat):
                start = time.perf_counter()
                serial = floatrun.run(dump, options)
                t_serial = time.perf_counter() - start
                start = time.perf_counter()
                dask = floatrun.run(dump, options, engine="dask", client=client)
                times.append((t_serial, time.perf_counter() - start))
                assert serial.heads == dask.heads, "the Dask report differs from the serial one"
            shard = plan(dump).shards[0]
            local, remote, inside = [], [], []
            for _ in range(5):
                t = time.perf_counter()
                check_shard(shard, options)
                local.append(time.perf_counter() - t)
                t = time.perf_counter()
                result = client.submit(check_shard, shard, options, pure=False).result()
                remote.append(time.perf_counter() - t)
                inside.append(remote[-1] - result["seconds"])
    print(f"{'run':<6}{'serial s':>10}{'2 workers s':>13}{'ratio':>8}")
    for k, (a, b) in enumerate(times, 1):
        print(f"{k:<6}{a:>10.2f}{b:>13.2f}{a / b:>8.2f}")
    best = min(local)
    print(f"one shard: in process {best:.3f} s, through Dask {min(remote):.3f} s "
          f"({100 * (min(remote) - best) / best:+.1f} %); Dask's own part of the round trip "
          f"{min(inside) * 1000:.1f} ms ({100 * min(inside) / best:.1f} % of the in-process call)")
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
