"""Moodle XML: one Cloze (multianswer) question per version, in a category.

Moodle's XML format (docs.moodle.org, "Moodle XML format"): a ``<quiz>`` of
``<question>`` elements; a ``category`` question puts the following ones in
that category, so a quiz can draw one version at random from it.  A Cloze
question embeds one field per answer box::

    {1:NUMERICAL:=0.136:0.0005#right~%0%0.0634:0.0005#you did not divide by √d_k}

The right answer (full credit, tolerance half a unit in the last place) comes
first — Moodle takes the first answer a response matches — then each named
mistake's value with 0 % credit and feedback naming it.  The general
feedback is the key: every question's formula and certified answers.
"""

from __future__ import annotations

from collections.abc import Callable

import math
import re
import xml.etree.ElementTree as ET
from fractions import Fraction
from html import escape

from symattn.classroom.answers import Answer, ClassroomError, VersionAnswers
from symattn.classroom.fragments import given_html, grid_html, intro_html, key_html, question_heading
from symattn.classroom.numbers import plain, plain_points, tolerance
from symattn.classroom.output import MADE_FROM, MARK
from symattn.output.escaping import cloze_html, html_text, xml_document

__all__ = ["cloze_field", "field_weights", "moodle_xml"]

#: The start of a Cloze answer field, as Moodle's parser finds one ({N:TYPE:)
_FIELD = re.compile(r"\{[0-9]*:[A-Z_]+:")


def _cloze_escape(text: str) -> str:
    """Feedback text inside a Cloze field, as Moodle's parser reads it back
    (question/type/multianswer/questiontype.php): it ends at an unescaped ``~`` or ``}``
    and unescapes only ``\\}`` and ``\\#``; so those two are escaped, and a ``~`` or a
    backslash (which would stay in the text) is written as ∼ or ∖.  Moodle shows the
    feedback as HTML, so it is HTML-escaped first."""
    text = escape(text, quote=False).replace("\\", "∖").replace("~", "∼")
    return text.replace("}", "\\}").replace("#", "\\#")


def _cloze_answer(a: Answer, right: bool) -> str:
    mark = "=" if right else "%0%"
    said = "right" if right else a.feedback
    return f"{mark}{plain(a.value)}:{plain(tolerance(a.value))}#{_cloze_escape(said)}"


def cloze_field(answers: list[Answer], weight: int = 1) -> str:
    """One NUMERICAL field: the right answer first, then every mistake's value at 0 %."""
    parts = [_cloze_answer(answers[0], True)] + [_cloze_answer(a, False) for a in answers[1:]]
    return "{" + f"{weight}:NUMERICAL:" + "~".join(parts) + "}"


def _text(parent: ET.Element, tag: str, text: str, fmt: str | None = "html") -> ET.Element:
    node = ET.SubElement(parent, tag, {"format": fmt} if fmt else {})
    ET.SubElement(node, "text").text = text
    return node


def field_weights(v: VersionAnswers) -> tuple[list[list[int]], Fraction]:
    """Each entry's Cloze weight (per question) and the question's grade.

    A Cloze field's weight is a whole number, and Moodle grades the question by the weights'
    shares: each entry's points times the least common denominator of them all, so the
    shares are exactly the points' (with whole points per entry the weights ARE the
    points).  The grade is the total of the points."""
    points = [v.entry_points(q) for q in v.questions]
    scale = 1
    for p in (p for qp in points for p in qp):
        scale = math.lcm(scale, p.denominator)
    return [[int(p * scale) for p in qp] for qp in points], v.total_points


def _question(v: VersionAnswers, title: str) -> ET.Element:
    q = ET.Element("question", {"type": "cloze"})
    name = ET.SubElement(q, "name")
    code = f" (code {v.code})" if v.code else ""
    ET.SubElement(name, "text").text = f"{title}, version {v.vid}{code}"
    body = [f"<p><b>{cloze_html(title)}</b> (version {cloze_html(v.label)})</p>",
            given_html(v, cloze_html), intro_html(v, cloze_html)]
    weights, grade = field_weights(v)
    for question, wq in zip(v.questions, weights):
        cols = question.shape[1]
        fields = [[cloze_field(e.answers(v.rounding), wq[i * cols + j])
                   for j, e in enumerate(question.entries[i * cols:(i + 1) * cols])]
                  for i in range(question.shape[0])]
        body += [question_heading(question, cloze_html),
                 grid_html(question, _cell_of(fields), cloze_html)]
    text = "".join(body)
    count, expected = len(_FIELD.findall(text)), sum(len(wq) for wq in weights)
    if count != expected:    # user text is neutralised above; this is the proof
        raise ClassroomError(f"the Cloze text of version {v.vid} has {count} answer fields, not "
                             f"{expected}: a name or title holds Cloze syntax symattn did not escape")
    _text(q, "questiontext", text)
    _text(q, "generalfeedback", key_html(v))
    ET.SubElement(q, "defaultgrade").text = plain_points(grade)
    ET.SubElement(q, "penalty").text = "0.3333333"
    ET.SubElement(q, "hidden").text = "0"
    ET.SubElement(q, "idnumber").text = f"symattn-{v.vid}"
    return q


def moodle_xml(versions: list[VersionAnswers], category: str | None = None,
               made_from: str | None = None) -> str:
    """The quiz file: a category, then one Cloze question per version.  ``made_from`` (the
    source and the number of versions) is recorded in a comment, so a later export from
    another source does not replace the file unasked."""
    title = versions[0].title
    quiz = ET.Element("quiz")
    cat = ET.SubElement(quiz, "question", {"type": "category"})
    # a "/" in a name starts a subcategory in Moodle's path; "//" is a slash in the name
    _text(cat, "category", f"$course$/top/symattn/{category or title.replace('/', '//')}", fmt=None)
    _text(cat, "info", f"{len(versions)} version(s) of '{html_text(title)}' made by symattn; draw one "
                       "at random.")
    for v in versions:
        quiz.append(_question(v, title))
    return xml_document(quiz, MARK, *([f"{MADE_FROM}{made_from}"] if made_from else []))


def _cell_of(fields: list[list[str]]) -> Callable[[int, int], str]:
    """The grid's cell (i, j): one question's Cloze fields, bound now (not the loop's last)."""
    return lambda i, j: fields[i][j]
