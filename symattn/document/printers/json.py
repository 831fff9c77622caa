"""The JSON printer: a document's outline and blocks as plain data.

``document_json(doc)`` gives ``{"title", "sections": [{"number", "key", "title",
"formula", "blocks": [...]}, ...], "summary": {...}}``; every block and math
node is ``{"type": ClassName, ...its fields}``, exact values as SymPy strings
(``sympy.sympify`` reads them back), certified decimals as their text,
``"-inf"`` where a mask blocks.  The numeric contract of ``explain --format
json`` (``render/json.py``) is separate and unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.document.blocks import Block, Document, Math, Section, Summary
from symattn.document.printers.base import Printer
from symattn.numbers.masked import NEG_INF


class JsonPrinter(Printer):
    """Prints a document as JSON-ready data (dicts, lists, strings, numbers)."""

    format = "json"

    def _print_Document(self, doc: Document) -> dict:
        summary = next((c for c in doc.children if isinstance(c, Summary)), None)
        return {"title": doc.title,
                "summary": self.print(summary) if summary is not None else None,
                "sections": [self.print(s) for s in doc.sections]}

    def _print_Section(self, s: Section) -> dict:
        return {"number": self.number(s), "key": s.key, "title": s.title,
                "formula": self.value(s.formula), "blocks": [self.print(b) for b in s.children]}

    def _print_Block(self, node: Block) -> dict:
        return self._fields(node)

    def _print_Math(self, node: Math) -> dict:
        return self._fields(node)

    def _fields(self, node: Any) -> dict:
        out = {"type": type(node).__name__}
        for f in dataclasses.fields(node):
            out[f.name] = self.value(getattr(node, f.name))
        return out

    def value(self, v: Any) -> Any:
        """Any field value as JSON data."""
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if v is NEG_INF:
            return "-inf"
        if isinstance(v, CertifiedDecimal):
            return str(v)
        if isinstance(v, Rounding):
            return {"digits": v.digits, "places": v.places}
        if isinstance(v, sympy.Basic):
            return sympy.sstr(v)
        if isinstance(v, (Math, Block)):
            return self.print(v)
        if isinstance(v, (tuple, list)):
            return [self.value(x) for x in v]
        if dataclasses.is_dataclass(v):
            return self._fields(v)
        if isinstance(v, dict):
            return {str(k): self.value(x) for k, x in v.items()}
        return str(v)


def document_json(doc: Document) -> dict:
    """A document as JSON-ready data: its outline (numbered sections) and every block."""
    return JsonPrinter().doprint(doc)


def document_json_text(doc: Document, indent: int | None = None) -> str:
    """``document_json`` serialised."""
    return json.dumps(document_json(doc), ensure_ascii=False, indent=indent)
