"""How long ``symattn facts`` takes per built-in example and on edge problems at the caps.

Run: ``python3 benchmarks/bench_facts.py [--facts]`` (``--facts``: also time each fact alone on
the slowest examples).  Each problem is timed in a fresh process (``symattn facts --json``), so
start-up, SymPy's caches and the symbolic general proofs are all counted, as a user feels them.
The targets (issue 25): under 5 s per built-in example, under 30 s within the symbolic caps.
Results go in docs/benchmarks.md; nothing here is a timed test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT = 600


def run(args: list[str]) -> tuple[float, int | str]:
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "symattn", "facts", "--json", *args],
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, f"timeout {TIMEOUT}s"
    return time.perf_counter() - start, done.returncode


def examples() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "symattn", "examples"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line and "[symattn heads" not in line]


EDGE = {
    "window-5x5-two-sided": 'Q = [[1,0],[0,1],[1,1],[2,0],[0,2]]\nK = [[1,0],[0,1],[1,1],[2,0],[0,2]]\n'
                            'V = [[1],[2],[3],[4],[5]]\nmask = { window = 2, causal = false }\n',
    "causal-16": "Q = [" + ", ".join(f"[{i % 3}, {i % 2}]" for i in range(16)) + "]\nK = [" +
                 ", ".join(f"[{(i + 1) % 3}, {i % 2}]" for i in range(16)) + "]\nV = [" +
                 ", ".join(f"[{i}]" for i in range(16)) + ']\nmask = "causal"\n',
    "decode-6": "X = [" + ", ".join(f"[{i % 3}, {(i + 1) % 2}]" for i in range(6)) + "]\n"
                "W_q = [[1, 0], [0, 1]]\nW_k = [[0, 1], [1, 1]]\nW_v = [[1, 0], [0, 1]]\n"
                "decode = {prefill = 3}\n",
}


def main() -> None:
    print("| problem | seconds | exit |\n|---|---:|---:|")
    for name in examples():
        seconds, rc = run(["--example", name])
        print(f"| {name} | {seconds:.1f} | {rc} |", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, text in EDGE.items():
            path = Path(folder) / f"{name}.toml"
            path.write_text(text, encoding="utf-8")
            seconds, rc = run([str(path)])
            print(f"| {name} (edge) | {seconds:.1f} | {rc} |", flush=True)
    if "--facts" in sys.argv:
        from symattn.facts import FACTS
        for example in ("i-love-cats", "kv-cache", "sliding-window"):
            for fact in FACTS:
                seconds, rc = run(["--example", example, "--fact", fact])
                print(f"| {example} --fact {fact} | {seconds:.1f} | {rc} |", flush=True)


if __name__ == "__main__":
    main()
