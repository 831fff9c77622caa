"""symattn export: Moodle XML (Cloze), Canvas QTI 1.2 (quiz.zip) and PrairieLearn question folders.

Every export is parsed back (xml.etree, zipfile, json) and its numbers are
cross-checked against an independent float64 computation of the lesson
(numpy, hand-typed inputs): the right values and the values of named
mistakes (no √d_k; d_k instead of √d_k).  PrairieLearn's server.py is
imported from the written folder and its generate/grade run in-process on a
data dict as PrairieLearn passes it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
import uuid
import xml.etree.ElementTree as ET
import zipfile
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from symattn.cli import main
from symattn.numbers.certify import Rounding
from symattn.classroom.answers import load_versions
from symattn.classroom.numbers import plain

# The lesson "I love cats", typed by hand (docs: the seed lesson), for float64 cross-checks
X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
W_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], float)
W_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], float)
W_v = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], float)
TOKENS = ["I", "love", "cats"]


def attention(scale: float) -> dict[str, np.ndarray]:
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    s = Q @ K.T
    z = s * scale
    e = np.exp(z - z.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return {"Q": Q, "K": K, "V": V, "scores": s, "scaled": z, "weights": w, "output": w @ V}


RIGHT = attention(1 / np.sqrt(3))
UNSCALED = attention(1.0)
BY_DK = attention(1 / 3)


def float64_weights(data: dict) -> np.ndarray:
    """A version's weights in float64 from its problem file's own numbers (X·W or Q, K given)."""
    if "X" in data:
        X_, Wq, Wk = (np.array(data[k], float) for k in ("X", "W_q", "W_k"))
        Q, K = X_ @ Wq, X_ @ Wk
    else:
        Q, K = np.array(data["Q"], float), np.array(data["K"], float)
    z = Q @ K.T / np.sqrt(Q.shape[1])
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sig3(x: float) -> Fraction:
    """float64 value rounded to 3 significant digits (half up; these values are far from ties)."""
    d = Decimal(repr(float(x)))
    if d == 0:
        return Fraction(0)
    q = Decimal(1).scaleb(d.adjusted() - 2)
    return Fraction(d.quantize(q, rounding=ROUND_HALF_UP))


def run(*argv: str) -> int:
    return main(list(argv))


# ------------------------------------------------------------------ Moodle

# Moodle's own Cloze parser (question/type/multianswer/questiontype.php, the regexes and the
# loop of qtype_multianswer_extract_question), transcribed: PCRE's variable-width look-behind
# (?<!\\\\|&|&amp;) is written as three fixed-width ones.
_FRACTION = r"=|%(-?[0-9]+)%"
_ALT_ANSWER = r".+?(?<!\\)(?<!&)(?<!&amp;)(?=[~#}]|$)"
_ALT_FEEDBACK = r".*?(?<!\\)(?=[~}]|$)"
_ALT = f"({_FRACTION})?({_ALT_ANSWER})(#({_ALT_FEEDBACK}))?"
_NUMBER = r"-?(([0-9]+[.,]?[0-9]*|[.,][0-9]+)([eE][-+]?[0-9]+)?)"
_NUMERICAL_ALT = f"^({_NUMBER})(:{_NUMBER})?$"
_TYPES = ("(NUMERICAL|NM)|(MULTICHOICE|MC)|(MULTICHOICE_V|MCV)|(MULTICHOICE_H|MCH)|"
          "(SHORTANSWER|SA|MW)|(SHORTANSWER_C|SAC|MWC)")
_ANSWER_REGEX = re.compile(r"\{([0-9]*):(" + _TYPES + "):(" + _ALT + "(~" + _ALT + r")*)\}", re.S)


def cloze_fields(text: str) -> list[list[dict]]:
    """Every field as Moodle reads it: per answer its credit (%), value, tolerance, feedback."""
    fields = []
    while (m := _ANSWER_REGEX.search(text)):
        assert m.group(3), f"not a NUMERICAL field: {m.group(0)[:60]}"
        answers, rest = [], m.group(9)
        while (alt := re.search("~?" + _ALT, rest, re.S)):
            credit = 100 if alt.group(1) == "=" else int(alt.group(2) or 0)
            feedback = (alt.group(5) or "").replace("\\}", "}").replace("\\#", "#")
            number = re.search(_NUMERICAL_ALT, alt.group(3), re.S)
            assert number, f"not a number: {alt.group(3)!r}"
            answers.append({"credit": credit, "value": Fraction(number.group(1)),
                            "tol": Fraction(number.group(6) or 0),
                            "feedback": feedback})
            rest = rest.split(alt.group(0), 1)[1]
        fields.append(answers)
        text = text.replace(m.group(0), "{#%d}" % len(fields), 1)
    return fields


def moodle_grade(field: list[dict], typed: Fraction) -> dict | None:
    """Moodle's rule for a NUMERICAL field: the first answer whose tolerance holds."""
    for a in field:
        if abs(typed - a["value"]) <= a["tol"]:
            return a
    return None


