"""Running the shards: in this process (serial), or on Dask (a LocalCluster or a cluster's scheduler).

symattn grows no scheduler of its own: the shards are independent, and Dask's
``Client.map`` / ``as_completed`` place them, retry a shard whose worker died on another
worker, and report each as it finishes.  A LocalCluster is worker *processes*, one thread
each (python-flint is not thread-safe; each shard pins flint's threads to 1 as well).

Resuming: each finished shard's result is written whole (``output.files.write_atomically``)
to the cache folder as ``L{layer}.H{head}.json``, holding the content hash of its input
files and the options.  A rerun reuses a result whose hash still matches and computes the
rest; a run killed at any point loses at most the shards in flight.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator

from symattn.floatref.errors import FloatRefError
from symattn.floatrun.dump import Plan, Shard, cap_shards
from symattn.floatrun.shard import Options, check_shard
from symattn.limits import MAX_RESULT_BYTES, MAX_WORKERS

#: bump when a shard's result changes meaning: older cached results are then recomputed
RESULT_VERSION = 2                  # 2: every row's pattern and the rows over FLOOR ulps
#: how long to wait for a scheduler named by --scheduler
CONNECT_SECONDS = 30

Progress = Callable[[int, int, str, float], None]


@dataclass
class Outcome:
    """Every shard's result (in shard order), and how many were computed or reused."""

    results: list[dict[str, Any]] = field(default_factory=list)
    computed: int = 0
    reused: int = 0
    ran_on: str = "serial"
    dashboard: str | None = None


def _file_hash(path: Path, memo: dict[str, str]) -> str:
    key = os.fspath(path)
    if key not in memo:
        digest = hashlib.sha256()
        try:
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            memo[key] = "unreadable"
            return memo[key]
        memo[key] = digest.hexdigest()
    return memo[key]


def shard_key(shard: Shard, options: Options, memo: dict[str, str]) -> str:
    """The content hash of a shard's input files, its layout and the options (not the dump's path)."""
    layout = asdict(shard)
    layout.pop("root")
    data = {"version": RESULT_VERSION, "layout": layout, "options": options.key(),
            "files": {f: _file_hash(Path(shard.root) / f, memo) for f in shard.files()}}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def cached(folder: Path | None, shard: Shard, key: str) -> dict[str, Any] | None:
    """A finished result of this very shard and inputs, if the cache folder holds one."""
    if folder is None:
        return None
    path = folder / f"{shard.name}.json"
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULT_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict) and data.get("key") == key and data.get("status") == "ok":
        return data
    return None


def store(folder: Path | None, result: dict[str, Any]) -> None:
    """Write one finished shard's result whole (a kill leaves the old file or the new one)."""
    if folder is None or result.get("status") != "ok":
        return                              # bad shards are cheap to find again and may be fixed
    from symattn.output.files import write_atomically

    text = json.dumps(result, indent=1, sort_keys=True, allow_nan=False) + "\n"
    write_atomically(text, folder / f"{result['shard']}.json", error=FloatRefError)


def run_plan(plan: Plan, options: Options, *, cache: Path | None = None, engine: str = "serial",
             workers: int | None = None, scheduler: str | None = None,
             progress: Progress | None = None, client: Any = None,
             started: Callable[[Outcome], None] | None = None) -> Outcome:
    """Every shard of the plan, computed or reused; engine 'serial' (no Dask) or 'dask' (on
    ``client``, a dask.distributed Client of the caller's, which is left open, when given).
    ``started(outcome)`` is called once the engine is up, when some shard is to be computed
    (``outcome.reused``, ``ran_on`` and ``dashboard`` are known then)."""
    cap_shards(plan, "the dump", options.blocks)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise FloatRefError(f"workers = {workers!r}: give a whole number from 1 to {MAX_WORKERS:,} (MAX_WORKERS)")
    memo: dict[str, str] = {}
    shards = [replace(s, block=b, blocks=options.blocks) for s in plan.shards for b in range(options.blocks)]
    keys = {s.name: shard_key(s, options, memo) for s in shards}
    outcome = Outcome(ran_on=engine)
    found: dict[str, dict[str, Any]] = {}
    todo = []
    for shard in shards:
        hit = cached(cache, shard, keys[shard.name])
        if hit is not None:
            found[shard.name] = hit
        else:
            todo.append(shard)
    outcome.reused = len(found)
    start, total = time.monotonic(), len(todo)
    if client is not None:
        engine = outcome.ran_on = "dask"
    if engine == "serial" and todo and started is not None:
        started(outcome)
    stream = (_serial(todo, options) if engine == "serial"
              else _dask(todo, options, workers, scheduler, outcome, client, started))
    try:
        for done, result in enumerate(stream, 1):
            result["key"] = keys[result["shard"]]
            store(cache, result)
            found[result["shard"]] = result
            outcome.computed += 1
            if progress is not None:
                progress(done, total, result["shard"], time.monotonic() - start)
    finally:                    # Ctrl-C, a bad --scheduler: the cluster is closed, finished shards kept
        stream.close()
    outcome.results = [found[s.name] for s in shards]
    return outcome


