"""Derivations off the event loop: a few worker processes, a bounded queue, a time budget.

Why processes of our own rather than a bare ``ProcessPoolExecutor``: a problem that runs
past its budget must be stopped, and an executor cannot kill one worker (Python 3.11).
Each worker here is a ``multiprocessing`` process (spawned, so no lock of the server's
threads is inherited) answering jobs on its pipe; a job over the budget has its worker
killed and replaced, so the server never hangs on it; a worker leads a process group of
its own, so a TeX it started for a PDF is killed with it.  Each worker also caps its own
address space (``RLIMIT_AS``), so a problem that would take gigabytes fails as a
``MemoryError`` in the worker, not in the server; and each job has a budget of its own
below that (:func:`request_budget`: so many MiB over what the worker holds when the job
starts), so one heavy request is refused long before the worker's cap.  A full queue is
refused at once, and a freed worker goes to the oldest waiter (:class:`Handoff`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["REQUEST_MEGABYTES", "Busy", "Handoff", "Result", "TooLarge", "WorkerPool", "request_budget"]

TOO_LARGE = "too large for the page: use the CLI (symattn explain)"
REQUEST_MEGABYTES = 512     # one job's memory over what its worker holds (the page's problems need < 100)


class Busy(Exception):
    """Every worker is busy and the queue is full: try again shortly."""


class TooLarge(Exception):
    """The job ran past the time or memory budget; its worker was replaced."""


@dataclass(frozen=True)
class Result:
    """A worker's answer: the derivation's HTML, a download's bytes, or the one-line error of
    an invalid problem."""

    html: str | None = None
    error: str | None = None
    data: bytes | None = None


def _limit_memory(megabytes: int) -> None:
    try:
        import resource
    except ImportError:          # not POSIX: no address-space cap
        return
    cap = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _address_space() -> int | None:
    """The bytes of this process's address space now (Linux's /proc/self/statm; None elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def request_budget(megabytes: int | None) -> Iterator[None]:
    """Within it, the address space may grow by at most ``megabytes`` MiB over what it is now.

    Why the address space (``RLIMIT_AS``'s soft limit, lowered for one job and raised back to
    the hard cap after it) rather than a watch on the RSS, ``tracemalloc`` or an estimate from
    the problem's shape: the kernel refuses the allocation that passes it, at once, whoever
    makes it (Python, GMP/FLINT, mpmath), so no spike slips between two looks; it costs
    nothing per allocation; and no estimate has to foresee what SymPy will build.  A refused
    allocation is a ``MemoryError`` (or a GMP abort, the worker dying): too large either way."""
    try:
        import resource
    except ImportError:          # not POSIX: the worker's cap only
        yield
        return
    now = _address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if megabytes is None or now is None:
        yield
        return
    cap = now + megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _answer(job: dict[str, Any]) -> tuple[str, str | bytes]:
    from symattn.errors import SymattnError
    from symattn.serve.derive import check_fragment, derive_fragment, one_line
    from symattn.serve.downloads import derivation_file, worksheet_zip

    try:
        kind = job.get("kind", "derive")
        if kind == "check":
            return "ok", check_fragment(job["problem"], job["figures"])
        if kind == "worksheet":
            return "ok", worksheet_zip(job["problem"], job.get("options"))
        if kind != "derive":
            return "ok", derivation_file(job["problem"], kind, job.get("digits", 3), **job.get("view", {}))
        return "ok", derive_fragment(job["problem"], job.get("digits", 3), **job.get("view", {}))
    except SymattnError as exc:
        return "error", one_line(exc)
    except (MemoryError, RecursionError):
        return "large", TOO_LARGE


def work(conn: multiprocessing.connection.Connection, megabytes: int,
         request_megabytes: int | None = None) -> None:
    """A worker's loop: warm up on the lesson, then answer jobs until the pipe closes, each
    within ``request_megabytes`` MiB more than the worker holds (the whole worker: ``megabytes``)."""
    try:
        os.setpgid(0, 0)         # a group of its own: a TeX it runs is killed with it
    except (AttributeError, OSError):
        pass
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
            with request_budget(request_megabytes):
                answer = _answer(job)
        except Exception as exc:   # a bug in symattn: say so, keep serving  # noqa: BLE001
            answer = ("bug", f"{type(exc).__name__}: {exc}")
        conn.send(answer)         # outside the budget: the answer's pickle is the server's


class _Worker:
    def __init__(self, context: Any, megabytes: int, request_megabytes: int | None = None) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=work, args=(child, megabytes, request_megabytes),
                                       daemon=True)
        self.process.start()
        child.close()
        self.ready = False

    def wait_ready(self, timeout: float) -> bool:
        try:
            if not self.ready and self.conn.poll(timeout):
                self.ready = self.conn.recv()[0] == "ready"
        except (EOFError, OSError):  # it died while starting
            return False
        return self.ready

    def ask(self, job: dict[str, Any], budget: float) -> tuple[str, str] | None:
        """The answer, or None when the budget ran out (blocking: run it in a thread)."""
        try:
            if not self.wait_ready(60.0):
                return None
            self.conn.send(job)
            if not self.conn.poll(budget):
                return None
            return self.conn.recv()
        except (EOFError, OSError):  # the worker died (GMP aborts when an allocation is refused)
            return None

    def stop(self) -> None:
        pid = self.process.pid
        try:                     # the worker's group: it and any TeX it started
            if pid is not None and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        except (AttributeError, OSError):
            pass
        self.process.kill()
        self.process.join(5)
        self.conn.close()