def test_moodle_lesson(tmp_path):
    out = tmp_path / "quiz.xml"
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "-o", str(out)) == 0
    root = ET.parse(out).getroot()
    assert root.tag == "quiz"
    kinds = [q.get("type") for q in root.findall("question")]
    assert kinds == ["category", "cloze"]
    assert root.find("question/category/text").text.startswith("$course$/top/symattn/")
    cloze = root.findall("question")[1]
    assert cloze.find("name/text").text == "I love cats, version A"
    assert cloze.find("questiontext").get("format") == "html"
    fields = cloze_fields(cloze.find("questiontext/text").text)
    assert len(fields) == 7 * 9                     # Q K V scores scaled weights output, 3×3 each
    order = ["Q", "K", "V", "scores", "scaled", "weights", "output"]
    for k, name in enumerate(order):
        for i in range(3):
            for j in range(3):
                field = fields[k * 9 + i * 3 + j]
                right = field[0]
                assert right["credit"] == 100 and right["feedback"] == "right"
                assert right["value"] == sig3(RIGHT[name][i, j]), (name, i, j)
                assert all(a["credit"] == 0 for a in field[1:])
                assert all(a["value"] != right["value"] for a in field[1:])
                if right["value"].denominator > 1:     # rounded: half a unit of the last digit
                    unit = Fraction(1, 10 ** (len(str(right["value"].denominator)) - 1))
                    assert right["tol"] <= unit / 2
    # the mistakes' values, cross-checked: weights[I, I] without √d_k, and with d_k
    field = fields[5 * 9]
    unscaled = moodle_grade(field, sig3(UNSCALED["weights"][0, 0]))
    assert unscaled["credit"] == 0 and unscaled["feedback"] == "you did not divide by √d_k"
    by_dk = moodle_grade(field, sig3(BY_DK["weights"][0, 0]))
    assert by_dk["credit"] == 0 and "instead of √d_k" in by_dk["feedback"]
    assert moodle_grade(field, Fraction("0.136"))["credit"] == 100
    assert moodle_grade(field, Fraction("0.5")) is None
    # the general feedback is the key: the weights' table holds every certified weight
    key = cloze.find("generalfeedback/text").text
    table = key.split("<caption>6. the attention weights")[1].split("</table>")[0]
    cells = re.findall(r"<td>([^<]*)</td>", table)
    assert [Fraction(c) for c in cells] == [sig3(RIGHT["weights"][i, j]) for i in range(3) for j in range(3)]
    assert "0.000890" in cells                       # 3 significant digits, trailing zero kept


def test_moodle_worksheet_folder_one_question_per_version(tmp_path):
    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "3", "--seed", "11", "--places", "2",
               "--questions", "scores,weights", "-o", str(folder)) == 0
    out = tmp_path / "quiz.xml"
    assert run("export", "--to", "moodle", str(folder), "-o", str(out)) == 0
    root = ET.parse(out).getroot()
    questions = root.findall("question[@type='cloze']")
    assert [re.search(r"version ([A-Z]+)", q.find("name/text").text).group(1)
            for q in questions] == ["A", "B", "C"]
    versions = load_versions(folder, None, None, None)
    for q, v in zip(questions, versions):
        text = q.find("questiontext/text").text
        fields = cloze_fields(text)
        entries = [e for question in v.questions for e in question.entries]
        assert len(fields) == len(entries)
        assert [question.step for question in v.questions] == ["scores", "weights"]
        for field, e in zip(fields, entries):
            right = e.right(v.rounding)
            assert field[0]["value"] == right.as_fraction()
            assert field[0]["tol"] == (0 if right.exact else Fraction(1, 200))  # 2 places, from the manifest
        # float64 cross-check of this version's weights, from its own problem file (tomllib)
        w = float64_weights(tomllib.loads(v.toml))
        weights = fields[len(v.questions[0].entries):]
        for k, field in enumerate(weights):
            assert abs(float(field[0]["value"]) - w.flat[k]) <= 0.005 + 1e-12
        assert "seed" not in text                   # the seed never reaches a student


