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
from symattn.floatrun import dump as dump_module
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
    total: int = 0                      # shards, once the heads' row blocks are known
    blocks: dict[str, Any] | None = None    # --blocks auto: what it chose (the report's run.blocks)
    shipped: bool = False               # the client read the inputs and sent them to the workers


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
    # the blocks the shard is one of, however they were chosen: a shard of --blocks 4 is the
    # same shard when --blocks auto chooses 4
    data = {"version": RESULT_VERSION, "layout": layout, "options": {**options.key(), "blocks": shard.blocks},
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
             started: Callable[[Outcome], None] | None = None, ship: bool = False) -> Outcome:
    """Every shard of the plan, computed or reused; engine 'serial' (no Dask) or 'dask' (on
    ``client``, a dask.distributed Client of the caller's, which is left open, when given).
    ``started(outcome)`` is called once the engine is up, when some shard is to be computed
    (``outcome.reused``, ``ran_on`` and ``dashboard`` are known then).  ``ship``: the client
    reads each shard's arrays and sends them to the workers (automatic when a worker cannot
    list the dump folder)."""
    if options.blocks != "auto":
        cap_shards(plan, "the dump", int(options.blocks))
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise FloatRefError(f"workers = {workers!r}: give a whole number from 1 to {MAX_WORKERS:,} (MAX_WORKERS)")
    if client is not None:
        engine = "dask"
    owned = None
    if engine == "dask" and client is None and scheduler and options.blocks == "auto":
        client = owned = connect(scheduler)          # auto needs the cluster's worker count first
    try:
        return _run_shards(plan, options, cache, engine, workers, scheduler, progress, client, started,
                           ship, owned is not None)
    finally:
        if owned is not None:
            owned.close()


def block_counts(plan: Plan, options: Options, workers: int) -> tuple[dict[str, int], dict[str, Any] | None]:
    """Each head's row blocks (by head name) and, under --blocks auto, what was chosen."""
    if options.blocks != "auto":
        return {s.head_name: int(options.blocks) for s in plan.shards}, None
    from symattn.floatrun import blocks as model

    shapes = {s.head_name: model.head_shape(s, options) for s in plan.shards}
    counts = model.choose(shapes, workers, options.worst)
    total = sum(counts.values())
    if total > dump_module.MAX_SHARDS:
        raise FloatRefError(f"the dump: {len(counts):,} heads in {total:,} shards (--blocks auto), over the cap of "
                            f"{dump_module.MAX_SHARDS:,} shards (MAX_SHARDS); check part of the model at a time")
    estimates = {name: model.largest(shape, counts[name], options.worst)
                 for name, shape in shapes.items() if shape is not None}
    return counts, {"rule": "auto", "target_seconds": model.TARGET_SECONDS, "workers": workers, "shards": total,
                    "split": {name: n for name, n in counts.items() if n > 1},
                    "whole_for_backward": sorted(n for n, sh in shapes.items() if sh is not None and sh.backward),
                    "longest_estimate_seconds": round(max(estimates.values(), default=0.0), 2)}


def _worker_slots(engine: str, workers: int | None, client: Any) -> int:
    from symattn.floatrun.blocks import local_workers, worker_count

    if client is not None:
        return worker_count(client)
    return 1 if engine == "serial" else local_workers(workers)


