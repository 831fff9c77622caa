"""Hostile names and titles at every writer: Moodle Cloze, Canvas QTI, the self-check page's
JSON, the grade report's CSV.  Issue 24, scope item 1.

Each finding is first reproduced by hand (a Cloze field in a title, an ``<img onerror>`` token,
U+FFFE, ``<!--<script>`` in the page data, a CR in a student id), then random hostile text
(hypothesis) is checked against the formats' own readers: Moodle's Cloze regexes (transcribed
in test_export), xml.etree, html.parser and csv.reader.  A hostile version is compared with
the same problem under plain names: the number of answer fields, the XML element tree and
the HTML tags must be the same.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import xml.etree.ElementTree as ET
import zipfile
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.check.grading.folder import Versions
from symattn.check.grading.grade import grade
from symattn.classroom.answers import version_answers
from symattn.classroom.moodle import moodle_xml
from symattn.classroom.qti import qti_zip
from symattn.classroom.selfcheck import selfcheck_page
from symattn.classroom.selfcheck_data import page_data
from symattn.cli import main
from symattn.errors import ProblemError
from symattn.output.escaping import cloze_html, csv_line, script_json, xml_document
from symattn.numbers.certify import Rounding
from symattn.problem.problem import Problem
from test_export import cloze_fields

QKV = {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 2]], "V": [[1, 0], [0, 1]]}
HOSTILE_SNIPPETS = [
    "{1:SHORTANSWER:=x}", "{2:NUMERICAL:=1:0}", "{:MC:~=a~b}", "{", "}", "~", "=", "#", "%100%",
    ":", "\\}", "\\", "&#123;", "&amp;", "&", "<img src=x onerror=alert(1)>", "<b>", "</p>",
    "<!--", "-->", "<script>", "</script>", "<![CDATA[", "]]>", "'", '"', "/", "//", "$course$",
    "\u2028", "\u2029", "𝔸", "é", " ",
]
NOT_XML = ["\ufffe", "\uffff", "\ud800", "\udfff", "\x00", "\x01", "\x0b", "\x1f"]


def lesson(tokens=("a", "b"), title="T") -> Problem:
    return Problem(**QKV, tokens=list(tokens), title=title)


def versions(problem: Problem, code: str | None = None, questions=("scores", "weights")):
    v = version_answers(problem, Rounding(digits=3), questions, "A", "")
    v.code = code
    return [v]


class Tags(HTMLParser):
    """The HTML's shape as a browser-like parser sees it: every tag, comment and declaration."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.shape: list[tuple] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.shape.append(("start", tag, tuple(k for k, _ in attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self.shape.append(("end", tag))
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data

    def handle_comment(self, data):
        self.shape.append(("comment",))

    def handle_decl(self, decl):
        self.shape.append(("decl", decl.split()[0].lower()))

    def unknown_decl(self, data):
        self.shape.append(("unknown_decl",))


def tree_shape(root: ET.Element) -> list[tuple]:
    return [(e.tag, tuple(sorted(e.attrib))) for e in root.iter()]


def _html_nodes(root: ET.Element) -> list[ET.Element]:
    """Moodle's HTML texts (format="html"); a question's name is plain text."""
    return [t for parent in root.iter() if parent.get("format") == "html" for t in parent.findall("text")]


def cloze_text(xml: str) -> str:
    return ET.fromstring(xml.split("-->\n", 1)[1]).find("question[@type='cloze']/questiontext/text").text


# ------------------------------------------------------------------ the findings, by hand

def test_cloze_syntax_in_title_tokens_and_code_is_no_answer_field():
    problem = lesson(["{1:SHORTANSWER:=x}", "b}~#="], "Quiz {2:NUMERICAL:=1:0} ~=#}")
    xml = moodle_xml(versions(problem, code="{1:MC:~=a}"))
    fields = cloze_fields(cloze_text(xml))
    assert len(fields) == 8                      # scores and weights, 2×2 each: nothing more
    plain = cloze_fields(cloze_text(moodle_xml(versions(lesson()))))
    assert fields == plain                       # the same fields, answers and feedback
    shown = "".join(_text_of(cloze_text(xml)))
    assert "Quiz {2:NUMERICAL:=1:0} ~=#}" in shown   # the reader still sees the title as typed


def _text_of(html: str) -> list[str]:
    out: list[str] = []

    class P(HTMLParser):
        def handle_data(self, data):
            out.append(data)

    P(convert_charrefs=True).feed(html)
    return out