def test_moodle_replaces_only_its_own_file(tmp_path):
    mine = tmp_path / "quiz.xml"
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "-o", str(mine)) == 0
    assert run("export", "--to", "moodle", "--example", "soft-dictionary", "-o", str(mine)) == 2
    assert "I love cats" in mine.read_text(encoding="utf-8")     # made from another source: kept
    assert run("export", "--to", "moodle", "--example", "soft-dictionary", "--force", "-o", str(mine)) == 0
    assert "Soft dictionary" in mine.read_text(encoding="utf-8")
    theirs = tmp_path / "notes.xml"
    theirs.write_text("<notes/>", encoding="utf-8")
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "-o", str(theirs)) == 2
    assert theirs.read_text(encoding="utf-8") == "<notes/>"


# ------------------------------------------------------------------ Canvas QTI

QTI = "{http://www.imsglobal.org/xsd/ims_qtiasiv1p2}"
CP = "{http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1}"


def test_qti_zip(tmp_path):
    out = tmp_path / "quiz.zip"
    assert run("export", "--to", "qti", "--example", "i-love-cats", "-o", str(out), "--questions", "weights,output") == 0
    zf = zipfile.ZipFile(out)
    names = zf.namelist()
    assert "imsmanifest.xml" in names
    manifest = ET.fromstring(zf.read("imsmanifest.xml"))
    assert manifest.tag == f"{CP}manifest"
    resources = manifest.findall(f"{CP}resources/{CP}resource")
    qti = [r for r in resources if r.get("type") == "imsqti_xmlv1p2"]
    assert len(qti) == 1
    for r in resources:                              # every file the manifest names is in the zip
        for f in r.findall(f"{CP}file"):
            assert f.get("href") in names
    assessment = ET.fromstring(zf.read(qti[0].find(f"{CP}file").get("href")))
    assert assessment.tag == f"{QTI}questestinterop"
    items = assessment.findall(f".//{QTI}item")
    assert len(items) == 1 + 2 * 9                  # the inputs, then one item per box

    def meta(item, label):
        for f in item.iter(f"{QTI}qtimetadatafield"):
            if f.find(f"{QTI}fieldlabel").text == label:
                return f.find(f"{QTI}fieldentry").text

    assert meta(items[0], "question_type") == "text_only_question"
    for k, item in enumerate(items[1:]):
        name = "weights" if k < 9 else "output"
        i, j = divmod(k % 9, 3)
        column = TOKENS[j] if name == "weights" else str(j)     # output columns are indices
        assert item.get("title") == f"{name}[{TOKENS[i]}, {column}]"
        assert meta(item, "question_type") == "numerical_question"
        assert item.find(f".//{QTI}render_fib").get("fibtype") == "Decimal"
        conds = item.findall(f"{QTI}resprocessing/{QTI}respcondition")
        right = conds[0]
        assert right.get("continue") == "No"
        assert right.find(f"{QTI}setvar").text == "100"
        expected = sig3(RIGHT[name][i, j])
        assert Fraction(right.find(f".//{QTI}varequal").text) == expected
        low = Fraction(right.find(f".//{QTI}vargte").text)
        high = Fraction(right.find(f".//{QTI}varlte").text)
        assert low < expected < high and high - low <= Fraction(1, 100)
        assert abs(RIGHT[name][i, j] - float(expected)) <= float(high - expected)
        feedback_ids = {f.get("ident") for f in item.findall(f"{QTI}itemfeedback")}
        for c in conds[1:]:
            assert c.find(f"{QTI}setvar") is None      # a mistake earns nothing
            assert c.find(f"{QTI}displayfeedback").get("linkrefid") in feedback_ids
    # weights[I, I]: the unscaled mistake's range holds float64's unscaled weight, with its feedback
    item = items[1]
    ranges = [(Fraction(c.find(f".//{QTI}vargte").text), Fraction(c.find(f".//{QTI}varlte").text),
               c.find(f"{QTI}displayfeedback").get("linkrefid"))
              for c in item.findall(f"{QTI}resprocessing/{QTI}respcondition")[1:]]
    unscaled = sig3(UNSCALED["weights"][0, 0])
    hits = [ref for lo, hi, ref in ranges if lo <= unscaled <= hi]
    assert hits
    texts = {f.get("ident"): "".join(f.itertext()) for f in item.findall(f"{QTI}itemfeedback")}
    assert "you did not divide by √d_k" in texts[hits[0]]
    assert zf.comment.startswith(b"symattn export")


def test_qti_same_input_same_bytes(tmp_path):
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    assert run("export", "--to", "qti", "--example", "soft-dictionary", "-o", str(a)) == 0
    assert run("export", "--to", "qti", "--example", "soft-dictionary", "-o", str(b)) == 0
    assert a.read_bytes() == b.read_bytes()


# ------------------------------------------------------------------ PrairieLearn