def _serial(todo: Iterable[Shard], options: Options) -> Generator[dict[str, Any], None, None]:
    for shard in todo:
        yield check_shard(shard, options)


@contextlib.contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Start the local workers with SIGINT ignored (a process started so keeps it ignored, and
    Python then installs no KeyboardInterrupt): Ctrl-C at a terminal reaches the whole process
    group, and the workers would each print a traceback while this process closes them."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield                                  # signals are the main thread's; nothing to change
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


#: the environment Dask's nanny gives a new worker, less ``MALLOC_TRIM_THRESHOLD_``: Dask sets
#: it to 64 KiB, and glibc then keeps its mmap threshold fixed at 128 KiB, so every large numpy
#: temporary of a shard is fresh pages faulted in: a (1024, 64) shard took 24 % longer so (0.91 s
#: against 0.73 s in one process, measured with and without the variable)
WORKER_ENVIRON = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}


def local_cluster(workers: int, **kwargs: Any) -> Any:
    """A LocalCluster of ``workers`` processes, one thread each, with ``WORKER_ENVIRON``."""
    import dask.config
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ": dict(WORKER_ENVIRON)}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, **kwargs)


def _serves_dashboard(client: Any, local: bool) -> bool:
    """Whether the scheduler serves Dask's dashboard: a local one only with bokeh installed (it
    is in this process; without bokeh the page only says to install it), a remote one when it
    lists the service."""
    if local:
        import importlib.util

        return importlib.util.find_spec("bokeh") is not None
    return "dashboard" in (client.scheduler_info().get("services") or {})


def _dask(todo: list[Shard], options: Options, workers: int | None, scheduler: str | None,
          outcome: Outcome, given: Any = None,
          started: Callable[[Outcome], None] | None = None) -> Generator[dict[str, Any], None, None]:
    """The shards on Dask, yielded as they finish; the cluster is closed however the loop ends."""
    try:
        import logging

        from dask.distributed import Client, as_completed
    except ImportError:
        raise FloatRefError("running on Dask needs dask.distributed: pip install 'symattn[distributed]' "
                            "(or --serial to run in this process)") from None
    if not todo:
        return
    cluster = client = None
    try:
        if given is not None:
            client = given
        elif scheduler:
            try:
                client = Client(scheduler, timeout=CONNECT_SECONDS)
            except (OSError, TimeoutError) as exc:
                raise FloatRefError(f"--scheduler {scheduler}: cannot connect ({exc}); start one with "
                                    "dask scheduler, or leave --scheduler out for local workers") from None
        else:
            n = workers or max(1, min(os.cpu_count() or 1, len(todo)))
            # a free port (8787 may be another cluster's: Dask then warns on stderr); the workers'
            # logs silenced: their failures come back as shard results, and what they log when
            # Ctrl-C closes the scheduler first (a heartbeat's traceback) is noise
            with _workers_ignore_ctrl_c():
                cluster = local_cluster(n, dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = Client(cluster)
        where = ("the caller's client" if given is not None else scheduler if scheduler
                 else f"{n} local workers")
        outcome.ran_on = f"dask ({where})"
        if _serves_dashboard(client, local=cluster is not None):
            outcome.dashboard = client.dashboard_link
        if started is not None:
            started(outcome)
        futures = client.map(check_shard, todo, [options] * len(todo), pure=False,
                             key=[f"floatref-run-{s.name}-{os.getpid()}-{time.monotonic_ns()}" for s in todo])
        names = {f.key: s for f, s in zip(futures, todo)}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:     # a worker's own failure (not bad data): the shard is reported
                shard = names[future.key]
                name = shard.name
                yield {"shard": name, "layer": shard.layer, "head": shard.head, "status": "bad",
                       "error": f"{name}: the worker failed ({type(exc).__name__}: {str(exc)[:200]})"}
    finally:
        if client is not None and given is None:
            client.close()
        if cluster is not None:
            cluster.close()
