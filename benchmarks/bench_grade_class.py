"""Benchmark: grade a class of 100,000 students against a 30-version worksheet folder
(issue 25: target under 60 s and 1 GiB), with and without the memo of the other-version
comparison, side by side in one run.

Run: python benchmarks/bench_grade_class.py [--students N] [--versions V] [--modes memo,no-memo]
     [--before TREE]    (also the symattn of another tree, e.g. the commit before the memo)

The folder is the lesson's ``symattn worksheet --versions V --seed 2026 --no-separate``;
the class CSV is drawn with ``random.Random(0)``: each answer is the student's own version's
right answer (55 %), a slip in one entry's last digit (10 %), a named mistake's answer
(15 %), another version's right answer (10 %) or another version's mistake (10 %).
Each mode grades the same CSV in a fresh process (so its peak RSS is its own) and makes the
CSV report as ``grade -o report.csv`` writes it; the reports of all modes must be byte for
byte the same.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The answer columns: rows of the lesson's steps (the file cap of 16 MiB allows about 160
#: bytes per student at 100,000 students, so whole matrices would not fit).
TARGETS = (("scores", 0), ("scaled", 1), ("weights", 0), ("weights", 1), ("weights", 2), ("output", 2))
TOKENS = ("I", "love", "cats")


def make_folder(folder: Path, versions: int) -> None:
    from symattn.cli import main

    code = main(["worksheet", "--example", "i-love-cats", "--versions", str(versions), "--seed", "2026",
                 "--no-separate", "-o", str(folder)])
    assert code in (0, None), code


def make_class(folder: Path, students: int, seed: int = 0) -> str:
    import symattn as sa
    from symattn.check.checker import Checker
    from symattn.classroom.worksheets.wrong_answers import answer_texts, figure, wrong_answers
    from symattn.numbers.certify import Rounding

    rounding = Rounding(digits=3)
    columns = [f"{step}[{TOKENS[i]}]" for step, i in TARGETS]
    rights: dict[str, dict[str, str]] = {}
    wrongs: dict[str, dict[str, list[str]]] = {}
    for path in sorted(folder.glob("version-*.toml")):
        vid = path.stem.removeprefix("version-")
        trace = sa.Trace(sa.Problem.from_toml(path))
        checker = Checker(trace)
        rights[vid], wrongs[vid] = {}, {}
        for (step, i), q in zip(TARGETS, columns):
            rights[vid][q] = figure(answer_texts(trace, step, rounding)[i:i + 1])
            wrong = {figure(w.values[i:i + 1]) for w in wrong_answers(trace, step, rounding, checker=checker)}
            wrongs[vid][q] = sorted(wrong - {rights[vid][q]}) or [rights[vid][q]]
    ids = sorted(rights, key=lambda v: (len(v), v))
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "version", *columns])
    for s in range(students):
        own = rng.choice(ids)
        row = [f"s{s:06d}", own]
        for q in columns:
            r = rng.random()
            other = rng.choice([v for v in ids if v != own])
            if r < 0.55:
                text = rights[own][q]
            elif r < 0.65:
                entries = rights[own][q].split(", ")
                k = rng.randrange(len(entries))
                e = entries[k]
                if e[-1].isdigit():
                    entries[k] = e[:-1] + str((int(e[-1]) + 1) % 10)
                text = ", ".join(entries)
            elif r < 0.80:
                text = rng.choice(wrongs[own][q])
            elif r < 0.90:
                text = rights[other][q]
            else:
                text = rng.choice(wrongs[other][q])
            row.append(text)
        writer.writerow(row)
    return out.getvalue()


def run_mode(mode: str, folder: Path, data: Path, report: Path) -> dict:
    import symattn.check.grading.othervers as othervers
    from symattn.check.grading.grade import Versions, grade

    if mode == "no-memo":
        othervers.MEMO_SIZE = 0
    wall, cpu = time.perf_counter(), time.process_time()
    graded = grade(Versions(folder=folder), data.read_bytes(), str(data))
    # what `symattn grade FOLDER class.csv -o report.csv` writes (older code: its string, encoded)
    text = graded.csv_bytes() if hasattr(graded, "csv_bytes") else graded.to_csv().encode("utf-8")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    report.write_bytes(text)
    codes: dict[str, int] = {}
    for row in graded.rows:
        for v in row.verdicts:
            key = "other-version" if v.mistake == "other-version" else v.code
            codes[key] = codes.get(key, 0) + 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KiB on Linux -> MiB
    return {"mode": mode, "wall": wall, "cpu": cpu, "peak_mib": peak, "codes": codes,
            "answers": len(graded.rows) * len(graded.targets),
            "sha256": hashlib.sha256(text).hexdigest()[:16]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=30)
    parser.add_argument("--modes", default="memo,no-memo")
    parser.add_argument("--before", metavar="TREE",
                        help="also grade with the symattn in TREE (e.g. `git archive BASE | tar -x -C TREE`)")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "FOLDER", "DATA", "REPORT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, folder, data, report = args.child
        print(json.dumps(run_mode(mode, Path(folder), Path(data), Path(report))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder, data = Path(tmp) / "ws", Path(tmp) / "class.csv"
        start = time.perf_counter()
        make_folder(folder, args.versions)
        data.write_text(make_class(folder, args.students), encoding="utf-8")
        print(f"{args.versions} versions and a class of {args.students:,} students "
              f"({data.stat().st_size / 2**20:.1f} MiB) made in {time.perf_counter() - start:.1f} s")
        results = []
        modes = args.modes.split(",") + (["before"] if args.before else [])
        for mode in modes:
            env = {**os.environ, **({"PYTHONPATH": args.before} if mode == "before" else {})}
            done = subprocess.run([sys.executable, __file__, "--child", mode, str(folder), str(data),
                                   str(Path(tmp) / f"report-{mode}.csv")],
                                  capture_output=True, text=True, env=env)
            if done.returncode:
                sys.exit(f"{mode}: {done.stderr.strip()}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(f"{mode:8s} {result['wall']:7.1f} s wall {result['cpu']:7.1f} s CPU "
                  f"peak {result['peak_mib']:6.0f} MiB  report {result['sha256']}  "
                  + ", ".join(f"{k} {v}" for k, v in sorted(result["codes"].items())))
        if len(results) > 1:
            for k, r in enumerate(results):
                for base in results[k + 1:]:
                    print(f"{r['mode']} / {base['mode']}: wall {r['wall'] / base['wall']:.2f}×, "
                          f"CPU {r['cpu'] / base['cpu']:.2f}×, peak {r['peak_mib'] / base['peak_mib']:.2f}×")
            same = len({r["sha256"] for r in results}) == 1
            print("reports byte for byte the same:", same)
            if not same:
                sys.exit(1)


if __name__ == "__main__":
    main()