class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def load_server(folder: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"pl_server_{name}", folder / "server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pl_data(seed: int) -> dict:
    return {"params": {}, "correct_answers": {}, "submitted_answers": {}, "raw_submitted_answers": {},
            "format_errors": {}, "partial_scores": {}, "score": 0, "feedback": {},
            "variant_seed": seed, "options": {}}


def test_prairielearn_lesson(tmp_path):
    out = tmp_path / "attention"
    assert run("export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(out)) == 0
    info = json.loads((out / "info.json").read_text(encoding="utf-8"))
    assert uuid.UUID(info["uuid"]).version == 5
    assert isinstance(info["title"], str) and info["title"]
    assert isinstance(info["topic"], str) and info["topic"]
    assert isinstance(info["tags"], list) and all(isinstance(t, str) for t in info["tags"])
    assert info["type"] == "v3"
    parser = _Elements()
    parser.feed((out / "question.html").read_text(encoding="utf-8"))
    inputs = [a for tag, a in parser.found if tag == "pl-matrix-component-input"]
    assert [a["answers-name"] for a in inputs] == ["Q", "K", "V", "scores", "scaled", "weights", "output"]
    for a in inputs:
        assert a["comparison"] == "sigfig" and a["digits"] == "3"
        assert a["allow-partial-credit"] == "true" and a["allow-feedback"] == "true"
    server = load_server(out, "lesson")
    data = pl_data(8)
    server.generate(data)
    assert data["params"]["version"] == "A"
    for name, matrix in data["correct_answers"].items():
        assert np.array(matrix).shape == (3, 3)
        for i in range(3):
            for j in range(3):
                assert Fraction(repr(matrix[i][j])) == sig3(RIGHT[name][i, j]), (name, i, j)
    json.dumps(data)                               # PrairieLearn stores data as JSON
    # grade: a student who forgot √d_k in row I, right elsewhere, and slipped on one entry
    for k in range(9):
        i, j = divmod(k, 3)
        data["raw_submitted_answers"][f"weights{k + 1}"] = f"{float(sig3(RIGHT['weights'][i, j])):#.3g}"   # as the sheet rounds: 0.000890
    data["raw_submitted_answers"]["weights1"] = str(float(sig3(UNSCALED["weights"][0, 0])))
    data["raw_submitted_answers"]["weights5"] = "0.5"
    server.grade(data)
    feedback = data["feedback"]["symattn"]
    assert "weights[I, I]</code>: you did not divide by √d_k" in feedback
    assert "weights[love, love]" not in feedback    # a wrong number no mistake explains: no name
    assert feedback.count("<li>") == 1
    assert "0.136" not in feedback                  # feedback never shows a right value
    right = pl_data(8)
    server.generate(right)
    right["raw_submitted_answers"] = {f"weights{k + 1}": f"{float(sig3(RIGHT['weights'][divmod(k, 3)])):#.3g}"
                                      for k in range(9)}
    server.grade(right)
    assert "symattn" not in right["feedback"]
    # the sheet's rule: 0.00089 for 0.000890 is right to 5 places only (issue 25), and told so
    right["raw_submitted_answers"]["weights4"] = "0.00089"
    server.grade(right)
    assert "weights[love, I]</code>: right to 5 decimal places, but the sheet asks for 3 significant " \
        "digits" in right["feedback"]["symattn"]


def pl_sigfig(a_sub: float, a_tru: float, digits: int) -> bool:
    """PrairieLearn's is_correct_scalar_sf (prairielearn/core.py), transcribed."""
    n = digits - 1 if a_tru == 0 else -int(np.floor(np.log10(np.abs(a_tru)))) + (digits - 1)
    eps = 0.51 * (10.0 ** -n)
    return bool(a_tru - eps < a_sub < a_tru + eps)


def pl_decdig(a_sub: float, a_tru: float, digits: int) -> bool:
    """PrairieLearn's is_correct_scalar_dd, transcribed."""
    eps = 0.51 * (10.0 ** -digits)
    return bool(a_tru - eps < a_sub < a_tru + eps)


@pytest.mark.parametrize("rounding", [("--digits", "3"), ("--places", "2")])
def test_prairielearn_comparison_accepts_the_key_and_rejects_every_mistake(tmp_path, rounding):
    """With PrairieLearn's own comparison (sigfig or decdig, as question.html asks), each
    certified right value typed is accepted and every named mistake's value is not."""
    out = tmp_path / "q"
    assert run("export", "--to", "prairielearn", "--example", "i-love-cats", *rounding, "-o", str(out)) == 0
    server = load_server(out, f"cmp{rounding[0][2:]}")
    data = pl_data(0)
    server.generate(data)
    compare = pl_sigfig if rounding[0] == "--digits" else pl_decdig
    digits = int(rounding[1])
    [v] = load_versions(None, "i-love-cats", *({"--digits": (Rounding(digits=3), None),
                                                  "--places": (Rounding(places=2), None)}[rounding[0]]))
    checked = 0
    for q in v.questions:
        for e in q.entries:
            truth = data["correct_answers"][q.step][e.row][e.col]
            answers = e.answers(v.rounding)
            assert compare(float(answers[0].value.text), truth, digits), e.target
            for a in answers[1:]:
                assert not compare(float(plain(a.value)), truth, digits), (e.target, a.codes)
                checked += 1
    assert checked > 100


def test_prairielearn_worksheet_versions_by_variant_seed(tmp_path):
    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "3", "--seed", "5", "-o", str(folder)) == 0
    out = tmp_path / "q"
    assert run("export", "--to", "prairielearn", str(folder), "-o", str(out)) == 0
    server = load_server(out, "versions")
    versions = load_versions(folder, None, None, None)
    for seed in (0, 1, 2, 3, 10**12 + 1):
        data = pl_data(seed)
        server.generate(data)
        v = versions[seed % 3]
        assert data["params"]["version"] == v.label
        w = data["correct_answers"]["weights"]
        q = [question for question in v.questions if question.step == "weights"][0]
        assert w == [[float(q.entry(i, j).right(v.rounding).text) for j in range(q.shape[1])]
                     for i in range(q.shape[0])]
        assert "seed" not in json.dumps(data["params"])


def test_versions_named_by_the_codes_their_sheets_print(tmp_path):
    """A worksheet folder whose worksheet.json lists opaque codes: students see the code
    (question text, PrairieLearn's params), the teacher sees id and code (Moodle's names)."""
    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "2", "--seed", "4", "--questions", "weights",
               "-o", str(folder)) == 0
    (folder / "worksheet.json").write_text(json.dumps(
        {"versions": [{"id": "A", "code": "K7Q-F2M"}, {"id": "B", "code": "Z9P-4HX"}]}),
        encoding="utf-8")
    assert run("export", "--to", "moodle", str(folder), "-o", str(tmp_path / "q.xml")) == 0
    questions = ET.parse(tmp_path / "q.xml").getroot().findall("question[@type='cloze']")
    assert [q.find("name/text").text.split(", ")[-1] for q in questions] == [
        "version A (code K7Q-F2M)", "version B (code Z9P-4HX)"]
    assert "(version Z9P-4HX)" in questions[1].find("questiontext/text").text
    assert run("export", "--to", "prairielearn", str(folder), "-o", str(tmp_path / "pl")) == 0
    server = load_server(tmp_path / "pl", "codes")
    data = pl_data(1)
    server.generate(data)
    assert data["params"]["version"] == "Z9P-4HX"
    (folder / "worksheet.json").write_text("{not json", encoding="utf-8")   # unreadable: ids
    assert [v.label for v in load_versions(folder, None, None, None)] == ["A", "B"]


