"""``symattn floatref-run``: every layer and head of a dump against floatref, on Dask or serially.

Exit status: 0 every head within --max-ulp, 1 some head over it, 2 bad input (the dump or
some shard refused: the report is still written for the other shards).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

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
    parser.add_argument("--blocks", type=_count("--blocks", 1), default=1, metavar="B",
                        help="split each head's rows into B shards (long heads; the forward and LSE only)")
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
    parser.add_argument("--json", action="store_true", help="print summary.json on stdout as well")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run)


def _progress(quiet: bool):
    if quiet:
        return None

    def show(done: int, total: int, name: str, seconds: float) -> None:
        rate = done / seconds if seconds > 0 else 0.0
        left = (total - done) / rate if rate else 0.0
        print(f"floatref-run: {done}/{total} shards ({name}; {rate:.2g}/s, ~{left:.0f} s left)",
              file=sys.stderr, flush=True)
    return show


def run(args: argparse.Namespace) -> Outcome:
    from symattn import floatrun
    from symattn.document.build.floatrun import build_run_document
    from symattn.document.formats import print_document
    from symattn.floatrun import folder
    from symattn.floatrun.dump import cap_shards, plan
    from symattn.floatrun.report import build_report
    from symattn.floatrun.runner import run_plan

    if args.blocks > 1 and args.rows != "all":
        from symattn.floatref.errors import FloatRefError

        raise FloatRefError("--blocks splits every row into shards and --rows samples them: give one of them")
    options = floatrun.Options(blocks=args.blocks, dtype=args.dtype, causal=args.causal, scale=args.scale, worst=args.worst,
                               rows=args.rows, seed=args.seed, backward=args.backward)
    planned = plan(args.dump)                       # a bad dump is refused before -o is touched
    cap_shards(planned, args.dump, args.blocks)
    cache = folder.prepare(args.report_dir)
    scheduler = args.scheduler or (None if args.serial or args.workers else
                                   os.environ.get("DASK_SCHEDULER_ADDRESS") or None)
    engine = "serial" if args.serial else "dask"
    if not args.quiet and engine == "dask":
        print(f"floatref-run: {len(planned.shards)} shards on "
              f"{scheduler or 'a local Dask cluster'}", file=sys.stderr, flush=True)
    try:
        outcome = run_plan(planned, options, cache=cache, engine=engine, workers=args.workers,
                           scheduler=scheduler, progress=_progress(args.quiet))
    except KeyboardInterrupt:
        kept = len(list(cache.glob("*.json")))
        print(f"floatref-run: stopped; {kept} finished shards kept in {cache} (run the same command "
              "again to resume)", file=sys.stderr)
        raise
    if outcome.dashboard and not args.quiet:
        print(f"floatref-run: the Dask dashboard was {outcome.dashboard}", file=sys.stderr)
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