T = TypeVar("T")


class Handoff(Generic[T]):
    """Idle workers and the requests waiting for one, in order of arrival.

    Why not an ``asyncio.Queue``: its ``put`` wakes the oldest getter, but a request arriving
    before that getter runs finds the queue non-empty and takes the worker, and the woken one
    goes to the back.  Here a freed worker is handed to the oldest waiter at once, and a
    newcomer never passes a waiter: first come, first served."""

    def __init__(self, items: list[T], queue: int) -> None:
        self._idle: deque[T] = deque(items)
        self._waiters: deque[asyncio.Future[T]] = deque()
        self.queue = queue

    @property
    def waiting(self) -> int:
        """How many requests wait for a worker."""
        return sum(1 for f in self._waiters if not f.done())

    async def acquire(self) -> T:
        """A worker: an idle one at once, else the next one freed after the older waiters';
        :class:`Busy` when ``queue`` requests already wait."""
        if self._idle and not self.waiting:
            return self._idle.popleft()
        if self.waiting >= self.queue:
            raise Busy("every worker is busy: try again in a moment")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            return await future
        except asyncio.CancelledError:    # the client left: its worker, if handed over, goes on
            if future.done() and not future.cancelled():
                self.release(future.result())
            elif future in self._waiters:
                self._waiters.remove(future)
            raise

    def release(self, item: T) -> None:
        """A worker freed: to the oldest waiter still waiting, or back to the idle ones."""
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(item)
                return
        self._idle.append(item)


class WorkerPool:
    """``workers`` processes and at most ``queue`` jobs waiting for one; ``budget`` seconds
    and ``request_megabytes`` MiB each (a worker's whole address space: ``megabytes``)."""

    def __init__(self, workers: int = 2, queue: int = 8, budget: float = 10.0,
                 megabytes: int = 2048, request_megabytes: int | None = REQUEST_MEGABYTES) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.budget, self.megabytes, self.queue = budget, megabytes, queue
        self.request_megabytes = request_megabytes
        self._all = [self._start() for _ in range(workers)]
        self._handoff: Handoff[_Worker] | None = None

    def warm(self, timeout: float = 60.0) -> float:
        """Wait until every worker has started and worked the lesson (its imports and caches
        loaded), so the first request does not wait for them; the seconds waited."""
        start = time.monotonic()
        for w in self._all:
            w.wait_ready(max(0.0, timeout - (time.monotonic() - start)))
        return time.monotonic() - start

    def _workers(self) -> Handoff[_Worker]:
        if self._handoff is None:      # made on the server's loop
            self._handoff = Handoff(list(self._all), self.queue)
        return self._handoff

    async def derive(self, problem: dict[str, Any], digits: int = 3,
                     view: dict[str, Any] | None = None) -> Result:
        """The derivation of one problem (``view``: ``derive_fragment``'s places and rows);
        :class:`Busy` or :class:`TooLarge` when it cannot be."""
        return await self.run({"problem": problem, "digits": digits, "view": view or {}})

    async def check(self, problem: dict[str, Any], figures: object) -> Result:
        """The verdicts on written figures about a problem (as :meth:`derive`)."""
        return await self.run({"kind": "check", "problem": problem, "figures": figures})

    async def download(self, problem: dict[str, Any], kind: str, digits: int = 3,
                       options: Any = None,
                       view: dict[str, Any] | None = None) -> Result:
        """A download's bytes (``latex``, ``pdf``, ``html``, ``json`` at the page's ``view``, or
        ``worksheet`` with its options), made in a worker under the same budget (TeX too)."""
        job: dict[str, Any] = {"kind": kind, "problem": problem, "digits": digits, "view": view or {}}
        if options is not None:
            job["options"] = options
        return await self.run(job)

    async def run(self, job: dict[str, Any]) -> Result:
        """One job in a worker: at once, after a wait in the queue, or :class:`Busy`."""
        workers = self._workers()
        worker = await workers.acquire()
        try:
            answer = await asyncio.to_thread(worker.ask, job, self.budget)
        except BaseException:
            workers.release(self._replace(worker))
            raise
        if answer is None or answer[0] in ("large", "bug"):   # a worker that failed starts afresh
            worker = self._replace(worker)
        workers.release(worker)
        if answer is None or answer[0] == "large":
            raise TooLarge(TOO_LARGE)
        kind, payload = answer
        if kind == "ok":
            return Result(data=payload) if isinstance(payload, bytes) else Result(html=payload)
        if kind == "error":
            return Result(error=str(payload))
        raise RuntimeError(f"the worker failed: {payload!r}")

    def _start(self) -> _Worker:
        return _Worker(self._context, self.megabytes, self.request_megabytes)

    def _replace(self, worker: _Worker) -> _Worker:
        worker.stop()
        fresh = self._start()
        self._all[self._all.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        """Stop every worker."""
        for w in self._all:
            w.stop()