def test_prairielearn_random_versions(tmp_path):
    out = tmp_path / "q"
    assert run("export", "--to", "prairielearn", "--example", "i-love-cats", "--random", "-o", str(out)) == 0
    server = load_server(out, "random")
    from symattn.classroom import plruntime

    seen = set()
    for seed in (1, 2, 3):
        data = pl_data(seed)
        server.generate(data)
        v = plruntime.pick(data, server.VERSIONS, server.SETTINGS)
        assert data["params"]["version"] == v.vid
        # float64 cross-check of the drawn problem's weights, from its problem file (tomllib)
        w = float64_weights(tomllib.loads(v.toml))
        got = np.array(data["correct_answers"]["weights"])
        assert np.all(np.abs(got - w) <= 0.0051 * np.maximum(np.abs(w), 1e-300) + 1e-12)
        seen.add(json.dumps(data["correct_answers"]))
        again = pl_data(seed)
        server.generate(again)
        assert again["correct_answers"] == data["correct_answers"]   # a variant is reproducible
    assert len(seen) == 3


def test_prairielearn_folder_keeps_foreign_files(tmp_path, capsys):
    out = tmp_path / "q"
    out.mkdir()
    (out / "server.py").write_text("# the teacher's own\n", encoding="utf-8")
    assert run("export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(out)) == 2
    assert (out / "server.py").read_text(encoding="utf-8") == "# the teacher's own\n"
    assert not (out / "info.json").exists()         # refused before anything was written
    other = tmp_path / "r"
    other.mkdir()
    (other / "notes.txt").write_text("keep", encoding="utf-8")
    assert run("export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(other)) == 0
    assert run("export", "--to", "prairielearn", "--example", "soft-dictionary", "-o", str(other)) == 2
    assert "made from example i-love-cats, 1 version(s)" in capsys.readouterr().err
    assert run("export", "--to", "prairielearn", "--example", "soft-dictionary", "--force",
               "-o", str(other)) == 0
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep"
    assert "Soft dictionary" in (other / "server.py").read_text(encoding="utf-8")


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("argv, words", [
    (["--to", "moodle", "--random"], "--random applies to --to prairielearn"),
    (["--to", "moodle", "no-such.toml"], "no such file or folder"),
    (["--to", "qti", "--questions", "weigths"], "no question 'weigths'"),
    (["--to", "moodle", "--digits", "20"], "at most 15 significant digits"),
    (["--to", "moodle", "--example", "no-such"], "no example named"),
    (["--to", "moodle", "--example", "soft-dictionary", "--questions", "Q,K"], "no questions to ask"),
    (["--to", "moodle"], "export what? give a problem file, a worksheet folder or --example NAME"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, words):
    assert run("export", *argv, "-o", str(tmp_path / "x.xml")) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x.xml").exists()


def test_folder_without_manifest_is_refused(tmp_path, capsys):
    (tmp_path / "version-A.toml").write_text('Q = [[1]]\nK = [[1]]\nV = [[1]]\n', encoding="utf-8")
    assert run("export", "--to", "moodle", str(tmp_path), "-o", str(tmp_path / "q.xml")) == 2
    assert "not a worksheet folder" in capsys.readouterr().err


def test_a_class_of_thirty_versions(tmp_path):
    """The teacher's run: 30 versions → every platform; each version's key is in its export."""
    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "30", "--seed", "2026", "--questions", "weights",
               "-o", str(folder)) == 0
    assert run("export", "--to", "moodle", str(folder), "-o", str(tmp_path / "quiz.xml")) == 0
    assert run("export", "--to", "qti", str(folder), "-o", str(tmp_path / "quiz.zip")) == 0
    assert run("export", "--to", "prairielearn", str(folder), "-o", str(tmp_path / "pl")) == 0
    root = ET.parse(tmp_path / "quiz.xml").getroot()
    assert len(root.findall("question[@type='cloze']")) == 30
    zf = zipfile.ZipFile(tmp_path / "quiz.zip")
    assert sum(1 for n in zf.namelist() if n.endswith("/assessment_meta.xml")) == 30
    server = load_server(tmp_path / "pl", "thirty")
    assert len(server.VERSIONS) == 30
    versions = load_versions(folder, None, None, None)
    for q, v in zip(root.findall("question[@type='cloze']"), versions):
        fields = cloze_fields(q.find("questiontext/text").text)
        assert [f[0]["value"] for f in fields] == [e.right(v.rounding).as_fraction()
                                                    for e in v.questions[0].entries]


# ------------------------------------------------------------------ caps

def _scores_problem(tmp_path: Path, n: int, m: int) -> Path:
    path = tmp_path / f"p{n}x{m}.toml"
    rows = lambda r: "[" + ", ".join("[1, 0]" if k % 2 else "[0, 1]" for k in range(r)) + "]"
    path.write_text(f"Q = {rows(n)}\nK = {rows(m)}\nV = {rows(m)}\n", encoding="utf-8")
    return path


def test_boxes_cap_at_its_edge(tmp_path, capsys):
    from symattn.classroom.answers import MAX_BOXES, load_versions

    assert MAX_BOXES == 400
    [v] = load_versions(_scores_problem(tmp_path, 20, 20), None, None, ("scores",))
    assert v.boxes == 400                            # accepted (values are computed on demand)
    assert v.questions[0].entry(19, 19).right(v.rounding).text == "1"
    big = _scores_problem(tmp_path, 20, 21)
    assert run("export", "--to", "moodle", str(big), "--questions", "scores",
               "-o", str(tmp_path / "q.xml")) == 2
    err = capsys.readouterr().err
    assert "420 answer boxes, over the 400" in err and err.count("\n") == 1
    assert not (tmp_path / "q.xml").exists()


def test_total_boxes_cap(tmp_path, monkeypatch, capsys):
    from symattn.classroom import answers

    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "3", "--seed", "1", "--questions", "weights",
               "-o", str(folder)) == 0
    monkeypatch.setattr(answers, "MAX_TOTAL_BOXES", 27)   # three versions of 3×3 weights: at the cap
    assert len(answers.load_versions(folder, None, None, None)) == 3
    monkeypatch.setattr(answers, "MAX_TOTAL_BOXES", 26)
    assert run("export", "--to", "moodle", str(folder), "-o", str(tmp_path / "q.xml")) == 2
    assert "over 26 answer boxes together" in capsys.readouterr().err
    assert run("worksheet", "--versions", "3", "--seed", "1", "--questions", "weights",
               "--selfcheck", "-o", str(tmp_path / "pages")) == 2
    assert not (tmp_path / "pages").exists()


@pytest.mark.parametrize("example", ["i-love-cats-causal", "sliding-window", "off-by-one-softmax",
                                     "soft-dictionary-long-orange", "i-love-cats-unscaled"])
def test_every_variant_exports(tmp_path, example):
    """Masks, windows, sinks, Q/K/V given, no scaling: each exports to every platform, and the
    Moodle key holds the certified answers (masked weights are exactly 0)."""
    [v] = load_versions(None, example, None, None)
    assert run("export", "--to", "moodle", "--example", example, "-o", str(tmp_path / "q.xml")) == 0
    assert run("export", "--to", "qti", "--example", example, "-o", str(tmp_path / "q.zip")) == 0
    assert run("export", "--to", "prairielearn", "--example", example, "-o", str(tmp_path / "pl")) == 0
    root = ET.parse(tmp_path / "q.xml").getroot()
    fields = cloze_fields(root.find("question[@type='cloze']/questiontext/text").text)
    entries = [e for q in v.questions for e in q.entries]
    assert [f[0]["value"] for f in fields] == [e.right(v.rounding).as_fraction() for e in entries]
    if v.problem.mask is not None:
        weights = [q for q in v.questions if q.step == "weights"][0]
        blocked = [e for e in weights.entries if not v.trace.is_allowed(e.row, e.col)]
        assert blocked and all(e.right(v.rounding).as_fraction() == 0 and e.right(v.rounding).exact
                               for e in blocked)
    server = load_server(tmp_path / "pl", example.replace("-", "_"))
    data = pl_data(3)
    server.generate(data)
    assert set(data["correct_answers"]) == {q.step for q in v.questions}


def test_cloze_feedback_survives_moodles_parser():
    """Feedback with Cloze's syntax characters reads back whole through Moodle's own regexes."""
    from symattn.numbers.certify import Rounding
    from symattn.check.verdict import MistakeCell
    from symattn.classroom.answers import Answer
    from symattn.classroom.moodle import cloze_field

    [v] = load_versions(None, "i-love-cats", None, ("weights",))
    e = v.questions[0].entries[0]
    right, unscaled = e.answers(Rounding(digits=3))[:2]
    odd = Answer(unscaled.value, (MistakeCell("odd-code", "a}b#c~d\\e", e.cell),))
    [field] = cloze_fields("<p>" + cloze_field([right, odd]) + "</p>")
    assert field[0] == {"credit": 100, "value": Fraction("0.136"), "tol": Fraction("0.0005"),
                        "feedback": "right"}
    assert field[1]["feedback"] == "odd-code: a}b#c∼d∖e"
    assert field[1]["value"] == Fraction("0.0634") and field[1]["credit"] == 0


def test_teachers_run_export_then_grade_agree(tmp_path):
    """Worksheet → Moodle export → a class CSV typed from the export's own answers → grade:
    the right values grade right and the values Moodle names 'you did not divide by √d_k'
    grade as the mistake unscaled (the same engine on both sides)."""
    import csv

    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "6", "--seed", "31", "--questions", "weights",
               "-o", str(folder)) == 0
    assert run("export", "--to", "moodle", str(folder), "-o", str(tmp_path / "quiz.xml")) == 0
    questions = ET.parse(tmp_path / "quiz.xml").getroot().findall("question[@type='cloze']")
    rows = []
    for k, q in enumerate(questions):
        vid = re.search(r"version ([A-Z]+)", q.find("name/text").text).group(1)
        first_row = cloze_fields(q.find("questiontext/text").text)[:3]      # weights[I, ·]
        if k % 2 == 0:
            typed = [f[0]["value"] for f in first_row]
        else:
            typed = [next((a["value"] for a in f if a["feedback"].startswith("you did not divide")),
                          f[0]["value"]) for f in first_row]
        rows.append([f"s{k}", vid, ", ".join(str(float(x)) for x in typed)])
    submissions = tmp_path / "class.csv"
    with open(submissions, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["student", "version", "weights[I]"], *rows])
    report = tmp_path / "report.csv"
    assert run("grade", str(folder), str(submissions), "-o", str(report)) in (0, 1)
    graded = list(csv.DictReader(open(report, encoding="utf-8")))
    assert len(graded) == 6
    for k, row in enumerate(graded):
        if k % 2 == 0:
            assert row["weights[I]"] in ("rounded", "exact"), row
        else:
            assert row["weights[I]"] == "mistake" and row["weights[I] mistake"] == "unscaled", row


