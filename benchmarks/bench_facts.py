"""How long ``symattn facts`` takes per built-in example and on edge problems at the caps.

Run: ``python3 benchmarks/bench_facts.py [--facts] [--before DIR]`` (``--facts``: also time each
fact alone on the slowest examples; ``--before DIR``: also time the package in DIR, e.g.
``git archive <commit> symattn | tar -x -C DIR``, side by side, each problem in turn).  CPU
seconds (the child's user + system time) are the column to compare on a shared machine.  Each problem is timed in a fresh process (``symattn facts --json``), so
start-up, SymPy's caches and the symbolic general proofs are all counted, as a user feels them.
The targets (issue 25): under 5 s per built-in example, under 30 s within the symbolic caps.
Results go in docs/benchmarks.md; nothing here is a timed test.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT = 600


def run(args: list[str], root: str | None = None) -> tuple[float, float, int | str]:
    """(wall seconds, CPU seconds, exit status) of one ``symattn facts --json`` in a fresh process;
    ``root``: the folder whose ``symattn`` package runs (default: this checkout's)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if root is not None:
        env["PYTHONPATH"] = root
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "symattn", "facts", "--json", *args],
                              capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=root)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, float("nan"), f"timeout {TIMEOUT}s"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.returncode


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
    # at MAX_SYMBOLIC_SIDE: 16 tokens with surds in Q and K (worked symbolically)
    "surds-16": "Q = [" + ", ".join(f'[{i % 3}, "{1 + i % 2}*sqrt(2)/2"]' for i in range(16)) + "]\nK = [" +
                ", ".join(f'["sqrt(3)/{1 + i % 2}", {i % 2}]' for i in range(16)) + "]\nV = [" +
                ", ".join(f"[{i % 5}]" for i in range(16)) + "]\n",
    # 3 tokens, surds in Q and K, a soft-cap and a backward key: d-Q-K-inner-products took 117 s
    # (over 880 s at load 11-16) in Lindemann-Weierstrass before it was proved from its parts
    "softcap-surds-backward": 'Q = [["sqrt(2)", 1], [0, "1/2+sqrt(3)"], [1, "sqrt(2)/2"]]\n'
                              'K = [[1, "sqrt(3)"], ["sqrt(2)", 0], ["1/2", 1]]\nV = [[1, 0], [0, 2], [1, 1]]\n'
                              'softcap = 5\nbackward = { loss = "sum" }\n',
    "softcap-16": "Q = [" + ", ".join(f"[{i % 3}, {(i + 2) % 3}]" for i in range(16)) + "]\nK = [" +
                  ", ".join(f"[{(2 * i) % 3}, {i % 2}]" for i in range(16)) + "]\nV = [" +
                  ", ".join(f"[{i % 5}]" for i in range(16)) + "]\nsoftcap = 5\n",
}


def _row(name: str, args: list[str], before: str | None) -> None:
    wall, cpu, rc = run(args)
    row = f"| {name} | {wall:.1f} | {cpu:.1f} | {rc} |"
    if before is not None:
        wall0, cpu0, rc0 = run(args, before)
        row += f" {wall0:.1f} | {cpu0:.1f} | {rc0} | {cpu / cpu0:.2f}× |"
    print(row, flush=True)


def main() -> None:
    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
    head = "| problem | wall s | CPU s | exit |"
    if before is not None:
        head += " before wall s | before CPU s | before exit | CPU after/before |"
    print(head)
    print("|---|" + "---:|" * (head.count("|") - 2))
    for name in examples():
        _row(name, ["--example", name], before)
    with tempfile.TemporaryDirectory() as folder:
        for name, text in EDGE.items():
            path = Path(folder) / f"{name}.toml"
            path.write_text(text, encoding="utf-8")
            _row(f"{name} (edge)", [str(path)], before)
    if "--facts" in sys.argv:
        from symattn.facts import FACTS
        for example in ("i-love-cats", "kv-cache", "sliding-window"):
            for fact in FACTS:
                _row(f"{example} --fact {fact}", ["--example", example, "--fact", fact], before)


if __name__ == "__main__":
    main()
