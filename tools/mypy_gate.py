"""The mypy gate: no file may get more mypy errors than tools/mypy-baseline.txt allows.

Why a baseline and not "mypy must pass": the package still has a few hundred findings in
folders being rewritten, and a plain pass/fail would either block every change or be
switched off.  The baseline counts errors per file (``path count`` lines, sorted); the
gate fails when a file has more errors than its line allows, when a file not in the
baseline has any, or when anything under the strict folders (numbers/, trace/) has one.
It reports the files that improved, so the baseline can be lowered with ``--update``.

    python3 tools/mypy_gate.py                  # run mypy from the repository root, compare
    python3 tools/mypy_gate.py --update         # write the current counts (never higher ones)
    python3 tools/mypy_gate.py --reset          # write them even where higher (after a merge:
                                                # review the baseline's diff)
    python3 tools/mypy_gate.py --mypy-output F  # compare a saved mypy report instead

Exit status 0: within the baseline; 1: over it (or mypy did not report); 2: bad usage.
Standard library only.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tools" / "mypy-baseline.txt"

#: folders that must have no error at all (not even one a baseline would allow)
STRICT = ("symattn/numbers/", "symattn/trace/")

#: ``path:line: error: message  [code]`` (a column after the line when mypy shows columns)
_ERROR = re.compile(r"^(?P<path>[^:\n]+\.pyi?):(?P<line>\d+):(?:\d+:)? error: (?P<message>.*?)"
                    r"(?:\s+\[(?P<code>[a-z0-9-]+)\])?$")
#: mypy's closing line: "Found 3 errors in 2 files (checked 9 source files)" or "Success: ..."
_FOUND = re.compile(r"^Found (?P<n>\d+) errors? in \d+ files?")
_SUCCESS = re.compile(r"^Success: no issues found")


class GateError(Exception):
    """The mypy report or the baseline cannot be read (the gate cannot decide)."""


def parse(report: str) -> dict[str, int]:
    """Errors per file in a mypy report (notes are not errors).  The closing ``Found N
    errors`` line, when present, must agree with the lines read: a format the pattern
    missed must not pass as "fewer errors"."""
    counts: dict[str, int] = {}
    total, closing = 0, None
    for line in report.splitlines():
        line = line.rstrip()
        match = _ERROR.match(line)
        if match:
            path = match["path"].replace("\\", "/")
            counts[path] = counts.get(path, 0) + 1
            total += 1
        elif (found := _FOUND.match(line)) is not None:
            closing = int(found["n"])
        elif _SUCCESS.match(line):
            closing = 0
    if closing is None:
        raise GateError("mypy printed no summary line (\"Found N errors\" or \"Success\"): "
                        "it did not finish; run it by hand to see why")
    if closing != total:
        raise GateError(f"mypy reports {closing} errors but {total} error lines were read: "
                        "the report's format changed; fix the pattern in tools/mypy_gate.py")
    return counts


def read_baseline(text: str) -> dict[str, int]:
    """``path count`` lines (blank lines and ``#`` comments allowed)."""
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise GateError(f"mypy baseline line {number} is {line!r}: write 'path count'")
        if parts[0] in counts:
            raise GateError(f"mypy baseline line {number}: {parts[0]} is listed twice")
        counts[parts[0]] = int(parts[1])
    return counts


def format_baseline(counts: dict[str, int]) -> str:
    """The baseline text for these counts: one ``path count`` line per file with errors, sorted."""
    return "".join(f"{path} {n}\n" for path, n in sorted(counts.items()) if n > 0)


@dataclass
class Verdict:
    """What the comparison found; ``failed`` when anything is over."""

    total: int
    allowed_total: int
    worse: list[tuple[str, int, int]] = field(default_factory=list)      # path, now, allowed
    strict: list[tuple[str, int]] = field(default_factory=list)          # path, now
    improved: list[tuple[str, int, int]] = field(default_factory=list)   # path, now, allowed

    @property
    def failed(self) -> bool:
        return bool(self.worse or self.strict)

    def lines(self) -> list[str]:
        out = []
        for path, now in self.strict:
            out.append(f"FAIL {path}: {now} mypy error(s); {', '.join(STRICT)} must have none")
        for path, now, allowed in self.worse:
            if allowed == 0:
                out.append(f"FAIL {path}: {now} mypy error(s), and it is not in the baseline "
                           "(fix them: new code comes in clean)")
            else:
                out.append(f"FAIL {path}: {now} mypy errors, over its baseline of {allowed}")
        for path, now, allowed in self.improved:
            out.append(f"improved {path}: {allowed} -> {now}")
        if self.improved and not self.failed:
            out.append("the baseline can be lowered: python3 tools/mypy_gate.py --update")
        out.append(f"mypy errors: {self.total} (baseline {self.allowed_total})")
        return out


def compare(current: dict[str, int], baseline: dict[str, int]) -> Verdict:
    """Each file's errors against its baseline count (0 for a file not listed)."""
    verdict = Verdict(sum(current.values()), sum(baseline.values()))
    for path in sorted(set(current) | set(baseline)):
        now, allowed = current.get(path, 0), baseline.get(path, 0)
        if now and path.startswith(STRICT):
            verdict.strict.append((path, now))
        elif now > allowed:
            verdict.worse.append((path, now, allowed))
        elif now < allowed:
            verdict.improved.append((path, now, allowed))
    return verdict


def run_mypy(root: Path = ROOT) -> str:
    """``python3 -m mypy`` from the repository root (its config is pyproject.toml's)."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True)
    if done.returncode not in (0, 1):      # 2: mypy itself failed (bad config, crash)
        raise GateError(f"mypy exited with status {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite the baseline with the current counts (refused if any is higher)")
    parser.add_argument("--reset", action="store_true",
                        help="rewrite the baseline even where a count goes up (after a merge); "
                             "the strict folders must still be clean")
    parser.add_argument("--mypy-output", metavar="FILE", type=Path,
                        help="a saved mypy report to compare instead of running mypy")
    parser.add_argument("--baseline", metavar="FILE", type=Path, default=BASELINE,
                        help="the baseline file (default: tools/mypy-baseline.txt)")
    args = parser.parse_args(argv)
    try:
        report = args.mypy_output.read_text(encoding="utf-8") if args.mypy_output else run_mypy()
        current = parse(report)
        baseline = read_baseline(args.baseline.read_text(encoding="utf-8")) if args.baseline.exists() else {}
    except (GateError, OSError) as err:
        print(f"mypy gate: {err}", file=sys.stderr)
        return 1
    verdict = compare(current, baseline)
    for line in verdict.lines():
        print(line)
    if args.reset and not verdict.strict:
        args.baseline.write_text(format_baseline(current), encoding="utf-8")
        print(f"wrote {args.baseline.name} (reset): {verdict.total} errors, was {verdict.allowed_total}")
        return 0
    if verdict.failed:
        if args.update or args.reset:
            print("mypy gate: baseline not updated: it may only go down", file=sys.stderr)
        return 1
    if args.update:
        args.baseline.write_text(format_baseline(current), encoding="utf-8")
        print(f"wrote {args.baseline.name}: {len([n for n in current.values() if n])} files, "
              f"{verdict.total} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
