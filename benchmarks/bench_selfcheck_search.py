"""Benchmark: how long recovering a self-check page's key by brute force takes.

Not a test.  Run it from the repository root:

    python benchmarks/bench_selfcheck_search.py

The page (docs/classroom.md, "How strong is it") hashes only the sheet's precision and
says how many decimal places each box has there, so a search tries, for every box, the
values with up to 4 digits at those places (−9999 … 9999 units), hashing each with the
page's salt and the box's target, until the right verdict (0) turns up.  It prints the
boxes recovered, the hashes tried and the time: what the docs quote.  (Before issue 25
the page hashed every precision from 0 to 6 places, and the key fell to 2,530 hashes,
digit by digit, in 14 ms.)
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symattn.classroom.answers import load_versions  # noqa: E402
from symattn.classroom.selfcheck_data import page_data  # noqa: E402


def search(example: str = "i-love-cats") -> tuple[int, int, int, float]:
    [v] = load_versions(None, example, None, None)
    data = page_data(v).to_json()
    salt = data["salt"]
    start = time.perf_counter()
    tries = found = 0
    for target, box in data["targets"].items():
        p, table = box["p"], box["h"]
        for m in range(-9999, 10000):
            digits = str(abs(m)).rjust(p + 1, "0")
            text = ("-" if m < 0 else "") + (f"{digits[:-p]}.{digits[-p:]}" if p else digits)
            tries += 1
            if table.get(hashlib.sha256(f"{salt}|{target}|{text}".encode()).hexdigest()[:16]) == 0:
                found += 1
                break
    return found, len(data["targets"]), tries, time.perf_counter() - start


if __name__ == "__main__":
    found, boxes, tries, seconds = search()
    print(f"{found} of {boxes} boxes recovered with {tries:,} hashes in {seconds:.2f} s (one core, Python)")
