"""``symattn floatref-run``: every layer and head of a dump against floatref, on Dask or serially.

Exit status: 0 every head within --max-ulp, 1 some head over it, 2 bad input (the dump or
some shard refused: the report is still written for the other shards).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, TextIO

from symattn.commands import Outcome
from symattn.commands.floatref import BINARY_NAMES, max_ulp, scale
from symattn.limits import MAX_WORKERS, MAX_WORST

ORDER = 61


def _align(text: str) -> str:
    name = text.strip().lower().replace("_", "-")
    if name not in ("top-left", "bottom-right", "none"):
        raise argparse.ArgumentTypeError(f"--causal takes top-left, bottom-right or none, got {text!r}")
    return name


def _rows(text: str) -> str:
    from symattn.floatrun.sampling import parse_rows
    from symattn.floatref.errors import FloatRefError

    try:
        return parse_rows(text)
    except FloatRefError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(flag: str, low: int, high: tuple[int, str] | None = None):
    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{flag} must be at least {low}, got {value}")
        if high is not None and value > high[0]:
            raise argparse.ArgumentTypeError(f"{flag} must be at most {high[0]:,} ({high[1]}), got {value:,}")
        return value
    return read


def _blocks(text: str) -> int | str:
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--blocks takes a whole number of at least 1 or auto, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--blocks must be at least 1 (or auto), got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "floatref-run", help="every layer and head of a dump against floatref, on Dask (exit 0, 1 over "
                             "--max-ulp, 2 bad input)",
        description="Checks a kernel's dumped attention (L{layer}.H{head}.safetensors or .npz with q, k, v, "
                    "out and optionally do, dq, dk, dv, lse; or a manifest.toml) head by head against the "
                    "exact values, on a Dask LocalCluster, an existing cluster (--scheduler) or in this "
                    "process (--serial). Resumable: finished shards in REPORT/shards/ are reused.")
    parser.add_argument("dump", metavar="DUMP", help="the dump folder")
    parser.add_argument("-o", "--output", dest="report_dir", metavar="REPORT", required=True,
                        help="the report folder (summary.json, index.html, shards/); made or replaced whole")
    parser.add_argument("--dtype", choices=BINARY_NAMES, help="the kernel's format (default: the manifest's, "
                        "else each out array's)")
    parser.add_argument("--causal", nargs="?", const="top-left", type=_align, metavar="ALIGN",
                        help="is_causal; ALIGN top-left (PyTorch, default) or bottom-right (FlashAttention >= 2.1); "
                             "none overrides a manifest")
    parser.add_argument("--scale", type=scale, help="the scale (default: the manifest's, else 1/sqrt(E) exactly)")
    parser.add_argument("--max-ulp", type=max_ulp, metavar="N",
                        help="exit 1 when some entry's error is proved to exceed N ulps")
    parser.add_argument("--rows", type=_rows, default="all", metavar="RULE",
                        help="all (default), sample:N, or sample:N+risky: a seeded sample plus the risky rows")
    parser.add_argument("--blocks", type=_blocks, default=1, metavar="B",
                        help="split each head's rows into B shards (long heads; the forward and LSE only), or "
                             "auto: per head from its shape, aiming at a few seconds a shard (a head whose "
                             "backward is checked stays whole)")
    parser.add_argument("--seed", type=_count("--seed", 0), default=0, help="the sample's seed (default 0)")
    parser.add_argument("--worst", type=_count("--worst", 0, (MAX_WORST, "MAX_WORST")), default=5, metavar="K",
                        help="certify the K worst entries per tensor (default 5)")
    parser.add_argument("--no-backward", dest="backward", action="store_false",
                        help="skip dq, dk, dv even when the dump has them")
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--serial", action="store_true", help="run in this process, without Dask")
    engine.add_argument("--workers", type=_count("--workers", 1, (MAX_WORKERS, "MAX_WORKERS")), metavar="N",
                        help="local Dask worker processes (default: one per core)")
    engine.add_argument("--scheduler", metavar="ADDRESS",
                        help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: "
                             "DASK_SCHEDULER_ADDRESS when set)")
    parser.add_argument("--ship-inputs", action="store_true",
                        help="read the arrays here and send them to the workers (for workers without the dump's "
                             "folder; automatic when a worker cannot list it)")
    parser.add_argument("--json", action="store_true", help="print summary.json on stdout as well")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr (on a terminal: a bar)")
    parser.add_argument("--progress", action="store_true",
                        help="progress lines on stderr every 10 s even when it is not a terminal (a log)")
    parser.set_defaults(run=run)


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s // 60 % 60:02d} min"


#: a redrawn bar at most this often (seconds); plain lines (not a terminal, --progress) this often
BAR_EVERY, LINE_EVERY = 0.2, 10.0
BAR_WIDTH = 24


def progress_printer(stream: TextIO, *, quiet: bool = False, lines: bool = False) -> Callable[..., None] | None:
    """Shards done, rate and time left on ``stream``: one redrawn bar on a terminal, plain
    lines every LINE_EVERY s when ``lines`` (a log), nothing when quiet or not a terminal, as
    command-line tools do (pip, curl), so a CI log or a pipe is not flooded."""
    tty = bool(getattr(stream, "isatty", lambda: False)())
    if quiet or not (tty or lines):
        return None
    last = [-1e9]

    def show(done: int, total: int, name: str, seconds: float) -> None:
        final = done == total
        if not final and seconds - last[0] < (BAR_EVERY if tty else LINE_EVERY):
            return
        last[0] = seconds
        rate = done / seconds if seconds > 0 else 0.0
        left = f"~{_duration((total - done) / rate)} left" if rate and not final else f"in {_duration(seconds)}"
        figures = f"{done}/{total} shards, {rate:.3g}/s, {left} ({name})"
        if tty:
            fill = BAR_WIDTH * done // max(total, 1)
            stream.write(f"\r\x1b[Kfloatref-run [{'#' * fill}{'.' * (BAR_WIDTH - fill)}] {figures}" + ("\n" if final else ""))
        else:
            stream.write(f"floatref-run: {figures}\n")
        stream.flush()
    return show


def start_printer(stream: TextIO, total: int, *, quiet: bool = False, lines: bool = False):
    """The line a run starts with: what is left to compute, where, and Dask's dashboard."""
    if quiet or not (lines or getattr(stream, "isatty", lambda: False)()):
        return None

    def show(outcome: Any) -> None:
        dash = f"; the Dask dashboard is {outcome.dashboard}" if outcome.dashboard else ""
        shards = outcome.total or total
        split = "" if outcome.blocks is None else f"; --blocks auto split {len(outcome.blocks['split'])} heads"
        sent = "; the inputs sent from here" if outcome.shipped else ""
        stream.write(f"floatref-run: {shards - outcome.reused} of {shards} shards to compute ({outcome.reused} "
                     f"reused) on {outcome.ran_on}{split}{sent}{dash}\n")
        stream.flush()
    return show


