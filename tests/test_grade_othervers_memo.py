"""The other-version comparison is memoised (issue 25: grading 100,000 students spent 40 % of
its time comparing each wrong answer with every other version's key, again for every student
who wrote it).  The memo must not change a single verdict: a seeded class graded with it and
without it (MEMO_SIZE = 0) gives the same report, byte for byte, and the same JSON."""

from __future__ import annotations

import csv
import io
import random

import pytest

import symattn as sa
import symattn.check.grading.othervers as othervers
from symattn.check.grading.grade import Versions, grade
from symattn.classroom.worksheets.wrong_answers import answer_texts, figure
from symattn.numbers.certify import Rounding
from clirun import cli

TARGETS = (("weights", 0), ("weights", 2), ("output", 1), ("scores", 2))
TOKENS = ("I", "love", "cats")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("memo") / "ws"
    done = cli("worksheet", "--example", "i-love-cats", "--versions", "4", "--seed", "11",
               "--no-separate", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _class(folder, students: int = 240, seed: int = 3) -> str:
    rounding = Rounding(digits=3)
    keys = {}
    for vid in "ABCD":
        trace = sa.Trace(sa.Problem.from_toml(folder / f"version-{vid}.toml"))
        keys[vid] = [figure(answer_texts(trace, step, rounding)[i:i + 1]) for step, i in TARGETS]
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "version", *(f"{s}[{TOKENS[i]}]" for s, i in TARGETS)])
    for n in range(students):
        own = rng.choice("ABCD")
        row = []
        for k in range(len(TARGETS)):
            r = rng.random()
            if r < 0.4:
                row.append(keys[own][k])
            elif r < 0.7:
                row.append(keys[rng.choice([v for v in "ABCD" if v != own])][k])   # a neighbour's
            elif r < 0.9:
                row.append(rng.choice(["0.5, 0.25, 0.25", "1, 2, 3", "0, 0, 1"]))    # wrong, repeated
            else:
                row.append("")
        writer.writerow([f"s{n:03d}", own, *row])
    return out.getvalue()


def test_memoised_and_unmemoised_grades_are_identical(folder, monkeypatch):
    data = _class(folder)
    memo = grade(Versions(folder=folder), data, "class.csv")
    monkeypatch.setattr(othervers, "MEMO_SIZE", 0)
    fresh = grade(Versions(folder=folder), data, "class.csv")
    assert memo.to_csv() == fresh.to_csv()
    assert memo.to_json("class.csv") == fresh.to_json("class.csv")
    marked = [v for r in memo.rows for v in r.verdicts if v.mistake == "other-version"]
    wrong = [v for r in memo.rows for v in r.verdicts if v.code == "wrong"]
    assert len(marked) > 150 and len(wrong) > 50       # the class exercises both outcomes
    for row in memo.rows:
        for v in row.verdicts:
            if v.mistake == "other-version":
                assert v.mistake_detail != row.version and v.mistake_detail in "ABCD"
                assert v.message.startswith(f"{v.text} is right for version {v.mistake_detail}, "
                                            f"not for version {row.version}")


def test_the_memo_compares_each_distinct_wrong_answer_once(folder, monkeypatch):
    data = _class(folder)
    calls = []
    real = othervers.other_version

    def counted(*args):
        calls.append(args[2:])
        return real(*args)

    monkeypatch.setattr(othervers, "other_version", counted)
    report = grade(Versions(folder=folder), data, "class.csv")
    candidates = [(r.version, t, v.text) for r in report.rows for t, v in zip(report.targets, r.verdicts)
                  if v.code == "wrong" or v.mistake == "other-version"]
    assert len(calls) == len(set(calls)) == len(set(candidates))
    assert len(candidates) > 2 * len(set(candidates))     # most wrong answers were repeats


def test_the_report_file_is_the_csv_encoded_and_shared_verdicts_stay_apart(folder, tmp_path):
    data = _class(folder, students=60)
    report = grade(Versions(folder=folder), data, "class.csv")
    assert report.csv_bytes() == report.to_csv().encode("utf-8")
    (tmp_path / "class.csv").write_text(data, encoding="utf-8")
    done = cli("grade", str(folder), "class.csv", "-o", "report.csv", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert (tmp_path / "report.csv").read_bytes() == report.csv_bytes()
    assert done.stdout.startswith("Class summary of class.csv: 60 students; versions ")   # still printed
    # students who wrote the same answer share one verdict; a carried-forward or marked
    # verdict is its own object
    seen = {}
    for row in report.rows:
        for t, v in zip(report.targets, row.verdicts):
            other = seen.setdefault((row.version, t, v.text, v.message), v)
            assert other.code == v.code and other.mistake_detail == v.mistake_detail
    assert len({id(v) for r in report.rows for v in r.verdicts}) < len(report.rows) * len(TARGETS) // 2
