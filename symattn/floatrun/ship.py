"""How shards reach Dask's workers: as a file name the worker reads, or as the arrays themselves.

By default a shard travels as its file names and options and the worker reads the dump
from the same path (a shared filesystem).  When a worker cannot list the dump folder, or
``--ship-inputs`` asks, the client reads each head's arrays with the same header-checked
readers and caps (never a pickle), ``client.scatter``s them once per head, and the head's
row blocks run on those arrays.  Nothing else changes: the content hash of the inputs is
the client's in both ways, so a run resumes the same whichever way its shards travelled.
At most IN_FLIGHT heads per worker are read ahead, so the client holds a few heads'
arrays, not the dump's.
"""

from __future__ import annotations

import os
from typing import Any, Generator

from symattn.floatrun.dump import Shard
from symattn.floatrun.shard import Options, check_shard, guarded, load_inputs

#: heads whose arrays the client has read and sent, per worker, ahead of the results
IN_FLIGHT = 2


def can_list(folder: str) -> bool:
    """Whether this process (a worker) can list ``folder`` (the dump) and so read its files."""
    try:
        with os.scandir(folder) as entries:
            next(entries, None)
        return True
    except OSError:
        return False


def workers_see(client: Any, roots: set[str]) -> bool:
    """Whether every worker of the client's cluster can list every dump folder."""
    for root in sorted(roots):
        if not all(client.run(can_list, root).values()):
            return False
    return True


def result_of(future: Any, shard: Shard) -> dict[str, Any]:
    """The finished shard's result; a worker's own failure (not bad data) as the shard's bad
    result, so the rest go on."""
    try:
        return future.result()
    except Exception as exc:
        return {"shard": shard.name, "layer": shard.layer, "head": shard.head, "status": "bad",
                "error": f"{shard.name}: the worker failed ({type(exc).__name__}: {str(exc)[:200]})"}


def by_path(client: Any, todo: list[Shard], options: Options, tag: str) -> Generator[dict[str, Any], None, None]:
    """Every shard submitted as file names and options; results as they finish."""
    from dask.distributed import as_completed

    futures = client.map(check_shard, todo, [options] * len(todo), pure=False,
                         key=[f"floatref-run-{s.name}-{tag}" for s in todo])
    names = {f.key: s for f, s in zip(futures, todo)}
    for future in as_completed(futures):
        yield result_of(future, names[future.key])


def _heads(todo: list[Shard]) -> list[list[Shard]]:
    groups: dict[str, list[Shard]] = {}
    for s in todo:
        groups.setdefault(s.head_name, []).append(s)
    return list(groups.values())


def shipped(client: Any, todo: list[Shard], options: Options, tag: str) -> Generator[dict[str, Any], None, None]:
    """Every shard with its arrays read here and sent along, a few heads ahead of the results."""
    from dask.distributed import as_completed

    from symattn.floatrun.blocks import worker_count

    heads = iter(_heads(todo))
    limit = max(2, IN_FLIGHT * worker_count(client))
    running = as_completed()
    names: dict[str, Shard] = {}
    held: dict[str, list[Any]] = {}           # head → [its scattered arrays, blocks still running]
    ready: list[dict[str, Any]] = []          # results known here (a file refused by the client's read)
    while True:
        while len(held) < limit and not ready:
            group = next(heads, None)
            if group is None:
                break
            first = group[0]
            read = guarded(first, lambda: {"inputs": load_inputs(first)})  # noqa: B023 (called here)
            if read["status"] != "ok":        # the same one line a worker would give, for each block
                ready.extend({**read, "shard": s.name} for s in group)
                continue
            data = client.scatter([read["inputs"]], hash=False)[0]
            held[group[0].head_name] = [data, len(group)]
            for s in group:
                future = client.submit(check_shard, s, options, data, pure=False, key=f"floatref-run-{s.name}-{tag}")
                names[future.key] = s
                running.add(future)
        if ready:
            yield ready.pop(0)
            continue
        if running.is_empty():
            return
        future = next(running)
        shard = names.pop(future.key)
        result = result_of(future, shard)
        count = held[shard.head_name]
        count[1] -= 1
        if count[1] == 0:
            del held[shard.head_name]          # its arrays are released on the workers
        yield result