def _run_shards(plan: Plan, options: Options, cache: Path | None, engine: str, workers: int | None,
                scheduler: str | None, progress: Progress | None, client: Any,
                started: Callable[[Outcome], None] | None, ship: bool, owned: bool) -> Outcome:
    memo: dict[str, str] = {}
    counts, chosen = block_counts(plan, options, _worker_slots(engine, workers, client))
    shards = [replace(s, block=b, blocks=counts[s.head_name]) for s in plan.shards for b in range(counts[s.head_name])]
    keys = {s.name: shard_key(s, options, memo) for s in shards}
    outcome = Outcome(ran_on=engine, total=len(shards), blocks=chosen)
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
    if engine == "serial" and todo and started is not None:
        started(outcome)
    stream = (_serial(todo, options) if engine == "serial"
              else _dask(todo, options, workers, scheduler, outcome, client, started,
                         ship, owned))
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
    """A LocalCluster of ``workers`` processes, one thread each, with ``WORKER_ENVIRON``.

    Dask's nanny writes its pre-spawn variables into this process's own environment and leaves
    them there, so after any other LocalCluster in this process ``MALLOC_TRIM_THRESHOLD_=65536``
    would reach the workers by inheritance: while they start, Dask's own value is held back (a
    value of the user's, any other, is left alone)."""
    import dask.config
    from dask.distributed import LocalCluster

    dasks = str(dask.config.get("distributed.nanny.pre-spawn-environ", {}).get("MALLOC_TRIM_THRESHOLD_", ""))
    held = os.environ.pop("MALLOC_TRIM_THRESHOLD_") if dasks and os.environ.get(
        "MALLOC_TRIM_THRESHOLD_") == dasks else None
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": dict(WORKER_ENVIRON)}):
            return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, **kwargs)
    finally:
        if held is not None:
            os.environ["MALLOC_TRIM_THRESHOLD_"] = held


def _serves_dashboard(client: Any, local: bool) -> bool:
    """Whether the scheduler serves Dask's dashboard: a local one only with bokeh installed (it
    is in this process; without bokeh the page only says to install it), a remote one when it
    lists the service."""
    if local:
        import importlib.util

        return importlib.util.find_spec("bokeh") is not None
    return "dashboard" in (client.scheduler_info().get("services") or {})


def connect(scheduler: str) -> Any:
    """A Client of the scheduler at ``scheduler`` (one line when there is none)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise FloatRefError("running on Dask needs dask.distributed: pip install 'symattn[distributed]' "
                            "(or --serial to run in this process)") from None
    try:
        return Client(scheduler, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError) as exc:
        raise FloatRefError(f"--scheduler {scheduler}: cannot connect ({exc}); start one with "
                            "dask scheduler, or leave --scheduler out for local workers") from None


def _dask(todo: list[Shard], options: Options, workers: int | None, scheduler: str | None,
          outcome: Outcome, given: Any = None, started: Callable[[Outcome], None] | None = None,
          ship: bool = False, opened: bool = False) -> Generator[dict[str, Any], None, None]:
    """The shards on Dask, yielded as they finish; the cluster is closed however the loop ends.
    ``opened``: ``given`` is the client run_plan opened for ``scheduler`` (it closes it)."""
    try:
        import logging

        from dask.distributed import Client
    except ImportError:
        raise FloatRefError("running on Dask needs dask.distributed: pip install 'symattn[distributed]' "
                            "(or --serial to run in this process)") from None
    if not todo:
        return
    from symattn.floatrun import ship as shipping

    cluster = client = None
    try:
        if given is not None:
            client = given
        elif scheduler:
            client = connect(scheduler)
        else:
            n = workers or max(1, min(os.cpu_count() or 1, len(todo)))
            # a free port (8787 may be another cluster's: Dask then warns on stderr); the workers'
            # logs silenced: their failures come back as shard results, and what they log when
            # Ctrl-C closes the scheduler first (a heartbeat's traceback) is noise
            with _workers_ignore_ctrl_c():
                cluster = local_cluster(n, dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = Client(cluster)
        where = (scheduler if opened or (given is None and scheduler) else "the caller's client"
                 if given is not None else f"{n} local workers")
        outcome.ran_on = f"dask ({where})"
        if _serves_dashboard(client, local=cluster is not None):
            outcome.dashboard = client.dashboard_link
        outcome.shipped = ship or not shipping.workers_see(client, {s.root for s in todo})
        if started is not None:
            started(outcome)
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        yield from (shipping.shipped(client, todo, options, tag) if outcome.shipped
                    else shipping.by_path(client, todo, options, tag))
    finally:
        if client is not None and given is None:
            client.close()
        if cluster is not None:
            cluster.close()
