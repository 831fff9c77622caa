"""Derivations off the event loop: a few worker processes, a bounded queue, a time budget.

Why processes of our own rather than a bare ``ProcessPoolExecutor``: a problem that runs
past its budget must be stopped, and an executor cannot kill one worker (Python 3.11).
Each worker here is a ``multiprocessing`` process (spawned, so no lock of the server's
threads is inherited) answering jobs on its pipe; a job over the budget has its worker
killed and replaced, so the server never hangs on it.  Each worker also caps its own
address space (``RLIMIT_AS``), so a problem that would take gigabytes fails as a
``MemoryError`` in the worker, not in the server.  A full queue is refused at once.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
from dataclasses import dataclass
from typing import Any

__all__ = ["Busy", "Result", "TooLarge", "WorkerPool"]

TOO_LARGE = "too large for the page: use the CLI (symattn explain)"


class Busy(Exception):
    """Every worker is busy and the queue is full: try again shortly."""


class TooLarge(Exception):
    """The job ran past the time or memory budget; its worker was replaced."""


@dataclass(frozen=True)
class Result:
    """A worker's answer: the derivation's HTML, or the one-line error of an invalid problem."""

    html: str | None = None
    error: str | None = None


def _limit_memory(megabytes: int) -> None:
    try:
        import resource
    except ImportError:          # not POSIX: no address-space cap
        return
    cap = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _answer(job: dict[str, Any]) -> tuple[str, str]:
    from symattn.errors import SymattnError
    from symattn.serve.derive import check_fragment, derive_fragment, one_line

    try:
        if "figures" in job:
            return "ok", check_fragment(job["problem"], job["figures"])
        return "ok", derive_fragment(job["problem"], job.get("digits", 3), **job.get("view", {}))
    except SymattnError as exc:
        return "error", one_line(exc)
    except (MemoryError, RecursionError):
        return "large", TOO_LARGE


def work(conn: multiprocessing.connection.Connection, megabytes: int) -> None:
    """A worker's loop: warm up on the lesson, then answer jobs until the pipe closes."""
    _limit_memory(megabytes)
    from symattn.examples import DEFAULT_EXAMPLE, example_text
    from symattn.serve.derive import problem_data

    _answer({"problem": problem_data(example_text(DEFAULT_EXAMPLE), "lesson")})   # imports, caches
    conn.send(("ready", ""))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(_answer(job))
        except Exception as exc:   # a bug in symattn: say so, keep serving  # noqa: BLE001
            conn.send(("bug", f"{type(exc).__name__}: {exc}"))


class _Worker:
    def __init__(self, context: Any, megabytes: int) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=work, args=(child, megabytes), daemon=True)
        self.process.start()
        child.close()
        self.ready = False

    def wait_ready(self, timeout: float) -> bool:
        if not self.ready and self.conn.poll(timeout):
            self.ready = self.conn.recv()[0] == "ready"
        return self.ready

    def ask(self, job: dict[str, Any], budget: float) -> tuple[str, str] | None:
        """The answer, or None when the budget ran out (blocking: run it in a thread)."""
        if not self.wait_ready(60.0):
            return None
        self.conn.send(job)
        if not self.conn.poll(budget):
            return None
        return self.conn.recv()

    def stop(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """``workers`` processes and at most ``queue`` jobs waiting for one; ``budget`` seconds each."""

    def __init__(self, workers: int = 2, queue: int = 8, budget: float = 10.0,
                 megabytes: int = 2048) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.budget, self.megabytes, self.queue = budget, megabytes, queue
        self._all = [_Worker(self._context, megabytes) for _ in range(workers)]
        self._idle: asyncio.Queue[_Worker] | None = None
        self._waiting = 0

    def _idle_queue(self) -> "asyncio.Queue[_Worker]":
        if self._idle is None:      # made on the server's loop
            self._idle = asyncio.Queue()
            for w in self._all:
                self._idle.put_nowait(w)
        return self._idle

    async def derive(self, problem: dict[str, Any], digits: int = 3,
                     view: dict[str, Any] | None = None) -> Result:
        """The derivation of one problem (``view``: ``derive_fragment``'s places and rows);
        :class:`Busy` or :class:`TooLarge` when it cannot be."""
        return await self.run({"problem": problem, "digits": digits, "view": view or {}})

    async def check(self, problem: dict[str, Any], figures: object) -> Result:
        """The verdicts on written figures about a problem (as :meth:`derive`)."""
        return await self.run({"problem": problem, "figures": figures})

    async def run(self, job: dict[str, Any]) -> Result:
        """One job in a worker: at once, after a wait in the queue, or :class:`Busy`."""
        idle = self._idle_queue()
        if idle.empty() and self._waiting >= self.queue:
            raise Busy("every worker is busy: try again in a moment")
        self._waiting += 1
        try:
            worker = await idle.get()
        finally:
            self._waiting -= 1
        try:
            answer = await asyncio.to_thread(worker.ask, job, self.budget)
        except BaseException:
            idle.put_nowait(self._replace(worker))
            raise
        if answer is None or answer[0] in ("large", "bug"):   # a worker that failed starts afresh
            worker = self._replace(worker)
        idle.put_nowait(worker)
        if answer is None or answer[0] == "large":
            raise TooLarge(TOO_LARGE)
        kind, text = answer
        if kind == "ok":
            return Result(html=text)
        if kind == "error":
            return Result(error=text)
        raise RuntimeError(f"the worker failed: {text}")

    def _replace(self, worker: _Worker) -> _Worker:
        worker.stop()
        fresh = _Worker(self._context, self.megabytes)
        self._all[self._all.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        """Stop every worker."""
        for w in self._all:
            w.stop()
