"""Benchmark: worksheets and PDF output.  Not a test.

Run it from the repository root:

    python benchmarks/bench_worksheet.py            # render 30 versions; compile 3 and 30 to PDF
    python benchmarks/bench_worksheet.py --no-pdf   # rendering only (no TeX needed)

Measured, each the median of 3 runs in this process (imports excluded):

(a) render: 30 seeded hand-friendly versions of the lesson's shape
    (generation with rejection, each version's Trace, certified answers)
    and every file of the folder as text -- 30 sheets, 30 keys with the
    worked derivation, the combined sheets and keys, the problem TOMLs.
    The target in issue 3 is under 5 s on 2 cores.
(b) compile: the same folder with --pdf (2 × N + 2 documents compiled in
    parallel over the cores by symattn.pdf.compile_many), for N = 3 and
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symattn.certify import Rounding  # noqa: E402
from symattn.examples import load_example  # noqa: E402
from symattn.pdf import compile_tex  # noqa: E402
from symattn.render.latex import render_latex  # noqa: E402
from symattn.trace import Trace  # noqa: E402
from symattn.worksheet import WorksheetOptions, seeded_versions, worksheet_files, write_worksheet  # noqa: E402
from symattn.worksheet_random import spec_from_problem  # noqa: E402


def render(count: int, seed: int = 2026) -> dict[str, str]:
    spec = spec_from_problem(load_example("i-love-cats"))
    versions = seeded_versions(spec, seed, count)
    return worksheet_files(versions, WorksheetOptions(rounding=Rounding(digits=3)))


def timed(fn, repeat: int = 1) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-pdf", action="store_true", help="skip the TeX compiles")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    files = render(30)
    size = sum(len(t) for t in files.values())
    t = timed(lambda: render(30), repeat=3)
    print(f"render 30 versions with keys to .tex: {t:.2f} s ({len(files)} files, {size / 1e6:.2f} MB of text)")
    if args.no_pdf:
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