def test_token_html_never_reaches_qti_or_moodle_html():
    problem = lesson(["<img src=x onerror=alert(1)>", "<b>b</b>"], "<script>alert(1)</script>")
    vs = versions(problem)
    root = ET.fromstring(moodle_xml(vs).split("-->\n", 1)[1])
    html_nodes = _html_nodes(root)
    assert len(html_nodes) == 3                  # info, questiontext, generalfeedback; name is text
    for node in html_nodes:
        tags = {t[1] for t in Tags(node.text or "").shape if t[0] == "start"}
        assert tags <= {"p", "b", "table", "caption", "tr", "th", "td"}, tags
    info = root.find("question[@type='category']/info/text").text
    assert Tags(info).shape == []                # the category description: text, no markup
    with zipfile.ZipFile(io.BytesIO(qti_zip(vs))) as zf:
        texts = [m.text for name in zf.namelist() if name.endswith(".xml")
                 for m in ET.fromstring(zf.read(name)).findall(".//{*}mattext")]
    assert texts
    for html in texts:
        tags = {t[1] for t in Tags(html).shape if t[0] == "start"}
        assert tags <= {"p", "b", "code", "table", "caption", "tr", "th", "td"}, (tags, html)
    assert any("[<img src=x onerror=alert(1)>, " in "".join(_text_of(h)) for h in texts)


