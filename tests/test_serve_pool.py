"""symattn serve's worker pool: first come first served, the --workers and --queue options,
the warm start, and a PDF's TeX killed with its worker.

The hand-off is checked on :class:`Handoff` itself with plain objects (no process), so the
order of every step is the test's; the options against a real server.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from symattn.cli import main

pytest.importorskip("starlette")


def run(coroutine):
    """asyncio.run in a thread of its own (a sync Playwright may hold this thread's loop)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def test_a_freed_worker_goes_to_the_oldest_waiter_not_a_newcomer():
    from symattn.serve.workers import Handoff

    async def scene():
        handoff = Handoff(["w"], queue=3)
        served: list[str] = []

        async def client(name: str) -> None:
            worker = await handoff.acquire()
            served.append(name)
            await asyncio.sleep(0)
            handoff.release(worker)

        held = await handoff.acquire()
        waiters = [asyncio.ensure_future(client(n)) for n in "ABC"]
        await asyncio.sleep(0)                    # A, B, C wait, in that order
        assert handoff.waiting == 3
        newcomer = asyncio.ensure_future(client("D"))   # already due to run when the worker is freed
        handoff.release(held)                     # freed: handed to A, though D runs before A wakes
        await asyncio.gather(*waiters, newcomer)
        return served

    assert run(scene()) == ["A", "B", "C", "D"]


def test_an_asyncio_queue_would_let_the_newcomer_pass():
    """Why Handoff exists: the same scene on an asyncio.Queue serves D before A."""
    async def scene():
        idle: asyncio.Queue[str] = asyncio.Queue()
        served: list[str] = []

        async def client(name: str) -> None:
            worker = await idle.get()
            served.append(name)
            await asyncio.sleep(0)
            idle.put_nowait(worker)

        waiters = [asyncio.ensure_future(client(n)) for n in "ABC"]
        await asyncio.sleep(0)
        newcomer = asyncio.ensure_future(client("D"))
        idle.put_nowait("w")
        await asyncio.gather(*waiters, newcomer)
        return served

    assert run(scene())[0] == "D"


def test_a_full_queue_is_busy_and_a_cancelled_waiter_passes_its_worker_on():
    from symattn.serve.workers import Busy, Handoff

    async def scene():
        handoff = Handoff([1], queue=2)
        held = await handoff.acquire()
        first = asyncio.ensure_future(handoff.acquire())
        second = asyncio.ensure_future(handoff.acquire())
        await asyncio.sleep(0)
        with pytest.raises(Busy):
            await handoff.acquire()               # 2 wait: the third is refused at once
        handoff.release(held)                     # handed to first, which is then cancelled
        first.cancel()
        got = await second                        # the worker went on to the next waiter
        with pytest.raises(asyncio.CancelledError):
            await first
        waiting_left = handoff.waiting
        handoff.release(got)
        return got, waiting_left, await handoff.acquire()

    assert run(scene()) == (1, 0, 1)


def heavy_problem() -> dict:
    """d = 16 with surds: about 34 s worked whole (measured), cut at the budget."""
    d = 16
    return {"tokens": [f"t{i}" for i in range(d)],
            "X": [[f"{(i * 7 + j * 3) % 11 - 5}/{(i + j) % 7 + 1}+sqrt({[2, 3, 5][(i + j) % 3]})"
                   for j in range(d)] for i in range(d)],
            "W_q": [[(i * 5 + j) % 9 - 4 for j in range(d)] for i in range(d)],
            "W_k": [[(i * 3 + j * 2) % 7 - 3 for j in range(d)] for i in range(d)],
            "W_v": [[(i + j) % 5 - 2 for j in range(d)] for i in range(d)]}


def refused(capsys, *argv: str) -> str:
    assert main(["serve", "--no-browser", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symattn: error: ")
    return err


@pytest.mark.parametrize("argv, words", [
    (("--workers", "0"), "--workers must be between 1 and 16 (worker processes), got 0"),
    (("--workers", "17"), "--workers must be between 1 and 16 (worker processes), got 17"),
    (("--workers", "two"), "--workers must be a whole number, got 'two'"),
    (("--queue", "-1"), "--queue must be between 0 and 256 (requests waiting for a worker), got -1"),
    (("--queue", "257"), "--queue must be between 0 and 256"),
    (("--queue", "1.5"), "--queue must be a whole number, got '1.5'"),
])
def test_bad_workers_or_queue_are_one_line(capsys, argv, words):
    assert words in refused(capsys, *argv)


def test_the_pool_is_warm_before_the_server_answers(capsys, monkeypatch):
    """The workers have worked the lesson before uvicorn starts (and so before the browser)."""
    import uvicorn

    from symattn.serve.workers import WorkerPool

    seen = {}
    made = []
    original = WorkerPool.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    def serve(self) -> None:
        pool = made[0]
        seen.update(ready=[w.ready for w in pool._all], workers=len(pool._all), queue=pool.queue)

    monkeypatch.setattr(WorkerPool, "__init__", spy)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    assert main(["serve", "--no-browser", "--workers", "3", "--queue", "5", "--port", "9125"]) == 0
    assert seen == {"ready": [True, True, True], "workers": 3, "queue": 5}
    assert "3 workers ready in " in capsys.readouterr().err


def test_one_worker_and_no_queue_over_http():
    """--workers 1 --queue 0 on a real server: while a slow problem runs, the lesson is 503."""
    from serve_server import LESSON, start_server, stop_server

    server = start_server("--workers", "1", "--queue", "0", "--budget", "3")
    try:
        slow: dict = {}
        thread = threading.Thread(target=lambda: slow.update(answer=server.derive(heavy_problem())))
        thread.start()
        import time

        time.sleep(0.5)
        status, answer = server.derive(LESSON)
        thread.join(60)
        assert status == 503 and "every worker is busy" in answer["error"]
        assert slow["answer"][0] == 422 and slow["answer"][1]["error"].startswith("too large for the page")
        assert server.answering()
    finally:
        stop_server(server)


def test_a_pdf_past_the_budget_kills_its_tex_too():
    """The worker leads a process group: stopping it stops a TeX it started (no orphan left)."""
    import os
    import signal

    from symattn.serve.workers import WorkerPool

    pool = WorkerPool(workers=1, queue=0)
    try:
        pool.warm()
        worker = pool._all[0]
        pid = worker.process.pid
        assert os.getpgid(pid) == pid                       # a group of its own
        import subprocess
        import sys
        # a child in the worker's group stands for the TeX it runs
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 preexec_fn=lambda: os.setpgid(0, pid))
        worker.stop()
        assert child.wait(10) == -signal.SIGKILL
    finally:
        pool.close()
