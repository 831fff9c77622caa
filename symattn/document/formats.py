"""A result's document in the format a command asked for, and the HTML fragment Jupyter shows.

Commands that print a result (``heads``, ``facts``, ``check``) build a document
and hand it here: ``text``, ``latex`` (a complete document, or with ``fragment``
its body), ``html`` (one self-contained page).  ``json`` stays each command's own
numeric contract, so it is not printed here.  :func:`html_fragment` is the
notebook form: no ``<html>``/``<body>``, and the page's stylesheet rewritten so
every rule applies only inside one wrapper class (it cannot restyle the notebook).
"""

from __future__ import annotations

import re

from symattn.document.blocks import Document
from symattn.document.printers.base import section_numbers

__all__ = ["FORMATS", "WRAPPER", "print_document", "html_fragment", "scoped_css"]

FORMATS = ("text", "json", "latex", "html")
WRAPPER = "symattn-doc"


def print_document(doc: Document, fmt: str, *, fragment: bool = False, paper: str = "letter") -> str:
    """The document as text, LaTeX (``fragment``: the body only; ``paper``: a4 or letter) or an
    HTML page."""
    if fmt == "text":
        from symattn.document.blocks import Report, Summary
        from symattn.document.printers.text import print_text
        text = print_text(doc)
        if isinstance(doc, Report) or any(isinstance(c, Summary) for c in doc.children):
            return text
        return f"{doc.title}\n{'═' * len(doc.title)}\n" + text
    if fmt == "latex":
        from symattn.document.printers.latex import print_latex
        from symattn.document.support.latexdoc import document
        body = print_latex(doc)
        if fragment:
            return body
        from symattn.document.support.texutil import tex_escape
        return document(f"\\section*{{{tex_escape(doc.title)}}}\n" + body, paper=paper)
    if fmt == "html":
        from symattn.document.printers.html import print_html
        return print_html(doc)
    raise ValueError(f"no printer for format {fmt!r}")


def scoped_css(css: str, scope: str = f".{WRAPPER}") -> str:
    """The page stylesheet with every selector inside ``scope`` (``html``, ``body``, ``:root``
    and ``*`` become the scope itself); the print rules are left out (a notebook prints itself)."""
    out = []
    for selectors, body in re.findall(r"([^{}@]+)\{([^{}]*)\}", _without_media(css)):
        scoped = []
        for sel in selectors.split(","):
            sel = sel.strip()
            if not sel:
                continue
            if sel in (":root", "html", "body"):
                scoped.append(scope)
            elif sel == "*":
                scoped.append(f"{scope}, {scope} *")
            else:
                scoped.append(f"{scope} {sel}")
        out.append(f"{', '.join(scoped)} {{{body}}}")
    return "\n".join(out)


def _without_media(css: str) -> str:
    """``css`` with its ``@media`` blocks (one level of nesting) removed."""
    return re.sub(r"@media[^{]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", "", css)


def html_fragment(doc: Document) -> str:
    """The document as an HTML fragment for Jupyter: a wrapper ``div`` with its own scoped style."""
    from symattn.document.printers.html import HtmlPrinter
    from symattn.document.support import mathml as m
    from symattn.document.support.page import CSS

    printer = HtmlPrinter()
    printer.numbers = section_numbers(doc)
    body = "".join(printer.print(child) for child in doc.children)
    return (f'<div class="{WRAPPER}" lang="en"><style>{scoped_css(CSS)}\n.{WRAPPER} {{ max-width: none; '
            f'padding: 0; }}</style>\n<h2 class="{WRAPPER}-title">{m.escape(doc.title)}</h2>\n{body}</div>\n')
