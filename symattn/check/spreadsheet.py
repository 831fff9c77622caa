"""Class CSVs as spreadsheets write them: the delimiter, the encoding, decimal commas.

Why a module of its own: a teacher exports the class from Excel or
LibreOffice, and in many locales (de, fr, es, it, nl, pt, ru, …) those write
``;`` between cells and a decimal comma in numbers; a row answer is then
written with semicolons inside its cell (``0,136; 0,432; 0,432``).  None of
that is the CSV module's business, and none of it may change how an
ordinary comma-separated file is read.

The delimiter is decided from the header row alone (``csv.Sniffer`` guesses
from the answers, where commas and semicolons are part of the figures, and
guesses wrong): the separators outside quotes and brackets are counted, and
the most frequent of ``,``, ``;`` and tab wins (a tie is a comma).  Excel's
``sep=;`` first line, when present, decides instead.

A decimal comma is read per cell, and only where the cell cannot mean
anything else: every comma sits between two digits, no number has two of
them, and the cell holds nothing but numerals, signs, ``%``, ``≈`` and the
separators.  When the cell could also be a comma-separated row (``0,5`` for
a 1×2 target), the target's shape decides; when both readings fit, the
file's delimiter does (a semicolon file writes decimal commas).
"""

from __future__ import annotations

import re

from symattn.errors import SymattnError

__all__ = ["DELIMITERS", "decode", "decimal_comma", "figure_commas", "header_delimiter", "sep_line"]

DELIMITERS = (",", ";", "\t")

_SEP_LINE = re.compile(r"^\ufeff?sep=(.)\r?\n", re.IGNORECASE)
_CANDIDATE = re.compile(r"[\s0-9,;\[\]+\-−%≈~]*")
_DIGIT_COMMA = re.compile(r"(?<=[0-9]),(?=[0-9])")
_TWO_COMMAS = re.compile(r"[0-9]+,[0-9]+,[0-9]")


def decode(data: bytes) -> str:
    """The text of a submissions file: UTF-8 with or without a BOM; UTF-16 when it starts
    with a UTF-16 BOM (Excel's "Unicode text"); a bad byte becomes U+FFFD in its cell."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def sep_line(text: str) -> tuple[str, str | None]:
    """Excel's optional first line ``sep=;``: (the text without it, its delimiter)."""
    match = _SEP_LINE.match(text)
    if match and match[1] in DELIMITERS:
        return text[match.end():], match[1]
    return text, None


def header_delimiter(text: str) -> str:
    """The delimiter of a CSV text, decided from its first non-blank line (the header).

    Separators inside quotes (``"weights[love, cats]"``) or brackets (``weights[I, I]``
    left unquoted) are not counted."""
    line = ""
    for candidate in text.splitlines():
        if candidate.strip():
            line = candidate
            break
    counts = dict.fromkeys(DELIMITERS, 0)
    quoted, depth = False, 0
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif depth == 0 and ch in counts:
            counts[ch] += 1
    best = max(DELIMITERS, key=lambda d: (counts[d], -DELIMITERS.index(d)))
    return best if counts[best] else ","


_NUMBER = re.compile(r"(?:≈|~)?\s*[+\-−]?[0-9]+(?:\.[0-9]+)?%?")


def _entries(text: str) -> int | None:
    """How many entries ``check`` reads in a figure of plain numerals (rows by ``;``, new
    lines or brackets; entries by commas, else by spaces); None when a piece is not a
    numeral (``136 0`` is what a decimal comma read as a separator leaves)."""
    count = 0
    for row in re.split(r"[;\n]|\]\s*,?\s*\[", text):
        row = row.strip(" []\t\r")
        if not row.strip(" ,"):
            continue
        pieces = row.split(",") if "," in row else row.split()
        for piece in pieces:
            if not _NUMBER.fullmatch(piece.strip()):
                return None
        count += len(pieces)
    return count or None


def _with_points(text: str) -> str:
    return _DIGIT_COMMA.sub(".", text).replace(";", ",")


def decimal_comma(cell: str, size: int | None = None, semicolons: bool = False) -> str:
    """The cell with decimal commas read as points (``0,136; 0,432`` → ``0.136, 0.432``),
    or the cell unchanged when its commas are not decimal commas.

    ``size`` is the number of entries the target has (None when unknown); ``semicolons``
    says the file is semicolon-delimited (so its writer uses decimal commas)."""
    if not (_DIGIT_COMMA.search(cell) or ";" in cell) or not _CANDIDATE.fullmatch(cell):
        return cell                      # no decimal comma, and no ';' between entries
    if len(_DIGIT_COMMA.findall(cell)) != cell.count(",") or _TWO_COMMAS.search(cell):
        return cell                      # '0.1, 0.2' or '2,4,4': commas between entries
    converted = _with_points(cell)
    if size is not None:
        fits_converted = _entries(converted) == size
        fits_written = _entries(cell) == size
        if fits_converted != fits_written:
            return converted if fits_converted else cell
    return converted if semicolons or ";" in cell else cell


def figure_commas(text: str, size: int, target: str) -> str:
    """A figure of ``symattn check`` with decimal commas read as points, or unchanged.

    The rule of :func:`decimal_comma` without a file delimiter: the target's size decides
    between the two readings (``0,5`` is one decimal for one entry, two entries for two);
    when both fit, a ``;`` means decimal commas.  Where a decimal comma is possible but
    neither reading fits, or decimal commas are mixed with commas between entries
    (``0,136, 0,432``), the error says so instead of reporting a shape."""
    if not _DIGIT_COMMA.search(text) or not _CANDIDATE.fullmatch(text):
        return decimal_comma(text, size)
    if len(_DIGIT_COMMA.findall(text)) != text.count(",") or _TWO_COMMAS.search(text):
        digits_only = _entries(_DIGIT_COMMA.sub(".", text))
        if not _TWO_COMMAS.search(text) and _entries(text) != size and digits_only == size:
            raise SymattnError(
                f"{text!r} mixes decimal commas with commas between entries, so {target} "
                f"cannot be read from it: with decimal commas, separate the entries with ';' "
                "(0,136; 0,432; 0,432), or write decimal points (0.136, 0.432, 0.432)")
        return text                      # commas between entries: read as written
    written, read = _entries(text), _entries(_with_points(text))
    if (written == size) != (read == size):
        return _with_points(text) if read == size else text
    if written == size:
        return _with_points(text) if ";" in text else text
    if written is None or read is None:
        return text                      # not plain numerals: check explains the figure
    raise SymattnError(
        f"{text!r} has {written} entries with commas between them, or {read} with decimal "
        f"commas, but {target} has {size}: write one entry per value (with decimal commas, "
        "separate the entries with ';': 0,136; 0,432; 0,432)")
