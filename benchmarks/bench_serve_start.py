"""Benchmark: how long ``symattn serve`` makes its first user wait (issue 23).

Run: python benchmarks/bench_serve_start.py [--runs 3] [--root PATH]

Starts ``python -m symattn serve --no-browser`` on a free port of 127.0.0.1 (``--root``: the
checkout to run, default this one, so an older tree can be measured side by side), polls
``GET /`` every 20 ms until it answers, then at once POSTs the lesson to ``/derive`` (the
first edit a user makes), then once more. Printed per run: seconds from launch to the page,
the first derivation's latency, the second's (a warm worker), and from launch to the first
derivation. The server is stopped with SIGTERM; ``uptime`` is printed (the machine is shared).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

LESSON = {"title": "I love cats", "tokens": ["I", "love", "cats"],
          "X": [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
          "W_q": [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
          "W_k": [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
          "W_v": [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(port: int, method: str, path: str, body: bytes | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{port}",
                                                       "Origin": f"http://127.0.0.1:{port}",
                                                       "Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


def one_run(root: Path) -> tuple[float, float, float]:
    port = free_port()
    t0 = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "symattn", "serve", "--no-browser", "--port", str(port)],
                               cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            if process.poll() is not None or time.perf_counter() - t0 > 120:
                raise SystemExit("symattn serve did not start")
            try:
                if request(port, "GET", "/") == 200:
                    break
            except OSError:
                time.sleep(0.02)
        page = time.perf_counter() - t0
        body = json.dumps(LESSON).encode()
        t1 = time.perf_counter()
        assert request(port, "POST", "/derive", body) == 200
        first = time.perf_counter() - t1
        t2 = time.perf_counter()
        assert request(port, "POST", "/derive", body) == 200
        return page, first, time.perf_counter() - t2
    finally:
        process.terminate()
        process.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    if not 1 <= args.runs <= 10:
        raise SystemExit("--runs 1 to 10: the machine is shared")
    print(f"before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    runs = [one_run(args.root) for _ in range(args.runs)]
    for page, first, second in runs:
        print(f"page after {page:.2f} s; first derivation {1000 * first:.0f} ms, second {1000 * second:.0f} ms; "
              f"launch to first derivation {page + first:.2f} s")
    print(f"median: page {statistics.median(r[0] for r in runs):.2f} s, first derivation "
          f"{1000 * statistics.median(r[1] for r in runs):.0f} ms, second "
          f"{1000 * statistics.median(r[2] for r in runs):.0f} ms")
    print(f"after:  {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