# ------------------------------------------------------------------ points

def cloze_weights(text: str) -> list[int]:
    """Each Cloze field's weight, as Moodle's parser reads it ({N:NUMERICAL:...})."""
    return [int(m.group(1) or 1) for m in _ANSWER_REGEX.finditer(text)]


def qti_points(zf: zipfile.ZipFile) -> tuple[list[list[str]], list[str]]:
    """Per quiz the items' points_possible (inputs item left out), and each quiz's total."""
    manifest = ET.fromstring(zf.read("imsmanifest.xml"))
    items, totals = [], []
    for r in manifest.findall(f"{CP}resources/{CP}resource"):
        if r.get("type") != "imsqti_xmlv1p2":
            continue
        href = r.find(f"{CP}file").get("href")
        assessment = ET.fromstring(zf.read(href))
        points = []
        for item in assessment.findall(f".//{QTI}item")[1:]:
            fields = {f.find(f"{QTI}fieldlabel").text: f.find(f"{QTI}fieldentry").text
                      for f in item.iter(f"{QTI}qtimetadatafield")}
            points.append(fields["points_possible"])
        items.append(points)
        meta = ET.fromstring(zf.read(href.split("/")[0] + "/assessment_meta.xml"))
        totals.append(meta.find("{http://canvas.instructure.com/xsd/cccv1p0}points_possible").text)
    return items, totals


