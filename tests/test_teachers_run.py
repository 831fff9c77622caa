"""A teacher's run, end to end (issue 12's "done means"): 30 versions with PDFs → Moodle,
Canvas (QTI) and PrairieLearn exports from that folder → a class CSV → grade with a summary.

The students' answers are computed independently here (float64 from each version's own
problem file, rounded half up with the decimal module), not read from symattn's key:
right answers, the unscaled mistake (no √d_k), another version's answers, unreadable
cells and decimal commas.  The summary's counts are asserted.

The 30 versions are written without ``--pdf`` (which would compile 62 documents, ~25 s of
TeX): the two combined PDFs hold every version's sheet and key, so those two are compiled
(with one single sheet) as ``--pdf`` compiles them, and read back; the ``--pdf`` option
itself is run end to end in tests/test_worksheet.py on 3 versions.
"""

from __future__ import annotations

import csv
import json
import subprocess
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symattn.cli import main
from test_export import cloze_weights, load_server, pl_data, qti_points
from symattn.document.pdf import Job, compile_many
from test_pdf import need_tex, pdf_text

SEED = "864213"        # digits that appear nowhere else on a sheet
POINTS = "Q=1,K=1,V=1,scores=1,scaled=1,weights=3,output=2"


def attention(data: dict, unscaled: bool = False) -> dict[str, np.ndarray]:
    X, Wq, Wk, Wv = (np.array(data[k], float) for k in ("X", "W_q", "W_k", "W_v"))
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    z = (Q @ K.T) * (1.0 if unscaled else 1 / np.sqrt(Q.shape[1]))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return {"weights": w, "output": w @ V}


def sig3(x: float, comma: bool = False) -> str:
    d = Decimal(repr(float(x)))
    text = str(d.quantize(Decimal(1).scaleb(d.adjusted() - 2), ROUND_HALF_UP)) if d else "0.00"
    return text.replace(".", ",") if comma else text


def row(values, comma: bool = False) -> str:
    return ("; " if comma else ", ").join(sig3(v, comma) for v in values)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    need_tex()
    out = tmp_path_factory.mktemp("teacher") / "class"
    assert main(["worksheet", "--versions", "30", "--seed", SEED, "--points", POINTS,
                 "-o", str(out)]) == 0
    compile_many([Job((out / name).read_text(encoding="utf-8"), out / (name[:-4] + ".pdf"))
                  for name in ("all-sheets.tex", "all-keys.tex", "version-A-sheet.tex")])
    return out


def test_no_seed_and_no_file_name_on_any_sheet(folder):
    meta = json.loads((folder / "worksheet.json").read_text())
    assert len(meta["versions"]) == 30

    def clean(text: str, v: dict, where: str) -> None:
        assert SEED not in text and "seed" not in text.lower(), where
        assert ".toml" not in text and "version-" not in text and v["problem"] not in text, where

    combined = pdf_text(folder / "all-sheets.pdf")        # every version's sheet, as printed
    single = pdf_text(folder / "version-A-sheet.pdf")
    for v in meta["versions"]:
        clean(combined, v, "all-sheets.pdf")
        assert f"Version code {v['code']}" in combined
        source = (folder / f"version-{v['id']}-sheet.tex").read_text(encoding="utf-8")
        clean(source, v, f"version-{v['id']}-sheet.tex")   # each single sheet, before TeX
        assert f"Version code {v['code']}" in source
    clean(single, meta["versions"][0], "version-A-sheet.pdf")
    assert f"Version code {meta['versions'][0]['code']}" in single


def test_combined_pdfs_start_each_version_on_an_odd_page(folder):
    for combined in ("all-sheets.pdf", "all-keys.pdf"):
        text = subprocess.run(["pdftotext", "-layout", str(folder / combined), "-"],
                              capture_output=True, text=True, check=True).stdout
        pages = text.split("\f")
        starts = [k + 1 for k, page in enumerate(pages) if "Version code" in page.split("\n", 3)[0]
                  + "".join(page.split("\n", 8)[:8])]
        assert len(starts) == 30, (combined, starts)
        assert all(p % 2 == 1 for p in starts), (combined, starts)


