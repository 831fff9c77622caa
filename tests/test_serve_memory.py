"""symattn serve's per-request memory budget (``--memory MB``, below the worker's 2 GiB cap).

Each job may grow its worker's address space by at most MB MiB (RLIMIT_AS's soft limit,
lowered for the job and raised back after it): a request over it is answered "too large for
the page: use the CLI", its worker is replaced, and the next request is answered as usual.
The problem over the budget is one the page takes otherwise (the control, with the default
budget, answers it), so the refusal is the memory budget's and not a cap's or the clock's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from serve_server import LESSON, ROOT, start_server, stop_server
from symattn.cli import main

pytest.importorskip("starlette")

SIDE = 64        # a 64×64 problem's JSON at 30 digits: about 30 MiB over the worker's own


def big_problem() -> dict:
    entries = [[(i * SIDE + j) % 13 + 1 for j in range(SIDE)] for i in range(SIDE)]
    return {"title": "big", "Q": entries, "K": entries, "V": entries}


def lesson_weight_love_i() -> str:
    """weights[love, I] of the lesson to 30 significant digits, by mpmath at 60 (for the test)."""
    import mpmath

    mpmath.mp.dps = 60
    X, Wq, Wk = LESSON["X"], LESSON["W_q"], LESSON["W_k"]

    def mm(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    Q, K = mm(X, Wq), mm(X, Wk)
    e = [mpmath.exp(sum(x * y for x, y in zip(Q[1], k)) / mpmath.sqrt(3)) for k in K]
    return mpmath.nstr(e[0] / sum(e), 30, strip_zeros=False, min_fixed=-10, max_fixed=10)


def test_the_budget_lowers_the_soft_limit_for_one_job_and_restores_it():
    """In a process of its own (RLIMIT_AS is the process's): 64 MiB more is refused inside
    a 32 MiB budget, and allowed again after it."""
    script = textwrap.dedent("""
        import resource
        from symattn.serve.workers import request_budget
        before = resource.getrlimit(resource.RLIMIT_AS)
        with request_budget(32):
            soft = resource.getrlimit(resource.RLIMIT_AS)[0]
            small = bytearray(8 * 2**20)
            try:
                bytearray(64 * 2**20)
                refused = False
            except MemoryError:
                refused = True
        again = len(bytearray(64 * 2**20))
        print(refused, soft != before[0], resource.getrlimit(resource.RLIMIT_AS) == before, again)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}).stdout
    assert out.split() == ["True", "True", "True", str(64 * 2**20)]


@pytest.mark.parametrize("argv, words", [
    (["--memory", "8"], "--memory must be between 16 and 2048 (MiB), got 8"),
    (["--memory", "4096"], "--memory must be between 16 and 2048 (MiB), got 4096"),
    (["--memory", "1.5"], "--memory must be a whole number, got '1.5'"),
])
def test_a_bad_memory_budget_is_one_line(capsys, argv, words):
    assert main(["serve", "--no-browser", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def download(server, problem: dict) -> tuple[int, dict, float]:
    start = time.monotonic()
    status, body, _ = server.request("POST", "/download/json?digits=30", json.dumps(problem).encode())
    return status, json.loads(body) if status != 200 else {"bytes": len(body)}, time.monotonic() - start


def test_a_request_over_the_memory_budget_is_refused_and_the_next_one_answered():
    server = start_server("--memory", "16", "--budget", "120", "--workers", "1")
    try:
        status, answer, seconds = download(server, big_problem())
        assert status == 422, answer
        assert answer["error"] == "too large for the page: use the CLI (symattn explain)"
        assert answer["field"] is None and seconds < 100          # the memory's refusal, not the clock's
        status, answer = server.derive(LESSON)
        assert status == 200 and "weights" in answer["html"]
        status, body, _ = server.request("POST", "/download/json?digits=30", json.dumps(LESSON).encode())
        assert status == 200
        assert json.loads(body)["steps"]["weights"]["decimal"][1][0] == lesson_weight_love_i()
        assert server.answering()
    finally:
        stop_server(server)


def test_the_same_problem_within_the_default_budget_is_answered():
    """The control: the pool with the default 512 MiB answers the problem refused above."""
    from symattn.serve.workers import REQUEST_MEGABYTES, WorkerPool

    assert REQUEST_MEGABYTES == 512
    pool = WorkerPool(workers=1, queue=0, budget=120)
    try:
        pool.warm()
        with ThreadPoolExecutor(1) as thread:    # a sync Playwright may hold this thread's loop
            result = thread.submit(asyncio.run, pool.download(big_problem(), "json", 30)).result()
        assert result.error is None and result.data is not None
        shown = json.loads(result.data)["steps"]["weights"]["decimal"]
        assert len(shown) == SIDE and len(shown[0]) == SIDE
    finally:
        pool.close()