def test_worksheet_points_weight_moodle_and_qti(tmp_path):
    """A folder made with --points weights=3,output=2: each Moodle question is worth 5 and its
    Cloze fields share it 3 : 2 (weights 1/3 a box, output 2/9 a box: whole-number weights 3
    and 2 over 9 boxes each); each Canvas item carries its box's share."""
    folder = tmp_path / "sheets"
    assert run("worksheet", "--versions", "2", "--seed", "7", "--questions", "weights,output",
               "--points", "weights=3,output=2", "-o", str(folder)) == 0
    assert run("export", "--to", "moodle", str(folder), "-o", str(tmp_path / "quiz.xml")) == 0
    questions = ET.parse(tmp_path / "quiz.xml").getroot().findall("question[@type='cloze']")
    assert len(questions) == 2
    for q in questions:
        assert q.find("defaultgrade").text == "5"
        weights = cloze_weights(q.find("questiontext/text").text)
        assert weights == [3] * 9 + [2] * 9
        share = Fraction(sum(weights[:9]), sum(weights))
        assert share == Fraction(3, 5)                      # the weights question is 3 of 5 points
    assert run("export", "--to", "qti", str(folder), "-o", str(tmp_path / "quiz.zip")) == 0
    items, totals = qti_points(zipfile.ZipFile(tmp_path / "quiz.zip"))
    assert totals == ["5", "5"]
    for points in items:
        assert points == ["0.3333333"] * 9 + ["0.2222222"] * 9   # 1/3 and 2/9, 7 places
        assert abs(sum(Fraction(p) for p in points) - 5) < Fraction(18, 10**7)


