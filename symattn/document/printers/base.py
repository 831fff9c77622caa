"""The printer base class: ``_print_<ClassName>`` dispatch, as SymPy's printers do.

A printer subclass defines one method per block and math-node type it
prints; ``print(node)`` walks the class's MRO to find it, so a new node type
that subclasses an old one prints as the old one until a printer learns it.
Section numbers are computed once per document from the tree
(:func:`section_numbers`), so no printer hard-codes them.
"""

from __future__ import annotations

from typing import Any

from symattn.document.blocks import Document, Section


class PrinterError(TypeError):
    """A node the printer has no ``_print_<ClassName>`` method for (a programming error)."""


def section_numbers(doc: Document) -> dict[int, str]:
    """``id(section) -> "5a"``: numbered sections count 1, 2, …; a ``sub`` section takes
    the previous number with a letter; unnumbered sections (Inputs) get none."""
    numbers: dict[int, str] = {}
    count, letter = 0, 0
    for section in doc.sections:
        if not section.numbered:
            continue
        if section.sub and count:
            letter += 1
            numbers[id(section)] = f"{count}{chr(ord('a') + letter - 1)}"
        else:
            count += 1
            letter = 0
            numbers[id(section)] = str(count)
    return numbers


class Printer:
    """Walks a document: ``doprint(doc)`` returns the printed string."""

    format: str = ""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.numbers: dict[int, str] = {}

    def doprint(self, node: Any) -> Any:
        if isinstance(node, Document):
            self.numbers = section_numbers(node)
        return self.print(node)

    def number(self, section: Section) -> str | None:
        """The section's number in the document being printed (None if unnumbered)."""
        return self.numbers.get(id(section))

    def print(self, node: Any, **context: Any) -> Any:
        for cls in type(node).__mro__:
            method = getattr(self, f"_print_{cls.__name__}", None)
            if method is not None:
                return method(node, **context)
        raise PrinterError(f"{type(self).__name__} cannot print a {type(node).__name__}")
