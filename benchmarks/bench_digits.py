"""Benchmark: ``symattn explain --digits N`` on the lesson, up to 100,000 digits (issue 8).

Not a test.  Run it from the repository root:

    python benchmarks/bench_digits.py                       # 401, 1,000, 10,000, 100,000 digits
    python benchmarks/bench_digits.py --digits 100000       # one size

For each N it runs ``symattn explain --digits N`` (text) and
``symattn explain --digits N --format json`` as subprocesses, under
``/usr/bin/time -v`` when it exists (wall clock, peak RSS), and checks the
JSON's weights[I, I] — exactly e^(2/√3) / (e^(2/√3) + 2·e^(4/√3)) — against
mpmath at N + 10 digits, rounded half away from zero with integers and
asserted unambiguous.  The mpmath check itself takes about 25 s at
100,000 digits (pure-Python backend) and is not part of the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def command() -> list[str]:
    script = shutil.which("symattn")
    return [script] if script else [sys.executable, "-m", "symattn"]


def run(args: list[str]) -> tuple[float, int | None]:
    """(wall seconds, peak RSS in MB or None) of one run."""
    timer = shutil.which("time") and os.path.exists("/usr/bin/time")
    full = (["/usr/bin/time", "-v"] if timer else []) + command() + args
    start = time.perf_counter()
    done = subprocess.run(full, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return wall, (int(match.group(1)) // 1024 if match else None)


def reference(digits: int) -> str:
    """weights[I, I] of the lesson to ``digits`` significant digits, from mpmath."""
    import mpmath
    sys.set_int_max_str_digits(0)
    with mpmath.workdps(digits + 10):
        s3 = mpmath.sqrt(3)
        a, b = mpmath.exp(2 / s3), mpmath.exp(4 / s3)
        scaled = a / (a + 2 * b) * mpmath.mpf(10) ** digits    # the weight is in (0.1, 1)
        n = int(mpmath.floor(scaled))
        frac = scaled - n
        assert abs(frac - mpmath.mpf(0.5)) > mpmath.mpf(10) ** -5, "ambiguous reference"
    n += 1 if frac > 0.5 else 0
    return "0." + str(n).rjust(digits, "0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--digits", type=int, nargs="*", default=[401, 1000, 10_000, 100_000])
    args = ap.parse_args()
    print(f"{'digits':>8}  {'text: s':>8}  {'MB':>5}  {'json: s':>8}  {'MB':>5}  weights[I, I] vs mpmath")
    with tempfile.TemporaryDirectory() as tmp:
        for digits in args.digits:
            text_out, json_out = os.path.join(tmp, "out.txt"), os.path.join(tmp, "out.json")
            t_wall, t_mb = run(["explain", "--digits", str(digits), "-o", text_out])
            j_wall, j_mb = run(["explain", "--digits", str(digits), "--format", "json", "-o", json_out])
            sys.set_int_max_str_digits(0)
            with open(json_out) as f:
                got = json.load(f)["steps"]["weights"]["decimal"][0][0]
            with open(text_out) as f:
                in_text = got in f.read()
            verdict = "equal" if got == reference(digits) else "DIFFERENT"
            print(f"{digits:>8}  {t_wall:>8.2f}  {t_mb or '':>5}  {j_wall:>8.2f}  {j_mb or '':>5}  "
                  f"{verdict}{'' if in_text else ' (not found in the text view!)'}")


if __name__ == "__main__":
    main()
