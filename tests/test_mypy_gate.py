"""tools/mypy_gate.py on fixed reports: its parsing and its verdicts (mypy itself is not run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mypy_gate", ROOT / "tools" / "mypy_gate.py")
gate = importlib.util.module_from_spec(_spec)
sys.modules["mypy_gate"] = gate          # a dataclass looks its module up while it is built
_spec.loader.exec_module(gate)

REPORT = """\
symattn/check/targets.py:457: error: Cannot infer type of lambda  [misc]
symattn/check/targets.py:489:12: error: Item "None" of "Any | None" has no attribute "rows"  [union-attr]
symattn/check/targets.py:489: note: Left operand is of type "Any | None"
symattn/heads/heads.py:30: error: Return type "None" of "error" incompatible with return type "Never" in supertype "argparse.ArgumentParser"  [override]
symattn\\document\\blocks.py:7: error: Need type annotation for "out"  [var-annotated]
symattn/document/blocks.py:9: note: See https://mypy.readthedocs.io/en/stable/common_issues.html
Found 4 errors in 3 files (checked 153 source files)
"""


def test_parse_counts_errors_per_file_and_skips_notes():
    assert gate.parse(REPORT) == {"symattn/check/targets.py": 2, "symattn/heads/heads.py": 1,
                                  "symattn/document/blocks.py": 1}
    assert gate.parse("Success: no issues found in 153 source files\n") == {}
    assert gate.parse("symattn/a.py:1: error: x\nFound 1 error in 1 file (checked 1 source file)\n") \
        == {"symattn/a.py": 1}


@pytest.mark.parametrize("report, says", [
    ("symattn/a.py:1: error: x  [misc]\n", "no summary line"),                  # mypy died midway
    ("symattn/a.py:1:error:x\nFound 2 errors in 1 file (checked 3 source files)\n", "2 errors but 0"),
])
def test_a_report_the_gate_cannot_read_is_an_error_not_a_pass(report, says):
    with pytest.raises(gate.GateError, match=says):
        gate.parse(report)


def test_baseline_round_trip_is_sorted_and_drops_clean_files():
    text = gate.format_baseline({"symattn/z.py": 3, "symattn/a.py": 1, "symattn/clean.py": 0})
    assert text == "symattn/a.py 1\nsymattn/z.py 3\n"
    assert gate.read_baseline(text + "\n# a comment\n") == {"symattn/a.py": 1, "symattn/z.py": 3}
    for bad in ("symattn/a.py\n", "symattn/a.py one\n", "symattn/a.py 1\nsymattn/a.py 2\n"):
        with pytest.raises(gate.GateError):
            gate.read_baseline(bad)


def test_within_the_baseline_passes_and_reports_improvements():
    verdict = gate.compare({"symattn/check/a.py": 2, "symattn/heads/b.py": 5},
                           {"symattn/check/a.py": 4, "symattn/heads/b.py": 5, "symattn/facts/gone.py": 1})
    assert not verdict.failed
    assert verdict.improved == [("symattn/check/a.py", 2, 4), ("symattn/facts/gone.py", 0, 1)]
    assert (verdict.total, verdict.allowed_total) == (7, 10)
    assert "improved symattn/check/a.py: 4 -> 2" in verdict.lines()
    assert verdict.lines()[-1] == "mypy errors: 7 (baseline 10)"


def test_more_errors_than_the_baseline_fails():
    verdict = gate.compare({"symattn/check/a.py": 5}, {"symattn/check/a.py": 4})
    assert verdict.failed
    assert verdict.worse == [("symattn/check/a.py", 5, 4)]
    assert "FAIL symattn/check/a.py: 5 mypy errors, over its baseline of 4" in verdict.lines()


def test_a_file_not_in_the_baseline_fails_with_any_error():
    verdict = gate.compare({"symattn/facts/new.py": 1}, {"symattn/check/a.py": 4})
    assert verdict.failed and verdict.worse == [("symattn/facts/new.py", 1, 0)]


@pytest.mark.parametrize("path", ["symattn/numbers/certify.py", "symattn/trace/online.py"])
def test_the_strict_folders_fail_even_when_the_baseline_would_allow_it(path):
    verdict = gate.compare({path: 1}, {path: 3})
    assert verdict.failed and verdict.strict == [(path, 1)] and verdict.worse == []


def test_main_on_saved_reports_and_update_only_lowers(tmp_path, capsys):
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("symattn/check/targets.py 3\nsymattn/document/blocks.py 1\nsymattn/heads/heads.py 1\n")
    report = tmp_path / "report.txt"
    report.write_text(REPORT)
    args = ["--mypy-output", str(report), "--baseline", str(baseline)]
    assert gate.main(args) == 0
    assert "improved symattn/check/targets.py: 3 -> 2" in capsys.readouterr().out
    assert gate.main([*args, "--update"]) == 0
    assert baseline.read_text() == ("symattn/check/targets.py 2\nsymattn/document/blocks.py 1\n"
                                    "symattn/heads/heads.py 1\n")
    # one more error than the lowered baseline: the gate fails and --update refuses
    report.write_text(REPORT.replace("Found 4 errors in 3", "Found 5 errors in 3")
                      + "symattn/heads/heads.py:31: error: y  [misc]\n")
    assert gate.main(args) == 1
    assert gate.main([*args, "--update"]) == 1
    out = capsys.readouterr()
    assert "FAIL symattn/heads/heads.py: 2 mypy errors, over its baseline of 1" in out.out
    assert "baseline not updated" in out.err
    assert "symattn/heads/heads.py 1\n" in baseline.read_text()
    # after a merge the lead may reset it upwards on purpose, but never with strict-folder errors
    assert gate.main([*args, "--reset"]) == 0
    assert "symattn/heads/heads.py 2\n" in baseline.read_text()
    report.write_text("symattn/trace/trace.py:1: error: z  [misc]\nFound 1 error in 1 file (checked 1 source file)\n")
    assert gate.main([*args, "--reset"]) == 1
    assert "symattn/heads/heads.py 2\n" in baseline.read_text()


def test_the_committed_baseline_is_sorted_and_keeps_the_strict_folders_out():
    text = (ROOT / "tools" / "mypy-baseline.txt").read_text(encoding="utf-8")
    counts = gate.read_baseline(text)
    assert text == gate.format_baseline(counts)
    assert not [p for p in counts if p.startswith(gate.STRICT)]