def test_exports_from_the_folder(folder, tmp_path):
    versions = [tomllib.loads((folder / f"version-{v}.toml").read_text())
                for v in (e["id"] for e in json.loads((folder / "worksheet.json").read_text())["versions"])]
    assert main(["export", "--to", "moodle", str(folder), "-o", str(tmp_path / "quiz.xml")]) == 0
    questions = ET.parse(tmp_path / "quiz.xml").getroot().findall("question[@type='cloze']")
    assert len(questions) == 30
    for q, data in zip(questions, versions):
        assert q.find("defaultgrade").text == "10"                 # 5 × 1 + 3 + 2 points
        weights = cloze_weights(q.find("questiontext/text").text)   # 7 questions of 3×3
        assert len(weights) == 7 * 9 and sum(weights[45:54]) * 10 == 3 * sum(weights)
        text = q.find("questiontext/text").text
        right = attention(data)["weights"][0]
        assert all(f"={sig3(w).rstrip('0').rstrip('.')}:" in text for w in right), q.find("name/text").text
    assert main(["export", "--to", "qti", str(folder), "-o", str(tmp_path / "quiz.zip")]) == 0
    items, totals = qti_points(zipfile.ZipFile(tmp_path / "quiz.zip"))
    assert totals == ["10"] * 30 and all(len(i) == 63 for i in items)
    assert main(["export", "--to", "prairielearn", str(folder), "-o", str(tmp_path / "pl")]) == 0
    server = load_server(tmp_path / "pl", "teacher")
    assert len(server.VERSIONS) == 30
    data = pl_data(12)
    server.generate(data)
    assert data["params"] and data["correct_answers"]
    info = json.loads((tmp_path / "pl" / "info.json").read_text())
    assert info["uuid"] and info["title"]


def test_class_csv_graded_with_a_summary(folder, tmp_path, capsys):
    meta = json.loads((folder / "worksheet.json").read_text())["versions"]
    data = {v["id"]: tomllib.loads((folder / f"version-{v['id']}.toml").read_text()) for v in meta}
    code = {v["id"]: v["code"] for v in meta}
    ids = [v["id"] for v in meta]
    right = {v: attention(data[v]) for v in ids}
    rows = [["student", "version", "weights[I]", "output[love]"]]

    def add(name, vid, weights, output):
        rows.append([name, code[vid], weights, output])

    for k in range(4):                                        # right, decimal points
        add(f"right{k}", ids[k], row(right[ids[k]]["weights"][0]), row(right[ids[k]]["output"][1]))
    for k in range(4, 6):                                     # right, decimal commas
        add(f"comma{k}", ids[k], row(right[ids[k]]["weights"][0], comma=True),
            row(right[ids[k]]["output"][1], comma=True))
    for k in range(6, 8):                                     # no √d_k
        add(f"unscaled{k}", ids[k], row(attention(data[ids[k]], unscaled=True)["weights"][0]),
            row(right[ids[k]]["output"][1]))
    add("copied", ids[8], row(right[ids[9]]["weights"][0]), row(right[ids[8]]["output"][1]))
    add("unreadable", ids[10], "abc", row(right[ids[10]]["output"][1]))
    add("short", ids[11], "0.1, 0.2", row(right[ids[11]]["output"][1]))
    submissions = tmp_path / "class.csv"
    with open(submissions, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    capsys.readouterr()
    report = tmp_path / "report.csv"
    assert main(["grade", str(folder), str(submissions), "-o", str(report)]) == 1
    summary = capsys.readouterr().out
    assert main(["grade", str(folder), str(submissions), "--json"]) == 1
    s = json.loads(capsys.readouterr().out)["summary"]
    assert s["students"] == 11
    weights, output = s["questions"]
    assert (weights["right"], weights["mistake"], weights["wrong"], weights["invalid"]) == (6, 3, 0, 2)
    assert dict(weights["mistakes"]) == {"unscaled": 2, f"other-version: {ids[9]}": 1}
    assert (output["right"], output["mistake"], output["wrong"], output["invalid"]) == (11, 0, 0, 0)
    assert [x["student"] for x in s["invalid_students"]] == ["unreadable", "short"]
    assert [(x["student"], x["matches"]) for x in s["other_version_students"]] == [("copied", ids[9])]
    # the only column answering weights gets its 3 points (grade shares a question's points
    # among the columns that answer it), output[love] the 2 of output
    assert Fraction(weights["max_points"]) == 11 * 3 and Fraction(weights["points"]) == 6 * 3
    assert Fraction(output["max_points"]) == Fraction(output["points"]) == 11 * 2
    assert "11 students" in summary and "unscaled ×2" in summary
    assert "students with invalid cells (2): unreadable" in summary
    graded = list(csv.DictReader(open(report, encoding="utf-8")))
    assert [r["weights[I]"] for r in graded] == ["rounded"] * 6 + ["mistake"] * 3 + ["invalid"] * 2
