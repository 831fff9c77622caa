"""A whole model's attention checked against floatref, sharded over Dask, resumable.

``run(dump, ...)`` plans the dump's shards (one per layer and head, :mod:`.dump`),
runs them in this process (``engine="serial"``, the default: Dask is not imported) or on
Dask (``engine="dask"``: a LocalCluster of worker processes, or ``scheduler=ADDRESS``),
reuses the finished shards of an earlier run when ``cache`` is given, and returns a
:class:`RunReport`.  ``symattn floatref-run`` is this call plus the report folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from symattn.floatrun.dump import plan
from symattn.floatrun.report import RunReport, build_report
from symattn.floatrun.runner import Progress, run_plan
from symattn.floatrun.shard import Options

__all__ = ["Options", "RunReport", "run"]


def run(dump: str | os.PathLike, options: Options | None = None, *, max_ulp: float | None = None,
        cache: str | os.PathLike | None = None, engine: str = "serial", workers: int | None = None,
        scheduler: str | None = None, progress: Progress | None = None, client: Any = None,
        ship: bool = False) -> RunReport:
    """Check every shard of ``dump``; the report (its ``status``: 0 pass, 1 fail, 2 bad input).

    ``client``: a dask.distributed Client to run on (left open); ``cache``: a folder of
    finished shards' results, reused when their inputs and options match; ``ship``: read the
    arrays here and send them to the workers (automatic when a worker cannot list the dump)."""
    options = options or Options()
    planned = plan(dump)
    outcome = run_plan(planned, options, cache=None if cache is None else Path(cache), engine=engine,
                       workers=workers, scheduler=scheduler, progress=progress, client=client, ship=ship)
    return build_report(os.fspath(dump), options.key(), max_ulp, outcome, planned.bad)
