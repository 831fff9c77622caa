"""Fuzz at the caps, large budget: hostile inputs through every API, each in a capped worker.

The same strategies and runners as ``tests/test_fuzz_caps.py`` (problem
entries through every view, TOML files through ``explain``, written
answers, targets, CSV cells through ``grade``, claims through ``facts``),
run in a worker process whose address space is capped with
``resource.setrlimit(RLIMIT_AS, 1 GiB)``.  Each input is a failure when it

* raises anything but a SymattnError (``exception:<Type>``; ``MemoryError``
  is ``memory``), or breaks the one-line/exit-status contract (``contract``),
* takes more than ``--slow`` seconds (default 1) of wall time, twice: once
  in the running worker and again in a fresh one (``slow``; the second run
  keeps a busy neighbour's load from counting as slowness),
* runs past ``--timeout`` seconds: the worker is killed (``hang``),
* kills the worker with a signal (``signal:<NAME>``; e.g. SIGFPE, or an
  allocation refused by the cap inside C code).

Usage::

    python benchmarks/fuzz_caps.py                 # 100,000 inputs over all APIs
    python benchmarks/fuzz_caps.py --n 10000 --seed 1 --report failures.jsonl
    python benchmarks/fuzz_caps.py --apis answer,target --n 2000

It prints a summary of failures by API and kind, with one sample input for
each distinct failure; ``--report`` writes every failure (full input) as
JSON lines.  Exit status 1 when any input failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
GIB = 1 << 30


# ---------------------------------------------------------------- the driver

def _short(case, limit: int = 160) -> str:
    text = repr(case)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def fuzz(apis: list[str], n: int, seed: int, timeout: float, slow: float, memory: int,
         report: Path | None, budget: float | None) -> int:
    sys.path.insert(0, str(TESTS))
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from test_fuzz_caps import CASES, Worker

    work, verify = Worker(memory), Worker(memory)
    failures: list[dict] = []
    counts: collections.Counter = collections.Counter()
    times: dict[str, list[float]] = collections.defaultdict(list)
    started = time.monotonic()
    out = report.open("w", encoding="utf-8") if report else None
    per_api = max(1, n // len(apis))
    try:
        for api in apis:      # each ``one`` is run right here, so its closure sees this api
            api_started = time.monotonic()
            @hypothesis_seed(seed)
            @settings(max_examples=per_api, database=None, deadline=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=CASES[api])
            def one(case):
                if budget is not None and time.monotonic() - api_started > budget / len(apis):
                    return
                kind, etype, message, tb, seconds, peak = work.run(api, case, timeout)
                counts[api, "inputs"] += 1
                times[api].append(seconds)
                first = seconds
                if kind == "ok" and seconds > slow:
                    # Confirm in a fresh worker (no caches; on a shared machine one slow
                    # run may be the neighbours' load): slow only when both runs are.
                    verify.stop()
                    again = verify.run(api, case, timeout)
                    seconds = max(again[4], slow) if again[0] == "hang" else min(seconds, again[4])
                    if seconds > slow:
                        kind = "slow"
                if kind == "ok":
                    return
                counts[api, kind] += 1
                record = {"api": api, "kind": kind, "type": etype, "message": message,
                          "seconds": round(seconds, 3), "first_seconds": round(first, 3),
                          "peak_mb": round(peak / 2**20),
                          "input": case, "traceback": tb}
                failures.append(record)
                if out:
                    out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                    out.flush()

            one()
    finally:
        work.stop()
        verify.stop()
        if out:
            out.close()
    _summary(apis, counts, times, failures, slow, time.monotonic() - started)
    return 1 if failures else 0


def _summary(apis, counts, times, failures, slow, elapsed) -> None:
    print(f"fuzz_caps: {sum(counts[a, 'inputs'] for a in apis)} inputs in {elapsed:.0f} s")
    for api in apis:
        ts = sorted(times[api])
        if not ts:
            continue
        kinds = {k: v for (a, k), v in counts.items() if a == api and k != "inputs"}
        print(f"  {api:11s} {counts[api, 'inputs']:6d} inputs, median {1000 * ts[len(ts) // 2]:.1f} ms, "
              f"max {ts[-1]:.2f} s; failures: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                                                  or "none"))
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for f in failures:
        first = (f["message"] or "").split("\n")[0][:80]
        keep = f["kind"].startswith("exception") or f["kind"] == "contract"
        groups[f["api"], f["kind"], first if keep else ""].append(f)
    if groups:
        print(f"\n{len(failures)} failures, {len(groups)} distinct (api, kind, message):")
    for (api, kind, first), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        sample = min(items, key=lambda f: len(repr(f["input"])))
        print(f"- {api} {kind} x{len(items)}: {first}")
        print(f"    e.g. {_short(sample['input'])}  ({sample['seconds']} s, peak {sample['peak_mb']} MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="inputs in all (split over the APIs)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (same seed, same inputs)")
    parser.add_argument("--apis", default="problem,toml,answer,target,figures,grade,claims,claims-file")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a worker is killed")
    parser.add_argument("--slow", type=float, default=1.0, help="seconds above which an input is slow")
    parser.add_argument("--memory", type=int, default=GIB, help="worker address-space cap in bytes")
    parser.add_argument("--report", type=Path, help="write every failure as JSON lines")
    parser.add_argument("--budget", type=float,
                        help="seconds in all, split evenly over the APIs: stop drawing inputs after it")
    args = parser.parse_args(argv)
    apis = [a.strip() for a in args.apis.split(",") if a.strip()]
    return fuzz(apis, args.n, args.seed, args.timeout, args.slow, args.memory, args.report, args.budget)


if __name__ == "__main__":
    sys.exit(main())