def test_points_on_the_command_line_win(tmp_path):
    """export --points 9,18 (in question order): 1 and 2 points a box, whole numbers throughout."""
    out = tmp_path / "quiz.xml"
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "--questions", "weights,output", "--points", "9,18",
               "-o", str(out)) == 0
    q = ET.parse(out).getroot().find("question[@type='cloze']")
    assert q.find("defaultgrade").text == "27"
    assert cloze_weights(q.find("questiontext/text").text) == [1] * 9 + [2] * 9
    assert run("export", "--to", "qti", "--example", "i-love-cats", "--questions", "weights,output", "--points", "9,18",
               "-o", str(tmp_path / "quiz.zip")) == 0
    items, totals = qti_points(zipfile.ZipFile(tmp_path / "quiz.zip"))
    assert items == [["1"] * 9 + ["2"] * 9] and totals == ["27"]


def test_without_points_a_box_is_one_point(tmp_path):
    out = tmp_path / "quiz.xml"
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "--questions", "weights", "-o", str(out)) == 0
    q = ET.parse(out).getroot().find("question[@type='cloze']")
    assert q.find("defaultgrade").text == "9"
    assert cloze_weights(q.find("questiontext/text").text) == [1] * 9


@pytest.mark.parametrize("points, words", [
    ("weights=0", "must be above 0"),
    ("1,2,3", "gives 3 numbers for 1 questions"),
    ("weigths=2", "not a question of this sheet"),
])
def test_bad_points_are_one_line(tmp_path, capsys, points, words):
    assert run("export", "--to", "moodle", "--example", "i-love-cats", "--questions", "weights", "--points", points,
               "-o", str(tmp_path / "x.xml")) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x.xml").exists()
