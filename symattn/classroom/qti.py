"""Canvas Classic Quizzes, QTI 1.2: quiz.zip with imsmanifest.xml, one quiz per version.

The layout is the one Canvas exports and imports (and gpoore/text2qti writes):
``imsmanifest.xml`` names, per quiz, a resource of type ``imsqti_xmlv1p2``
(``ID/ID.xml``, the ``<questestinterop>`` assessment) that depends on
``ID/assessment_meta.xml`` (Canvas's quiz settings).  Each answer box is a
``numerical_question`` item: the right value with a margin of half a unit in
its last place (``<or><varequal/><and><vargte/><varlte/></and></or>``, full
credit, ``continue="No"``), then each named mistake's range with its own
``displayfeedback`` and no credit.  A text-only item at the top of each quiz
gives the inputs.  Identifiers are derived from the title and version, so the
same input gives the same bytes (the zip's timestamps are fixed too).
"""

from __future__ import annotations

import hashlib
import io
import xml.etree.ElementTree as ET
import zipfile
from fractions import Fraction

from symattn.classroom.answers import Answer, Entry, Question, VersionAnswers
from symattn.classroom.fragments import given_html, intro_html, key_html
from symattn.classroom.numbers import plain, plain_points, tolerance, value
from symattn.classroom.output import MADE_FROM, ZIP_MARK
from symattn.output.escaping import html_text, xml_document

__all__ = ["qti_zip", "assessment_xml", "manifest_xml"]

QTI_NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
CP_NS = "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"
CANVAS_NS = "http://canvas.instructure.com/xsd/cccv1p0"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _ident(*parts: str) -> str:
    return "g" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _sub(parent: ET.Element, tag: str, attrs: dict | None = None, text: str | None = None) -> ET.Element:
    node = ET.SubElement(parent, tag, attrs or {})
    if text is not None:
        node.text = text
    return node


def _meta(parent: ET.Element, fields: list[tuple[str, str]]) -> None:
    md = _sub(_sub(parent, "itemmetadata"), "qtimetadata")
    for label, entry in fields:
        f = _sub(md, "qtimetadatafield")
        _sub(f, "fieldlabel", text=label)
        _sub(f, "fieldentry", text=entry)


def _material(parent: ET.Element, html: str) -> None:
    _sub(_sub(parent, "material"), "mattext", {"texttype": "text/html"}, html)


def _feedback(item: ET.Element, ident: str, html: str) -> None:
    fb = _sub(item, "itemfeedback", {"ident": ident})
    _material(_sub(fb, "flow_mat"), html)


def _range(cond: ET.Element, a: Answer) -> None:
    x, tol = value(a.value), tolerance(a.value)
    _sub(cond, "vargte", {"respident": "response1"}, plain(x - tol))
    _sub(cond, "varlte", {"respident": "response1"}, plain(x + tol))


def _item(v: VersionAnswers, q: Question, e: Entry, ident: str, points: Fraction) -> ET.Element:
    answers = e.answers(v.rounding)
    item = ET.Element("item", {"ident": ident, "title": e.target})
    _meta(item, [("question_type", "numerical_question"), ("points_possible", plain_points(points)),
                 ("original_answer_ids", ",".join(f"{ident}_a{k}" for k in range(len(answers)))),
                 ("assessment_question_identifierref", f"{ident}_ref")])
    pres = _sub(item, "presentation")
    _material(pres, f"<p>Question {q.number}, {html_text(q.ask)}: give <code>{html_text(e.target)}"
                    f"</code>, correctly rounded to {html_text(str(v.rounding))}.</p>")
    resp = _sub(pres, "response_str", {"ident": "response1", "rcardinality": "Single"})
    _sub(_sub(resp, "render_fib", {"fibtype": "Decimal"}), "response_label", {"ident": "answer1"})
    proc = _sub(item, "resprocessing")
    _sub(_sub(proc, "outcomes"), "decvar", {"maxvalue": "100", "minvalue": "0", "varname": "SCORE",
                                            "vartype": "Decimal"})
    right = _sub(proc, "respcondition", {"continue": "No"})
    either = _sub(_sub(right, "conditionvar"), "or")
    _sub(either, "varequal", {"respident": "response1"}, plain(answers[0].value))
    _range(_sub(either, "and"), answers[0])
    _sub(right, "setvar", {"action": "Set", "varname": "SCORE"}, "100")
    _sub(right, "displayfeedback", {"feedbacktype": "Response", "linkrefid": "correct_fb"})
    for k, a in enumerate(answers[1:], start=1):
        wrong = _sub(proc, "respcondition", {"continue": "Yes"})
        _range(_sub(wrong, "conditionvar"), a)
        _sub(wrong, "displayfeedback", {"feedbacktype": "Response", "linkrefid": f"{ident}_a{k}_fb"})
    _feedback(item, "correct_fb", "<p>Right.</p>")
    for k, a in enumerate(answers[1:], start=1):
        _feedback(item, f"{ident}_a{k}_fb", f"<p>Not right: {html_text(a.feedback)}.</p>")
    return item


