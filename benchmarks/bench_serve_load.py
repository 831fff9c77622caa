"""Benchmark: 20 clients editing the lesson on one ``symattn serve`` for 30 s (issue 23).

Run: python benchmarks/bench_serve_load.py [--clients 20] [--seconds 30] [--think 0] [--backoff 0.1]
     [--max-requests 20000] [--server-args "--budget 10"]

Against 127.0.0.1 only, bounded in count and time: the script starts ``python -m symattn
serve --no-browser`` on a free port (the command a user runs: uvicorn, the guards, the
worker processes), waits for it, then starts ``--clients`` threads. Each thread holds one
keep-alive ``http.client`` connection with the page's Host and Origin and, until the time
or the request count runs out, POSTs ``/derive`` with the lesson and one ``W_q`` entry
changed (a different entry and value each time, so no two edits in a row are the same),
then sleeps ``--think`` seconds (0: as fast as the server answers; the page itself waits
0.2 s after the last keystroke), or ``--backoff`` seconds after a 503. An answer is right when it is 200 and a JSON table with
``html``; a 503 (every worker busy and the queue full) is counted on its own; anything
else, and any socket error, is an error. Latency is from send to the last byte read.
The clock starts after one derivation has answered (the workers start after the page
does; that first wait is printed on its own). The server is stopped with SIGTERM at the end, and ``uptime`` is printed before and after
(the machine is shared).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSON = {"title": "I love cats", "tokens": ["I", "love", "cats"],
          "X": [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
          "W_q": [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
          "W_k": [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
          "W_v": [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def warm_up(port: int) -> float:
    """Seconds until the first derivation answers: the workers start after the page does."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/derive", body=json.dumps(LESSON).encode(),
                 headers={"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"})
    reply = conn.getresponse()
    reply.read()
    conn.close()
    if reply.status != 200:
        raise SystemExit(f"the lesson was answered {reply.status}")
    return time.perf_counter() - t0


def start(port: int, extra: list[str]) -> tuple[subprocess.Popen, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "symattn", "serve", "--no-browser",
                                "--port", str(port), *extra], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"symattn serve exited: {process.stderr.read().decode()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
            if conn.getresponse().status == 200:
                conn.close()
                return process, warm_up(port)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("symattn serve did not answer within 120 s")


def edit(n: int) -> bytes:
    """The lesson with W_q[i][j] set to a value that changes with n."""
    problem = json.loads(json.dumps(LESSON))
    i, j = n % 4, (n // 4) % 3
    problem["W_q"][i][j] = (n % 7) - 3 if n % 5 else f"{n % 9}/2"
    return json.dumps(problem).encode()


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok: list[float] = []
        self.busy: list[float] = []
        self.errors: dict[str, int] = {}
        self.sent = 0

    def claim(self, limit: int) -> int | None:
        with self.lock:
            if self.sent >= limit:
                return None
            self.sent += 1
            return self.sent


def client(port: int, stop_at: float, limit: int, think: float, backoff: float, tally: Tally) -> None:
    headers = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}",
               "Content-Type": "application/json"}
    conn: http.client.HTTPConnection | None = None
    while time.monotonic() < stop_at:
        n = tally.claim(limit)
        if n is None:
            return
        body = edit(n)
        t0 = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/derive", body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            took = time.perf_counter() - t0
            status = reply.status
            good = status == 200 and data.startswith(b"{") and "html" in json.loads(data)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            took, status, good = time.perf_counter() - t0, -1, False
            kind = type(exc).__name__
            if conn is not None:
                conn.close()
            conn = None
        with tally.lock:
            if good:
                tally.ok.append(took)
            elif status == 503:
                tally.busy.append(took)
            else:
                key = kind if status == -1 else str(status)
                tally.errors[key] = tally.errors.get(key, 0) + 1
        pause = backoff if status == 503 else think
        if pause:
            time.sleep(pause)
    if conn is not None:
        conn.close()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--think", type=float, default=0.0, help="seconds each client waits between edits")
    parser.add_argument("--backoff", type=float, default=0.1, help="seconds a client waits after a 503")
    parser.add_argument("--max-requests", type=int, default=20000, help="a cap on the requests sent in all")
    parser.add_argument("--server-args", default="", help="more arguments for symattn serve")
    args = parser.parse_args()
    if not (1 <= args.clients <= 100 and 0 < args.seconds <= 300):
        raise SystemExit("--clients 1 to 100 and --seconds up to 300: the machine is shared")
    port = free_port()
    print(f"before: {uptime()}")
    process, warm = start(port, shlex.split(args.server_args))
    print(f"the first derivation (workers starting) answered after {warm:.2f} s; the clock starts now")
    try:
        tally = Tally()
        begin = time.monotonic()
        stop_at = begin + args.seconds
        threads = [threading.Thread(target=client, args=(port, stop_at, args.max_requests, args.think, args.backoff, tally))
                   for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - begin
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    print(f"after:  {uptime()}")
    ok = tally.ok
    print(f"{args.clients} clients, {wall:.1f} s, think {args.think} s, backoff {args.backoff} s, server args {args.server_args!r}")
    print(f"requests {tally.sent}: derived {len(ok)}, 503 (queue full) {len(tally.busy)}, "
          f"errors {sum(tally.errors.values())} {tally.errors or ''}")
    if ok:
        print(f"derived: {len(ok) / wall:.1f}/s; latency p50 {1000 * statistics.median(ok):.0f} ms, "
              f"p95 {1000 * quantile(ok, 0.95):.0f} ms, max {1000 * max(ok):.0f} ms")
    if tally.busy:
        print(f"503s: {len(tally.busy) / wall:.1f}/s; latency p50 {1000 * statistics.median(tally.busy):.1f} ms")


if __name__ == "__main__":
    main()
