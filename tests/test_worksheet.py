"""Worksheets: seeded hand-friendly versions, sheets, keys, problem files, whole folders."""

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import symattn as sa
from symattn.classroom.worksheets.sheets import (
    WorksheetOptions, key_body, parse_questions, seeded_versions, sheet_body, version_id,
)
from symattn.classroom.worksheets.versions import RandomSpec, WorksheetError, problem_toml, random_versions
from test_pdf import need_tex, pdf_text
from clirun import cli

ROOT = Path(__file__).resolve().parent.parent


def sa_sqrt(x):
    import sympy

    return sympy.sqrt(x)


def run(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    """In-process (tests/clirun.py); a changed environment needs a real process."""
    if env is None:
        return cli(*args, cwd=cwd)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "symattn", *args], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=300)


def folder_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_same_seed_same_bytes_and_other_seeds_differ(tmp_path):
    for name, seed in (("a", "11"), ("b", "11"), ("c", "12")):
        result = run("worksheet", "--versions", "4", "--seed", seed, "-o", name, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    a, b, c = (folder_bytes(tmp_path / n) for n in "abc")
    assert a == b
    assert a["version-A.toml"] != c["version-A.toml"]
    assert sorted(a) == sorted(["all-keys.tex", "all-sheets.tex", "worksheet.txt", "worksheet.json"] + [
        f"version-{v}{suffix}" for v in "ABCD" for suffix in (".toml", "-sheet.tex", "-key.tex")])


def test_versions_are_hand_friendly_and_read_back(tmp_path):
    spec = RandomSpec()
    datas = random_versions(spec, 5, 6)
    assert len({problem_toml(d) for d in datas}) == 6          # all different
    for data in datas:
        for name in ("X", "W_q", "W_k", "W_v"):
            low, high = spec.x_range if name == "X" else spec.w_range
            assert all(low <= v <= high and isinstance(v, int) for row in data[name] for v in row)
        path = tmp_path / "v.toml"
        path.write_text(problem_toml(data))
        trace = sa.attend(sa.Problem.from_toml(path))           # the TOML reads back
        for i in range(3):
            row = [trace.scores[i, j] for j in range(3)]
            assert len(set(row)) == 3                           # no exact ties
            for d in trace.weights.decimals(sa.Rounding(digits=3))[i]:
                assert d.as_fraction() >= Fraction(1, 100)      # no silly tiny weight


def test_prefix_stable_and_options():
    assert random_versions(RandomSpec(), 9, 2) == random_versions(RandomSpec(), 9, 4)[:2]
    square = random_versions(RandomSpec(square_dk=True), 9, 2)
    trace = sa.attend(sa.Problem.from_dict(square[0]))
    assert trace.problem.d_k == 4 and trace.problem.scale == Fraction(1, 2)
    tied = random_versions(RandomSpec(allow_ties=True, min_weight=Fraction(0)), 3, 3)
    assert len(tied) == 3
    with pytest.raises(WorksheetError, match="lower --min-weight"):
        random_versions(RandomSpec(min_weight=Fraction(99, 100)), 1, 1)


def test_version_ids():
    assert [version_id(k) for k in (0, 1, 25, 26, 27, 29)] == ["A", "B", "Z", "AA", "AB", "AD"]


def test_key_numbers_are_the_certified_decimals_of_the_version():
    versions = seeded_versions(RandomSpec(), 21, 2)
    options = WorksheetOptions(rounding=sa.Rounding(digits=4))
    for v in versions:
        key = key_body(v, options)
        trace = sa.attend(sa.Problem.from_toml_text(v.toml))   # regenerated from its problem file
        for row in trace.weights.decimals(sa.Rounding(digits=4)):
            for d in row:
                assert f" {d.text} " in key or f" {d.text} \\" in key or f"{d.text}," in key
        assert f"Version {v.vid}" in key and "seed 21" in key and f"version-{v.vid}.toml" in key
        assert f"Version code {v.code}" in key
        sheet = sheet_body(v, options)
        assert f"Version code {v.code}" in sheet and "seed" not in sheet and ".toml" not in sheet
        assert f"Version {v.vid}" not in sheet
        assert "rule{0pt}{2.1em}" in sheet                     # answer boxes
        assert trace.weights.decimal(0, 0, 4).text not in sheet.split("Questions")[1]


def test_lesson_worksheet_and_question_subset(tmp_path):
    result = run("worksheet", "--example", "i-love-cats", "-o", "ws", "--questions", "weights,scores",
                 "--places", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    key = (tmp_path / "ws" / "version-A-key.tex").read_text()
    sheet = (tmp_path / "ws" / "version-A-sheet.tex").read_text()
    assert "0.136" in key and "0.432" in key and "1.86" in key
    assert "Compute the scores" in sheet and "Compute the attention weights" in sheet
    assert "Compute the queries" not in sheet and "3 decimal places" in sheet
    assert "\\textbf{1.} Compute the scores" in sheet                  # computation order
    assert (tmp_path / "ws" / "version-A.toml").read_text() == sa.examples.example_text("i-love-cats")
    with pytest.raises(WorksheetError, match="no question 'attention'"):
        parse_questions("scores,attention")


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    cases = [
        (("--versions", "3", "-o", "w"), "--versions needs --seed"),
        (("--seed", "3", "-o", "w"), "--seed applies to random versions"),
        (("--questions", "nope", "-o", "w"), "no question 'nope'"),
        (("--versions", "0", "--seed", "1", "-o", "w"), "--versions must be between 1"),
    ]
    for args, message in cases:
        result = run("worksheet", *args, cwd=tmp_path)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    result = run("worksheet", "-o", "mine", cwd=tmp_path)
    assert result.returncode == 2 and "is a folder symattn did not write" in result.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    result = run("worksheet", "--pdf", "-o", "w", cwd=tmp_path, env={"PATH": str(tmp_path)})
    assert result.returncode == 2 and "latexmk or pdflatex" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]   # nothing half-written


def test_rerun_replaces_a_previous_worksheet(tmp_path):
    assert run("worksheet", "--versions", "2", "--seed", "1", "-o", "w", cwd=tmp_path).returncode == 0
    assert run("worksheet", "--versions", "1", "--seed", "2", "-o", "w", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "w" / "version-B.toml").exists()
    assert "seed 2" in (tmp_path / "w" / "worksheet.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


def test_three_version_worksheet_compiles_to_pdf(tmp_path):
    need_tex()
    result = run("worksheet", "--versions", "3", "--seed", "7", "-o", "ws", "--pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ws = tmp_path / "ws"
    sheets, keys = pdf_text(ws / "all-sheets.pdf"), pdf_text(ws / "all-keys.pdf")
    import json

    codes = {v["id"]: v["code"] for v in json.loads((ws / "worksheet.json").read_text())["versions"]}
    for vid in "ABC":
        assert f"Version code {codes[vid]}" in sheets and f"Version {vid}" in keys
        assert f"Version {vid}" in pdf_text(ws / f"version-{vid}-key.pdf")
        trace = sa.attend(sa.Problem.from_toml(ws / f"version-{vid}.toml"))
        weight = trace.weights.decimal(0, 0, 3).text
        output = trace.output.decimal(0, 0, 3).text
        version_key = pdf_text(ws / f"version-{vid}-key.pdf")
        assert weight in version_key and output.replace("-", "−") in version_key
    assert "seed" not in sheets and sheets.count("Version code") == 3 and "Name:" in sheets
    assert "Worked derivation" in keys and "Worked derivation" not in sheets


def test_a_versions_problem_file_makes_its_key_again(tmp_path):
    assert run("worksheet", "--versions", "3", "--seed", "4", "-o", "all", "--digits", "4",
               cwd=tmp_path).returncode == 0
    result = run("worksheet", "all/version-B.toml", "-o", "again", "--digits", "4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "version B" in result.stdout
    assert ((tmp_path / "again" / "version-B-key.tex").read_bytes()
            == (tmp_path / "all" / "version-B-key.tex").read_bytes())


def test_cross_attention_worksheet(tmp_path):
    from test_pdf import CROSS_TOML

    (tmp_path / "cross.toml").write_text(CROSS_TOML)
    result = run("worksheet", "cross.toml", "-o", "ws", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    key = (tmp_path / "ws" / "version-A-key.tex").read_text()
    assert "K = X_{kv} W_k" in key and "0.576" in key and "2.01" in key
    result = run("worksheet", "cross.toml", "-o", "ws2", "--versions", "2", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    again = sa.Problem.from_toml(tmp_path / "ws2" / "version-B.toml")   # shaped like the template
    assert "X_kv" in again.inputs and again.key_tokens == ("the", "cat", "sat") and again.n == 2


def test_soft_dictionary_versions_keep_shape_and_scale():
    # (at sharpness 5 no integer problem of this shape is hand-friendly: three different
    # integer scores differ by 2 or more, and 2·5/√2 puts a weight below 0.01)
    from symattn.classroom.worksheets.versions import spec_from_problem

    spec = spec_from_problem(sa.load_example("soft-dictionary"))
    for data in random_versions(spec, 2, 3):
        p = sa.Problem.from_dict(data)
        assert (p.n, p.m, p.projected) == (1, 3, False)
        assert p.key_tokens == ("red", "green", "orange") and p.scale == 1 / sa_sqrt(2)
