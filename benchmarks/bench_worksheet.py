"""Benchmark: worksheets and PDF output.  Not a test.

Run it from the repository root:

    python benchmarks/bench_worksheet.py            # render 30 versions; compile 3 and 30 to PDF
    python benchmarks/bench_worksheet.py --no-pdf   # rendering only (no TeX needed)
    PYTHONPATH=TREE python benchmarks/bench_worksheet.py --generate-only   # generation, from TREE

Measured, each the median of 3 runs in this process (imports excluded), wall clock and CPU
time side by side (on a shared machine the CPU time is the better estimate of an idle one):

(a) render, separating mistakes and with --no-separate: 30 seeded hand-friendly versions of the lesson's shape that
    separate the modelled mistakes (generation with rejection, each
    candidate's mistakes judged by check, each version's Trace, certified
    answers, the common-wrong-answers tables)
    and every file of the folder as text -- 30 sheets, 30 keys with the
    worked derivation, the combined sheets and keys, the problem TOMLs.
    The target in issue 3 is under 5 s on 2 cores.
(a') generate: 30 versions without and with the separating-mistakes rule
    (the lesson at 3 digits, the causal lesson at 2 places), one run each.
(b) compile: the same folder with --pdf (2 × N + 2 documents compiled in
    parallel over the cores by symattn.document.pdf.compile_many), for N = 3 and
    N = 30, one run each; and a single lesson derivation to PDF.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):     # the tree on PYTHONPATH when given (to compare trees)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symattn.numbers.certify import Rounding  # noqa: E402
from symattn.examples import load_example  # noqa: E402
from symattn.document.pdf import compile_tex  # noqa: E402
from symattn.document.trace_latex import render_latex  # noqa: E402
from symattn.trace.trace import Trace  # noqa: E402
from symattn.classroom.worksheets.sheets import (  # noqa: E402
    QUESTIONS, WorksheetOptions, seeded_versions, worksheet_files, write_worksheet,
)
from symattn.classroom.worksheets.versions import spec_from_problem  # noqa: E402


def render(count: int, seed: int = 2026, separate: bool = True, example: str = "i-love-cats",
           rounding: Rounding = Rounding(digits=3)) -> dict[str, str]:
    spec = spec_from_problem(load_example(example))
    versions = seeded_versions(spec, seed, count, separate=(QUESTIONS, rounding) if separate else None)
    return worksheet_files(versions, WorksheetOptions(rounding=rounding))


def generate(count: int, separate: bool, example: str, rounding: Rounding) -> None:
    spec = spec_from_problem(load_example(example))
    seeded_versions(spec, 2026, count, separate=(QUESTIONS, rounding) if separate else None)


def timed(fn, repeat: int = 1) -> float:
    return timed_cpu(fn, repeat)[0]


def timed_cpu(fn, repeat: int = 1) -> tuple[float, float]:
    """Median wall clock and median CPU time (the CPU time is what an idle machine would show
    for this single-threaded work when other sessions share the cores)."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-pdf", action="store_true", help="skip the TeX compiles")
    parser.add_argument("--generate-only", action="store_true",
                        help="only (a'): generation with and without separation (run it from two "
                             "trees at once, PYTHONPATH=TREE, to compare code on a shared machine)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.generate_only:
        files = render(30)
        size = sum(len(t) for t in files.values())
        sep, sep_cpu = timed_cpu(lambda: render(30), repeat=3)
        plain, plain_cpu = timed_cpu(lambda: render(30, separate=False), repeat=3)
        print(f"render 30 versions with keys to .tex ({len(files)} files, {size / 1e6:.2f} MB of "
              f"text): separating mistakes {sep:.2f} s (CPU {sep_cpu:.2f} s), "
              f"--no-separate {plain:.2f} s (CPU {plain_cpu:.2f} s)")
    for example, rounding in (("i-love-cats", Rounding(digits=3)), ("i-love-cats-causal", Rounding(places=2))):
        plain, plain_cpu = timed_cpu(lambda: generate(30, False, example, rounding))
        separating, sep_cpu = timed_cpu(lambda: generate(30, True, example, rounding))
        print(f"generate 30 versions of {example} at {rounding}: --no-separate {plain:.2f} s "
              f"(CPU {plain_cpu:.2f} s), separating mistakes {separating:.2f} s (CPU {sep_cpu:.2f} s; "
              f"{sep_cpu / plain_cpu:.0f}x by CPU)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.no_pdf or args.generate_only:
        return
    lesson = render_latex(Trace(load_example("i-love-cats")))
    print(f"compile the lesson derivation to PDF: {timed(lambda: compile_tex(lesson, 'lesson')):.2f} s")
    for count in (3, 30):
        files = render(count)
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "ws"
            t = timed(lambda: write_worksheet(files, out, pdf=True))
            pdfs = len(list(out.glob("*.pdf")))
        print(f"compile {count} versions (+ combined sheets and keys): {t:.2f} s for {pdfs} PDFs")


if __name__ == "__main__":
    main()
