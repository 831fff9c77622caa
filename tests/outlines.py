"""The section outline of a rendered document, read back from each format's own text
(shared by the document and online-softmax tests)."""

from __future__ import annotations

import html
import re


def text_outline(text: str) -> list[tuple[str | None, str]]:
    out = []
    for line in text.splitlines():
        if line == "Inputs":
            out.append((None, "Inputs"))
        m = re.match(r"^(\d+[a-z]?)\. (.+?)(?::|$)", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def latex_outline(tex: str) -> list[tuple[str | None, str]]:
    out = []
    for title in re.findall(r"\\subsection\*\{([^}]*)\}", tex):
        m = re.match(r"^(\d+[a-z]?)\. (.+)$", title)
        out.append((m.group(1), m.group(2)) if m else (None, title))
    return out


def html_outline(page: str) -> list[tuple[str | None, str]]:
    out = []
    for raw in re.findall(r"<h2[^>]*>(.*?)</h2>", page, flags=re.S):
        title = html.unescape(re.sub(r"<[^>]+>", "", raw)).strip()
        m = re.match(r"^(\d+[a-z]?)\. (.+)$", title)
        out.append((m.group(1), m.group(2)) if m else (None, title))
    return out