@pytest.mark.parametrize("char", NOT_XML[:2])      # TOML cannot spell a lone surrogate: see below
@pytest.mark.parametrize("key", ["title", "tokens", "about"])
def test_characters_xml_forbids_are_refused_when_the_problem_is_read(tmp_path, capsys, char, key):
    escaped = f"\\u{ord(char):04X}"
    value = {"title": f'"x{escaped}y"', "tokens": f'["a{escaped}", "b"]', "about": f'"x{escaped}"'}[key]
    path = tmp_path / "p.toml"
    path.write_text(f"{key} = {value}\nQ = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 2]]\n"
                    "V = [[1, 0], [0, 1]]\n", encoding="utf-8")
    out = tmp_path / "q.xml"
    assert main(["export", "--to", "moodle", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"U+{ord(char):04X}" in err and ("tokens[0]" if key == "tokens" else key) in err
    assert not out.exists()


@pytest.mark.parametrize("char", NOT_XML)
def test_problem_refuses_every_forbidden_character(char):
    with pytest.raises(ProblemError, match="title"):
        lesson(title=f"a{char}b")
    with pytest.raises(ProblemError, match=r"tokens\[1\]"):
        lesson(tokens=["a", f"b{char}"])


@pytest.mark.parametrize("char", NOT_XML)
def test_xml_writers_stay_well_formed(char):
    """A version code (worksheet.json, not read by the problem reader) with a character XML
    forbids: both XML exports still parse."""
    vs = versions(lesson(), code=f"K{char}7")
    ET.fromstring(moodle_xml(vs).encode("utf-8"))
    with zipfile.ZipFile(io.BytesIO(qti_zip(vs))) as zf:
        for name in zf.namelist():
            ET.fromstring(zf.read(name))
    root = ET.Element("r", {"a": f"x{char}"})
    root.text = f"y{char}"
    assert ET.fromstring(xml_document(root).encode("utf-8")).text == "y\ufffd"


def test_selfcheck_data_cannot_swallow_the_pages_script():
    problem = lesson(["<!--<script>", "</script><script>alert(1)</script>"], "<!-- & \u2028")
    [v] = versions(problem, questions=("weights",))
    page = selfcheck_page(v, "C<!--1")
    tags = Tags(page)
    assert [t for t in tags.shape if t[:2] == ("start", "script")] == [("start", "script", ("type", "id")),
                                                                       ("start", "script", ())]
    assert tags.shape == Tags(selfcheck_page(versions(lesson(), questions=("weights",))[0], "C1")).shape
    data = tags.scripts[0]
    assert not re.search("[<>&\u2028\u2029]", data)
    assert json.loads(data) == page_data(v).to_json()


def test_script_json_reads_back_the_same():
    value = {"a": "</script><!--<script>&\u2028\u2029", "<k>": ["&amp;"]}
    text = script_json(value)
    assert not re.search("[<>&\u2028\u2029]", text) and json.loads(text) == value


def _report(ids: list[str], delimiter: str = ",") -> str:
    problem = lesson()
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(["student", "scores[a]"])
    for sid in ids:
        writer.writerow([sid, "1, 0"])
    report = grade(Versions(single=problem), buffer.getvalue(), "class.csv")
    return report.to_csv()


def test_carriage_return_in_a_student_id_cannot_split_a_row():
    text = _report(["ann\r=cmd|' /C calc'!A0", "bob\rx", "=1+1", "@SUM(1)"])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 5
    assert rows[1][0] == "ann\r=cmd|' /C calc'!A0"
    assert rows[3][0] == "'=1+1" and rows[4][0] == "'@SUM(1)"
    # a reader that ends a row at every bare CR or LF (outside quotes) finds the same rows
    assert len(_bare_line_split(text)) == 5


def _bare_line_split(text: str) -> list[str]:
    rows, quoted, current = [], False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch in "\r\n" and not quoted:
            if current:
                rows.append(current)
            current = ""
            continue
        current += ch
    return rows + ([current] if current else [])


def test_csv_line_quotes_cr_and_keeps_ordinary_rows():
    assert csv_line(["a", "b c", "1.5"]) == "a,b c,1.5\n"
    assert csv_line(["a\rb", "c\nd", 'e"f', "g,h"]) == '"a\rb","c\nd","e""f","g,h"\n'
    assert csv_line(["a;b", "c"], ";") == '"a;b";c\n'


# ------------------------------------------------------------------ random hostile text

_XML_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
pieces = st.one_of(st.sampled_from(HOSTILE_SNIPPETS),
                   st.text(alphabet="{}~=#%:<>&\"'\\/!-[]xy09 ", max_size=4))
hostile = st.lists(pieces, min_size=1, max_size=6).map("".join)


def _name(text: str) -> str:
    text = _XML_BAD.sub("", text).replace("[", "(").replace("]", ")").replace(",", ";")
    return text if text.strip() and not text.strip().lstrip("-").isdigit() else "x" + text


names = hostile.map(_name)
codes = st.lists(st.one_of(pieces, st.sampled_from(NOT_XML)), min_size=1, max_size=5).map("".join)
#: examples per property; SYMATTN_HOSTILE_EXAMPLES=500 for a longer fuzzing run (docs/security.md)
EXAMPLES = int(os.environ.get("SYMATTN_HOSTILE_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLAIN = versions(lesson())
PLAIN_XML = moodle_xml(PLAIN)


def _hostile_versions(a: str, b: str, title: str, code: str):
    if a == b:
        b = b + "_b"          # not "2": "-" and "-2" would read as an index
    return versions(lesson([a, b], title), code=code)


@SETTINGS
@given(a=names, b=names, title=hostile.map(lambda t: _XML_BAD.sub("", t)), code=codes)
def test_moodle_answer_fields_and_tree_never_change(a, b, title, code):
    xml = moodle_xml(_hostile_versions(a, b, title, code))
    root = ET.fromstring(xml.encode("utf-8"))
    plain_root = ET.fromstring(PLAIN_XML.encode("utf-8"))
    assert tree_shape(root) == tree_shape(plain_root)
    assert cloze_fields(cloze_text(xml)) == cloze_fields(cloze_text(PLAIN_XML))
    for node, plain in zip(_html_nodes(root), _html_nodes(plain_root), strict=True):
        assert Tags(node.text or "").shape == Tags(plain.text or "").shape


@SETTINGS
@given(a=names, b=names, title=hostile.map(lambda t: _XML_BAD.sub("", t)), code=codes)
def test_qti_tree_and_html_never_change(a, b, title, code):
    def parsed(data: bytes) -> list:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return [ET.fromstring(zf.read(n)) for n in zf.namelist()]

    hostile_roots, plain_roots = parsed(qti_zip(_hostile_versions(a, b, title, code))), parsed(qti_zip(PLAIN))
    assert sum(len(r.findall(".//{*}mattext")) for r in plain_roots) > 8
    for root, plain in zip(hostile_roots, plain_roots, strict=True):
        assert tree_shape(root) == tree_shape(plain)
        for m, p in zip(root.findall(".//{*}mattext"), plain.findall(".//{*}mattext"), strict=True):
            assert Tags(m.text).shape == Tags(p.text).shape


PLAIN_PAGE = Tags(selfcheck_page(versions(lesson(), questions=("weights",))[0], "C1")).shape


@SETTINGS
@given(a=names, b=names, title=hostile.map(lambda t: _XML_BAD.sub("", t)), code=hostile)
def test_selfcheck_page_never_gains_a_script_or_element(a, b, title, code):
    [v] = versions(lesson([a, b + "2" if a == b else b], title), questions=("weights",))
    page = selfcheck_page(v, code)
    tags = Tags(page)
    assert tags.shape == PLAIN_PAGE
    data = tags.scripts[0]
    assert not re.search("[<>&\u2028\u2029]", data)
    assert json.loads(data) == page_data(v).to_json()


ids = st.lists(st.one_of(st.sampled_from(["\r", "\n", "\r\n", '"', ",", ";", "=", "+", "-", "@",
                                           "\t", "=cmd|' /C calc'!A0", "'"]),
                         st.text(alphabet="ab ", min_size=1, max_size=3)),
               min_size=1, max_size=6).map("".join)


@SETTINGS
@given(students=st.lists(ids, min_size=1, max_size=4), delimiter=st.sampled_from([",", ";"]))
def test_report_csv_round_trips_with_the_same_rows(students, delimiter):
    students = [s for s in students if s.strip()] or ["x"]
    students.append("z\r" + students[0] + "\r=cmd|' /C calc'!A0")   # a CR inside, every example
    text = _report(students, delimiter)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    assert len(rows) == 1 + len(students)
    assert len(_bare_line_split(text)) == 1 + len(students)
    for row in rows[1:]:
        for cell in row:
            assert not cell[:1] in ("=", "+", "-", "@", "\t", "\r") or re.fullmatch(r"-?[0-9.]+", cell)
