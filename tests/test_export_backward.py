"""The backward worksheet exported (issue 20, scope 3): Moodle's Cloze, Canvas's QTI and
PrairieLearn carry dO among the givens and every gradient question, with float64's right values
(tests/backward_numpy.py) and the backward mistakes named in the feedback; their text survives
each format's escaping (XML, HTML, Cloze) intact."""

from __future__ import annotations

import html
import json
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from backward_numpy import backward, sig
from clirun import cli
from test_export import CP, QTI, _Elements, cloze_fields, load_server, moodle_grade, pl_data

BACKWARD = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")
TOKENS = ("I", "cats")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "sheets"
    done = cli("worksheet", "--template", "backward", "--versions", "2", "--seed", "7", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def version_data(folder: Path, vid: str) -> dict:
    return tomllib.loads((folder / f"version-{vid}.toml").read_text(encoding="utf-8"))


def test_moodle_carries_the_backward_questions(folder, tmp_path):
    out = tmp_path / "quiz.xml"
    assert cli("export", "--to", "moodle", str(folder), "-o", str(out)).returncode == 0
    questions = ET.parse(out).getroot().findall("question[@type='cloze']")
    assert len(questions) == 2
    for vid, q in zip("AB", questions):
        text = q.find("questiontext/text").text          # the HTML, XML-unescaped by the parser
        page = html.unescape(text)
        assert "<caption>dO</caption>" in page and "dS' back through the scaling" in page
        assert "dO = ∂L/∂O" in page
        for n, words in ((4, "the value gradient"), (10, "the key gradient")):
            assert f"<caption>{n}. {words}</caption>" in page
        ref = backward(version_data(folder, vid))
        fields = cloze_fields(text)
        assert len(fields) == 4 * 3 + 4 * 2 + 2 + 4 * 2 + 8 * 2     # scores … output, dV … dK
        d_K = fields[-8:]
        wrong = backward(version_data(folder, vid), mistake="dk-not-transposed")["d_K"]
        for k, field in enumerate(d_K):
            i, j = divmod(k, 4)
            assert field[0]["credit"] == 100 and field[0]["value"] == sig(ref["d_K"][i, j])
            got = moodle_grade(field, sig(wrong[i, j]))
            if sig(wrong[i, j]) != sig(ref["d_K"][i, j]):
                assert "you computed dK = dS'·Q instead of dS'ᵀ·Q" in got["feedback"], (vid, k)
        assert "given for d_" not in text                  # no weight "given for" a gradient


def test_qti_carries_the_backward_questions(folder, tmp_path):
    out = tmp_path / "quiz.zip"
    assert cli("export", "--to", "qti", str(folder), "-o", str(out)).returncode == 0
    zf = zipfile.ZipFile(out)
    manifest = ET.fromstring(zf.read("imsmanifest.xml"))
    hrefs = [r.find(f"{CP}file").get("href") for r in manifest.findall(f"{CP}resources/{CP}resource")
             if r.get("type") == "imsqti_xmlv1p2"]
    assert len(hrefs) == 2
    for href in hrefs:
        items = ET.fromstring(zf.read(href)).findall(f".//{QTI}item")
        inputs = "".join(items[0].itertext())
        assert "<caption>dO</caption>" in inputs and "dO = ∂L/∂O" in inputs
        titles = [item.get("title") for item in items[1:]]
        assert titles[-8:] == [f"d_K[{t}, {c}]" for t in TOKENS for c in range(4)]
        assert [t for t in titles if t.startswith("d_weights")] == \
            [f"d_weights[{a}, {b}]" for a in TOKENS for b in TOKENS]
        feedback = {"".join(f.itertext()).strip() for item in items for f in item.findall(f"{QTI}itemfeedback")}
        assert "<p>Not right: you computed dV = P·dO instead of Pᵀ·dO.</p>" in feedback
        assert "<p>Not right: you forgot the −D term: dS = P ∘ (dP − D), not P ∘ dP.</p>" in feedback


def test_prairielearn_carries_the_backward_questions(folder, tmp_path):
    out = tmp_path / "question"
    assert cli("export", "--to", "prairielearn", str(folder), "-o", str(out)).returncode == 0
    parser = _Elements()
    parser.feed((out / "question.html").read_text(encoding="utf-8"))
    inputs = [a for tag, a in parser.found if tag == "pl-matrix-component-input"]
    assert [a["answers-name"] for a in inputs] == ["scores", "weights", "output", *BACKWARD]
    assert {a["label"] for a in inputs} >= {"$dV =$", "$dS' =$", "$dK =$"}
    server = load_server(out, "backward")
    data = pl_data(1)                                   # variant_seed 1: version B
    server.generate(data)
    json.dumps(data)
    assert "<caption>dO</caption>" in data["params"]["given"]
    ref = backward(version_data(folder, "B"))
    for step in BACKWARD:
        got = data["correct_answers"][step]
        assert [[sig(x) for x in row] for row in got] == [[sig(x) for x in row] for row in ref[step]], step
    wrong = backward(version_data(folder, "B"), mistake="dv-not-transposed")["d_V"]
    for k in range(4):
        i, j = divmod(k, 2)
        data["raw_submitted_answers"][f"d_V{k + 1}"] = str(float(sig(wrong[i, j])))
    server.grade(data)
    assert "you computed dV = P·dO instead of Pᵀ·dO" in html.unescape(data["feedback"]["symattn"])


def test_export_questions_may_name_the_gradients(folder, tmp_path):
    """--questions d_V,d_K exports only those (a typo is one line naming the choices)."""
    out = tmp_path / "quiz.xml"
    done = cli("export", "--to", "moodle", str(folder), "--questions", "d_V,d_K", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = ET.parse(out).getroot().find("question[@type='cloze']/questiontext/text").text
    assert len(cloze_fields(text)) == 4 + 8
    assert "<caption>1. the value gradient</caption>" in html.unescape(text)
    bad = cli("export", "--to", "moodle", str(folder), "--questions", "d_k", "-o", str(tmp_path / "x.xml"))
    assert bad.returncode == 2 and "no question 'd_k'" in bad.stderr and "d_K" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