def run(args: argparse.Namespace) -> Outcome:
    from symattn import floatrun
    from symattn.document.build.floatrun import build_run_document
    from symattn.document.formats import print_document
    from symattn.floatrun import folder
    from symattn.floatrun.dump import cap_shards, plan
    from symattn.floatrun.report import build_report
    from symattn.floatrun.runner import block_counts, run_plan

    if args.blocks != 1 and args.rows != "all":
        from symattn.floatref.errors import FloatRefError

        raise FloatRefError("--blocks splits every row into shards and --rows samples them: give one of them")
    options = floatrun.Options(blocks=args.blocks, dtype=args.dtype, causal=args.causal, scale=args.scale, worst=args.worst,
                               rows=args.rows, seed=args.seed, backward=args.backward)
    planned = plan(args.dump)                       # a bad dump is refused before -o is touched
    if args.blocks == "auto":                       # the fewest shards auto can choose, against the cap
        block_counts(planned, options, 1)
    else:
        cap_shards(planned, args.dump, args.blocks)
    cache = folder.prepare(args.report_dir)
    scheduler = args.scheduler or (None if args.serial or args.workers else
                                   os.environ.get("DASK_SCHEDULER_ADDRESS") or None)
    engine = "serial" if args.serial else "dask"
    shown = {"quiet": args.quiet, "lines": args.progress}
    try:
        outcome = run_plan(planned, options, cache=cache, engine=engine, workers=args.workers,
                           scheduler=scheduler, progress=progress_printer(sys.stderr, **shown), ship=args.ship_inputs,
                           started=start_printer(sys.stderr, len(planned.shards), **shown))
    except KeyboardInterrupt:
        kept = len(list(cache.glob("*.json")))
        print(f"{chr(10) if sys.stderr.isatty() else ''}floatref-run: stopped; {kept} finished shards kept in {cache} (run the same command "
              "again to resume)", file=sys.stderr)
        raise
    report = build_report(args.dump, options.key(), args.max_ulp, outcome, planned.bad)
    summary = json.dumps(report.to_json(), indent=1, allow_nan=False) + "\n"
    document = build_run_document(report)
    html, text = print_document(document, "html"), print_document(document, "text")
    folder.finish(args.report_dir, {"summary.json": summary, "index.html": html, "report.txt": text})
    for bad in report.bad:
        print(f"symattn: error: {bad['error']}", file=sys.stderr)
    if args.json:                        # stdout stays one JSON document; the end line on stderr
        print(report.end_line(args.report_dir), file=sys.stderr)
        return Outcome(summary, report.status)
    return Outcome(report.end_line(args.report_dir) + "\n", report.status)