def assessment_xml(v: VersionAnswers, ident: str) -> str:
    """One version as a QTI 1.2 assessment: an inputs item, then one numerical item per box."""
    root = ET.Element("questestinterop", {"xmlns": QTI_NS, "xmlns:xsi": XSI,
                                          "xsi:schemaLocation": f"{QTI_NS} {QTI_NS}p1.xsd"})
    title = f"{v.title}, version {v.label}"
    test = _sub(root, "assessment", {"ident": ident, "title": title})
    md = _sub(_sub(test, "qtimetadata"), "qtimetadatafield")
    _sub(md, "fieldlabel", text="cc_maxattempts")
    _sub(md, "fieldentry", text="1")
    section = _sub(test, "section", {"ident": "root_section"})
    intro = _sub(section, "item", {"ident": f"{ident}_given", "title": "Given"})
    _meta(intro, [("question_type", "text_only_question"), ("points_possible", "0")])
    _material(_sub(intro, "presentation"), given_html(v) + intro_html(v))
    for q in v.questions:
        for e, points in zip(q.entries, v.entry_points(q)):
            section.append(_item(v, q, e, f"{ident}_q{q.number}_{e.row}_{e.col}", points))
    return xml_document(root)


def _assessment_meta(v: VersionAnswers, ident: str, points: Fraction) -> str:
    quiz = ET.Element("quiz", {"identifier": ident, "xmlns": CANVAS_NS, "xmlns:xsi": XSI,
                               "xsi:schemaLocation": f"{CANVAS_NS} https://canvas.instructure.com/xsd/cccv1p0.xsd"})
    _sub(quiz, "title", text=f"{v.title}, version {v.label}")
    _sub(quiz, "description", text=key_html(v).split("</p>", 1)[0] + "</p>")
    for tag, text in (("shuffle_answers", "false"), ("scoring_policy", "keep_highest"),
                      ("quiz_type", "assignment"), ("points_possible", plain_points(points)),
                      ("show_correct_answers", "true"), ("allowed_attempts", "-1"),
                      ("available", "false")):
        _sub(quiz, tag, text=text)
    return xml_document(quiz)


def manifest_xml(idents: list[str], titles: list[str]) -> str:
    """imsmanifest.xml: each quiz's assessment resource and its Canvas settings."""
    root = ET.Element("manifest", {"identifier": _ident("manifest", *idents), "xmlns": CP_NS,
                                   "xmlns:imsmd": "http://www.imsglobal.org/xsd/imsmd_v1p2"})
    meta = _sub(root, "metadata")
    _sub(meta, "schema", text="IMS Content")
    _sub(meta, "schemaversion", text="1.1.3")
    _sub(root, "organizations")
    resources = _sub(root, "resources")
    for ident, _title in zip(idents, titles):
        dep = f"{ident}_meta"
        res = _sub(resources, "resource", {"identifier": ident, "type": "imsqti_xmlv1p2"})
        _sub(res, "file", {"href": f"{ident}/{ident}.xml"})
        _sub(res, "dependency", {"identifierref": dep})
        meta_res = _sub(resources, "resource", {
            "identifier": dep, "type": "associatedcontent/imscc_xmlv1p1/learning-application-resource",
            "href": f"{ident}/assessment_meta.xml"})
        _sub(meta_res, "file", {"href": f"{ident}/assessment_meta.xml"})
    return xml_document(root)


def qti_zip(versions: list[VersionAnswers], made_from: str | None = None) -> bytes:
    """quiz.zip: imsmanifest.xml and, per version, its assessment and assessment_meta.xml;
    ``made_from`` is recorded in the archive comment after the marker."""
    idents = [_ident(v.title, v.vid, v.toml) for v in versions]
    members: list[tuple[str, str]] = [("imsmanifest.xml", manifest_xml(
        idents, [f"{v.title}, version {v.label}" for v in versions]))]
    for v, ident in zip(versions, idents):
        members.append((f"{ident}/{ident}.xml", assessment_xml(v, ident)))
        members.append((f"{ident}/assessment_meta.xml", _assessment_meta(v, ident, v.total_points)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.comment = ZIP_MARK + (f"\n{MADE_FROM}{made_from}".encode() if made_from else b"")
        for name, text in members:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text.encode("utf-8"))
    return buffer.getvalue()
