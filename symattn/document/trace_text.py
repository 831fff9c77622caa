"""The terminal view of a Trace: the derivation document printed as Unicode text.

The outline (inputs, Q K V, scores with dot products written out, the scaled
scores by hand, the softmax with the max-subtraction trick, weights, output,
checks) is built once in ``symattn.document.build.trace``; this module only chooses
what the terminal shows and prints it with ``document.printers.text``.
"""

from __future__ import annotations

from dataclasses import dataclass

from symattn.numbers.certify import Rounding
from symattn.document.build.trace import DocumentOptions, build_document
from symattn.document.printers.text import print_text
from symattn.trace.trace import Trace


@dataclass(frozen=True)
class TextOptions:
    """What the terminal view shows."""

    digits: int = 3
    dot_row: int | str | None = None       # row whose dot products are written out (default: first)
    softmax_row: int | str | None = None   # row worked with the max-subtraction trick (default: last)
    limit: int = 8                         # matrices larger than this elide the middle
    places: int | None = None              # decimal places instead of digits (--places)
    rows: tuple[int | str, ...] | None = None   # the rows worked by hand, both kinds (--rows)


def document_options(options: TextOptions) -> DocumentOptions:
    """The terminal's choices: one worked row each (or the --rows), dot products of those rows only."""
    dot: tuple[int | str, ...] | None = (options.dot_row,) if options.dot_row is not None else None
    soft: tuple[int | str, ...] | None = (options.softmax_row,) if options.softmax_row is not None else None
    if options.rows:
        dot = soft = tuple(options.rows)
    rounding = Rounding(places=options.places) if options.places is not None else Rounding(digits=options.digits)
    return DocumentOptions(rounding=rounding, dot_rows=dot, softmax_rows=soft,
                           output_rows=dot, every_dot_product=False, limit=options.limit)


def render_text(trace: Trace, options: TextOptions = TextOptions()) -> str:
    """The whole derivation as terminal text."""
    return print_text(build_document(trace, document_options(options)))
