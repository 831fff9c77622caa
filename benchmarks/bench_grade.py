"""Benchmark: grade 500 students × 20 answers against one problem (target: under 10 s).

Run: python benchmarks/bench_grade.py [--students N]

The answers mix right figures at 2 and 3 places, typos, named mistakes
(unscaled, weights given for the output, early rounding), exact expressions,
numpy-printed rows and hostile text, so every verdict path is exercised.
Mistake variants and certified roundings are computed once per problem
(the first student pays for them); the rest is parsing and look-ups.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import time

import symattn as sa
from symattn.check.grading.grade import Versions, grade

TARGETS = {
    "weights[I]": ["0.136, 0.432, 0.432", "0.14, 0.43, 0.43", "0.137, 0.432, 0.432", "[0.14 0.43 0.43]"],
    "weights[love]": ["0.00 / 0.91 / 0.09", "0.00 / 0.98 / 0.02", "0.001, 0.909, 0.090"],
    "weights[cats]": ["0.007, 0.755, 0.238", "0.01, 0.75, 0.24", "0.01 0.76 0.24"],
    "scaled[I]": ["1.15, 2.31, 2.31", "2/√3, 4/√3, 4/√3", "0.67, 1.33, 1.33"],
    "scaled[love]": ["2.31, 9.24, 6.93", "2.31, 9.42, 6.93", "4, 16, 12"],
    "scaled[cats]": ["2.31, 6.93, 5.77", "2.31, 6.93, 5.78"],
    "scores": ["[[2, 4, 4], [4, 16, 12], [4, 12, 10]]", "[[ 2.  4.  4.]\n [ 4. 16. 12.]\n [ 4. 12. 10.]]"],
    "sqrt(d_k)": ["1.73", "1.7", "1.74", "√3"],
    "exp(scaled[I])": ["3.17, 10.07, 10.07", "3.16, 10.07, 10.07"],
    "sum(exp(scaled[I]))": ["23.31", "23.3", "23.30"],
    "shifted[cats]": ["−4.62, 0, −1.15", "-4.62, 0, -1.16"],
    "exp[cats, I]": ["0.010", "0.00985", "0.00986"],
    "exp[cats, cats]": ["0.315", "0.317"],
    "row_sum[cats]": ["1.325", "1.33", "1.326"],
    "output[I]": ["1.86, 6.32, 1.70", "0.14, 0.43, 0.43", "1.86 6.32 1.7"],
    "output[love]": ["2.00, 7.81, 0.27", "2. 7.81 0.27"],
    "output[cats]": ["1.99, 7.48, 0.74", "1.99, 7.48, 0.75"],
    "weights[I, I]": ["13.6%", "0.136", "0.14", "9^9^9^9"],
    "weights": ["[[0.14 0.43 0.43]\n [0.   0.91 0.09]\n [0.01 0.75 0.24]]",
                "[[0.14, 0.43, 0.43], [0.00, 0.91, 0.09], [0.01, 0.75, 0.24]]"],
    "output": ["[[1.86 6.32 1.7 ]\n [2.   7.81 0.27]\n [1.99 7.48 0.74]]",
               "__import__('os').system('echo pwned')"],
}


def _vary(text: str, rng: random.Random) -> str:
    """Students write the same figure many ways: spacing, brackets, a changed last digit."""
    if rng.random() < 0.3 and text[-1].isdigit():
        text = text[:-1] + str(rng.randrange(10))           # a slip in the last digit
    if rng.random() < 0.3 and "," in text and "[" not in text:
        text = "[" + text + "]"
    if rng.random() < 0.3:
        text = " " * rng.randrange(3) + text.replace(", ", "," + " " * rng.randrange(1, 3))
    return text


def submissions(students: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", *TARGETS])
    for s in range(students):
        writer.writerow([f"s{s:04d}", *(_vary(rng.choice(choices), rng)
                                         for choices in TARGETS.values())])
    return out.getvalue()


HOSTILE = [
    "__import__('os').system('echo pwned')", "9^9^9^9", "10^10^10", "((9^9)^9999)^9999",
    "2**2**2**2**2**2", "1e999999999", "(" * 3000 + "1" + ")" * 3000, "√" * 3000 + "2",
    "-" * 3000 + "1", "exp(" * 200 + "1" + ")" * 200, ", ".join(["1"] * 1500), "0.1\x00",
    "'; DROP TABLE students; --", "{{7*7}}", "1/0", "sqrt(-1)", "9" * 5001, "[" * 500,
]


def hostile(students: int, seed: int = 0) -> str:
    """Every answer hostile (and mostly distinct: a changing suffix defeats the memo)."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", *TARGETS])
    for s in range(students):
        writer.writerow([f"s{s:04d}", *(rng.choice(HOSTILE) + str(rng.randrange(10**6))
                                         for _ in TARGETS)])
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--no-memo", action="store_true",
                        help="judge every answer afresh (no reuse of identical answers)")
    parser.add_argument("--hostile", action="store_true",
                        help="every answer is hostile text (injection, huge powers, nesting)")
    args = parser.parse_args()
    if args.no_memo:
        import symattn.check.checker as checker
        checker._MEMO_SIZE = 0
    data = hostile(args.students) if args.hostile else submissions(args.students)
    versions = Versions(single=sa.load_example("i-love-cats"))
    start = time.perf_counter()
    report = grade(versions, data)
    text = report.to_csv()
    elapsed = time.perf_counter() - start
    answers = len(report.rows) * len(report.targets)
    codes: dict[str, int] = {}
    for row in report.rows:
        for v in row.verdicts:
            codes[v.code] = codes.get(v.code, 0) + 1
    print(f"graded {len(report.rows)} students × {len(report.targets)} answers = {answers} "
          f"in {elapsed:.2f} s ({1e3 * elapsed / answers:.2f} ms/answer); report {len(text):,} bytes")
    distinct = len({(t, v.text) for row in report.rows for t, v in zip(report.targets, row.verdicts)})
    print("verdicts:", ", ".join(f"{k} {v}" for k, v in sorted(codes.items())),
          f"({distinct} distinct answers)")


if __name__ == "__main__":
    main()
