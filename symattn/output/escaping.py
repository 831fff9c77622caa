"""Escaping user text for each format symattn writes, one helper per format.

Titles, token names, version codes and mistake feedback are user text; the
exports put them into XML (Moodle, Canvas QTI), HTML (question text, pages),
Moodle's Cloze syntax, JSON inside a ``<script>`` element and CSV reports.
Each format has exactly one helper here, and every writer calls it:

- XML: :func:`xml_document` serialises a tree and replaces the characters
  XML 1.0 forbids (C0 controls but tab, LF and CR; U+FFFE, U+FFFF; lone
  surrogates) with U+FFFD, so the file is always well-formed.  (The problem
  reader refuses them first: :data:`XML_FORBIDDEN`.)
- HTML text: :func:`html_text` (``<``, ``>``, ``&``, quotes).
- Cloze: :func:`cloze_html` is the HTML text with ``{`` and ``}`` written as
  ``&#123;`` and ``&#125;``: Moodle's parser finds a field only at a literal
  ``{N:TYPE:``, so user text can never open (or close) an answer field; the
  browser shows the braces.
- JSON in ``<script>``: :func:`script_json` writes ``<``, ``>``, ``&``,
  U+2028 and U+2029 as ``\\u`` escapes, so no ``</script>`` or ``<!--``
  can end or swallow the element, and the JSON means the same.
- CSV: :func:`csv_line` quotes every field holding a CR or LF (Python's
  ``csv`` module quotes only the line terminator's characters), so a
  carriage return in a student id cannot split a row.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from html import escape
from typing import Any, Iterable

__all__ = ["XML_FORBIDDEN", "cloze_html", "csv_line", "html_text", "script_json", "xml_document",
           "xml_safe"]

#: Characters XML 1.0 does not allow in a document (its ``Char`` production).
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """The text with every character XML 1.0 forbids replaced by U+FFFD."""
    return XML_FORBIDDEN.sub("\ufffd", text)


def xml_document(root: ET.Element, *comments: str) -> str:
    """A whole XML file: declaration, comments (one a line), the indented tree; always well-formed."""
    ET.indent(root)
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    for comment in comments:
        head += f"<!-- {comment.replace('--', '- -')} -->\n"
    return xml_safe(head + ET.tostring(root, encoding="unicode") + "\n")


def html_text(text: str) -> str:
    """User text for HTML content or a quoted attribute."""
    return escape(text, quote=True)


def cloze_html(text: str) -> str:
    """User text for a Moodle Cloze question's HTML: escaped, with its braces as entities, so
    Moodle's Cloze parser never reads an answer field in it."""
    return html_text(text).replace("{", "&#123;").replace("}", "&#125;")


_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                  "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def script_json(data: Any, **dumps: Any) -> str:
    """JSON for a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\u``
    escapes (a JSON string may hold them escaped, so the data read back is the same)."""
    text = json.dumps(data, **dumps)
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def csv_line(cells: Iterable[object], delimiter: str = ",", lineterminator: str = "\n") -> str:
    """One CSV row, every field holding a CR or LF quoted (``csv`` quotes only the characters
    of the line terminator it is given: with ``\\n`` a lone ``\\r`` went out bare)."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerow(cells)
    return out.getvalue()[:-2] + lineterminator
