"""Written figures: the text a person wrote, read exactly, with its precision.

Why a module of its own: a figure's precision comes from its TEXT, not its
value.  ``0.010`` has 3 decimal places, numpy's ``0.`` has 0, ``13.6%`` has
3 (as a fraction), ``1.14e-7`` has 3 significant digits.  So a written
number is kept as its exact value *and* the rounding it claims.  Anything
that is not a plain numeral (``2/√3``, ``e^(2/sqrt(3))``) is an exact
expression, read by symattn's own parser (never ``eval``/``sympify``).

Shapes: a number; a row (``0.14, 0.43, 0.43``, ``[0.14 0.43 0.43]``,
``0.00 / 0.98 / 0.02``); a matrix (``[[...], [...]]``, rows separated by
``;`` or new lines, numpy's printed form pasted verbatim, ``array([...])``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from fractions import Fraction

import sympy

from symattn.numbers.certify import Rounding
from symattn.errors import ParseError
from symattn.exact.parser import parse_expression

__all__ = ["MAX_FIGURE_LENGTH", "MAX_ENTRIES", "Written", "WrittenExact", "WrittenInfinity",
           "WrittenNumber", "read_figure"]

MAX_FIGURE_LENGTH = 1_000_000   # characters in one written figure (a 128×128 matrix fits)
MAX_ENTRIES = 65_536            # entries in one written figure
MAX_NUMERAL_DIGITS = 1_000      # digits in one written numeral
MAX_NESTING = 2                 # a figure is at most a matrix
MAX_EXPRESSION_LENGTH = 1_000   # characters in one written exact expression (2/√3 is 4)

_APPROX = re.compile(r"^\s*(?:≈|~|≃|≅|=|about\b|approx\.?|approximately\b)\s*", re.IGNORECASE)
_NUMERAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,6}))?(%?)")
_BINARY = "*/^·×÷+"
_LABELLED = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)=(\S+)")   # red=0.41, as Python prints
_INFINITY = re.compile(r"([+-]?)(?:inf|infinity|oo|∞)", re.IGNORECASE)   # -inf, −∞, -oo
_WORD = re.compile(r"[^\W\d][\w/'.-]*")                      # banana, n/a, don't
_NORMAL = str.maketrans({"−": "-", "–": "-", "\u00a0": " ", "\u2009": " ", "\u202f": " "})


@dataclass(frozen=True)
class WrittenNumber:
    """A decimal numeral: its exact value and the rounding its text claims."""

    text: str
    value: Fraction
    rounding: Rounding
    unit: Fraction        # one unit in the last written place (of the value, % removed)
    percent: bool = False

    @property
    def places(self) -> int | None:
        return self.rounding.places


@dataclass(frozen=True)
class WrittenExact:
    """An exact expression such as ``2/√3``: right only if exactly equal."""

    text: str
    value: sympy.Expr


@dataclass(frozen=True)
class WrittenInfinity:
    """``-inf``, ``−∞`` or ``-oo``: what a masked score is (numpy prints ``-inf``).

    Why not an exact expression: the parser refuses infinities on purpose
    (no problem entry may be infinite), but a masked or shifted entry IS −∞,
    and a person who writes it so is right there and only there."""

    text: str
    negative: bool

    @property
    def value(self) -> sympy.Expr:
        return sympy.S.NegativeInfinity if self.negative else sympy.S.Infinity


Entry = WrittenNumber | WrittenExact | WrittenInfinity


@dataclass(frozen=True)
class Written:
    """A whole written figure: rows of entries; ``vector`` when written as one flat list."""

    text: str
    rows: tuple[tuple[Entry, ...], ...]
    vector: bool
    labels: tuple[str, ...] | None = None   # 'red=0.41  green=0.22': entries named by column

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0])

    @property
    def entries(self) -> list[Entry]:
        return [e for row in self.rows for e in row]

    @property
    def is_scalar(self) -> bool:
        return self.shape == (1, 1) and not self.vector


def _fail(text: str, where: str, problem: str, fix: str) -> ParseError:
    shown = repr(text if len(text) <= 40 else text[:37] + "...")
    return ParseError(f"cannot read {shown} in {where}: {problem}; {fix}")


# ------------------------------------------------------------ one entry

@lru_cache(maxsize=256)
def _places(places: int) -> Rounding:
    return Rounding(places=places)


def read_number(text: str, where: str = "figure") -> WrittenNumber | None:
    """A plain numeral with its precision, or None when the text is not one."""
    match = _NUMERAL.fullmatch(text)
    if not match or not (match[2] or match[3]):
        return None
    sign, whole, frac, exp, percent = match.groups()
    if len(whole) + len(frac or "") > MAX_NUMERAL_DIGITS:
        raise _fail(text, where, f"a numeral has over {MAX_NUMERAL_DIGITS:,} digits",
                    "write fewer digits")
    if percent and exp is not None:
        raise _fail(text, where, "a percentage with an exponent", "write 13.6% or 0.136")
    frac = frac or ""
    mantissa = int(whole + frac or "0")
    shift = int(exp or 0) - len(frac)
    if abs(shift) > 10_000:
        raise _fail(text, where, "its exponent is too large", "use a smaller exponent")
    if percent:
        shift -= 2
    if sign == "-":
        mantissa = -mantissa
    value = Fraction(mantissa * 10**shift) if shift >= 0 else Fraction(mantissa, 10**-shift)
    unit = Fraction(10**shift) if shift >= 0 else Fraction(1, 10**-shift)
    if exp is None:
        rounding = _places(max(0, -shift))
        if shift > 0:  # "1e3"-like cannot happen without exp; keep the type total
            unit = Fraction(1)
    else:
        significant = len((whole + frac).lstrip("0")) or 1
        rounding = Rounding(digits=min(significant, 100_000))
    return WrittenNumber(text, value, rounding, unit, bool(percent))


def read_entry(text: str, where: str = "figure") -> Entry:
    """One written entry: a numeral (with precision), ±∞, or an exact expression."""
    raw = text
    text = _APPROX.sub("", text.translate(_NORMAL), count=1).strip()
    if not text:
        raise _fail(raw, where, "an entry is empty", "write a number in every place")
    number = read_number(text.replace(" ", ""), where)
    if number is not None:
        return WrittenNumber(raw.strip(), number.value, number.rounding, number.unit, number.percent)
    infinity = _INFINITY.fullmatch(text.replace(" ", ""))
    if infinity:
        return WrittenInfinity(raw.strip(), infinity[1] == "-")
    if "%" in text:
        raise _fail(raw, where, "a percentage must be a plain number", "write 13.6%")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise _fail(raw, where, f"an expression of {len(text):,} characters, over the "
                    f"{MAX_EXPRESSION_LENGTH:,}-character cap", "simplify it")
    try:
        value = parse_expression(text, where=where)
    except ParseError:
        if _WORD.fullmatch(text):     # 'banana', 'n/a', 'none': a word, not a mistyped formula
            raise _fail(raw.strip(), where, "it is not a number",
                        "write a number such as 0.136 (or an exact value such as 2/√3)") from None
        raise
    return WrittenExact(raw.strip(), value)


# ------------------------------------------------------------ structure

def _split(text: str, seps: str) -> list[str]:
    """Split at any of ``seps`` outside parentheses."""
    if "(" not in text and ")" not in text:
        return re.split(f"[{re.escape(seps)}]", text)
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in seps:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return parts


def _row_items(text: str) -> list[str]:
    """The entries of one row: comma-separated, or ' / '-separated numerals, or by spaces."""
    text = text.strip()
    if "," in text:
        items = [t.strip() for t in _split(text, ",")]
        if items and items[-1] == "" and len(items) > 1:   # a trailing comma
            items.pop()
        return items
    if " / " in text:
        pieces = [p.strip() for p in text.split(" / ")]
        if all(_NUMERAL.fullmatch(_APPROX.sub("", p)) or _INFINITY.fullmatch(p) for p in pieces):
            return pieces
    pieces = [t for t in _split(text, " \t\r\n") if t.strip()]
    # '2 / √3' is one entry written with spaces, not three
    if any(p[0] in _BINARY or p[-1] in _BINARY + "(√" for p in pieces[1:]) or \
            (pieces and pieces[0][-1] in _BINARY + "(√"):
        return [text]
    return pieces


def _bracket_tree(text: str, where: str) -> list:
    """Nested bracket lists of raw text: '[[1 2] [3 4]]' -> [['1 2'], ['3 4']] style."""
    stack: list[list] = [[]]
    chunk = ""
    for ch in text:
        if ch == "[":
            if len(stack) > MAX_NESTING:
                raise _fail(text, where, "brackets nest deeper than a matrix",
                            "write a number, a row [..] or a matrix [[..], [..]]")
            if chunk.strip(" ,\n\t\r"):
                raise _fail(text, where, f"text {chunk.strip()!r} before '['",
                            "separate rows with commas or new lines")
            chunk = ""
            stack.append([])
        elif ch == "]":
            if len(stack) == 1:
                raise _fail(text, where, "unbalanced ']'", "remove it or add a '['")
            if chunk.strip():
                stack[-1].append(chunk)
            chunk = ""
            done = stack.pop()
            stack[-1].append(done)
        elif len(stack) == 1 and ch not in " ,\n\t\r":
            raise _fail(text, where, f"unexpected {ch!r} outside the brackets",
                        "put every entry inside the brackets")
        else:
            chunk += ch
    if len(stack) != 1:
        raise _fail(text, where, "unbalanced '['", "add the missing ']'")
    return stack[0]


def _rows_from_brackets(text: str, where: str) -> tuple[list[list[str]], bool]:
    tree = _bracket_tree(text, where)
    if len(tree) != 1:
        # a pasted list of rows without outer brackets: '[1 2]\n[3 4]'
        tree = [tree]
    top = tree[0]
    if all(isinstance(t, str) for t in top):            # one row: '[1, 2, 3]' or '[1 2; 3 4]'
        body = "".join(top)
        if ";" in body:
            return [_row_items(r) for r in _split(body, ";") if r.strip()], False
        return [_row_items(body)], True
    if any(isinstance(t, str) and t.strip(" ,\n\t\r") for t in top):
        raise _fail(text, where, "a matrix mixes rows and single numbers",
                    "write every row in brackets")
    rows = [t for t in top if not isinstance(t, str)]
    out = []
    for r in rows:
        if any(not isinstance(x, str) for x in r):
            raise _fail(text, where, "brackets nest deeper than a matrix",
                        "write a number, a row [..] or a matrix [[..], [..]]")
        out.append(_row_items("".join(r)))
    return out, False


def _shape_error(rows: list[list[str]], vector: bool, shape: tuple[int, int], name: str) -> str | None:
    """Why a written layout cannot be the target's shape (None when it fits)."""
    r, c = len(rows), len(rows[0])
    if (r, c) == shape or (vector and r * c == shape[0] * shape[1] and 1 in shape):
        return None
    kind = f"a row of {c}" if vector else f"shape {r}×{c}"
    return f"the figure has {kind} but {name} is {shape[0]}×{shape[1]}: write one entry per value"


_READ_BEFORE_SHAPE = 64   # entries read to explain a wrong layout (a 1,500-entry answer costs nothing)


def _unreadable_entry(rows: list[list[str]], where: str) -> None:
    """A layout that does not fit, because an entry is not a number ('banana' for a row):
    the entry's own error says so, which the shape (1×1) would not."""
    for item in [e for row in rows for e in row][:_READ_BEFORE_SHAPE]:
        if _WORD.fullmatch(item.strip()):    # only words are read first: anything else keeps the
            read_entry(item, where)          # cheap shape error (9^9^9^9 is never evaluated)


def _separator_hint(body: str, rows: list[list[str]], shape: tuple[int, int], name: str) -> str | None:
    """'0.136; 0.432; 0.432' for a row is a column (';' and new lines separate rows): say to
    separate a row's entries with commas, rather than report a 3×1 shape."""
    r, c = len(rows), len(rows[0])
    if c != 1 or r < 2 or shape[0] != 1 or shape[1] != r:
        return None
    how = "';'" if ";" in body else "new lines"
    return (f"the {r} entries are separated by {how}, which separate the rows of a matrix, but "
            f"{name} is one row of {r}: separate its entries with commas "
            f"({', '.join(row[0].strip() for row in rows[:3])}{', …' if r > 3 else ''})")


def read_figure(text: str, where: str = "figure", *,
                expect: tuple[tuple[int, int], str] | None = None) -> Written:
    """Read a written figure (a number, a row or a matrix) with each entry's precision.

    ``expect`` = (shape, name) refuses a layout that cannot be that shape before
    any entry is read (a 1,500-entry answer to a 1×3 target costs nothing)."""
    if not isinstance(text, str):
        raise ParseError(f"cannot read a {type(text).__name__} in {where}: write the figure as text")
    if len(text) > MAX_FIGURE_LENGTH:
        raise _fail(text, where, f"it is {len(text):,} characters, over the "
                    f"{MAX_FIGURE_LENGTH:,}-character cap", "shorten it")
    if "\x00" in text:
        raise _fail(text, where, "it contains a NUL byte", "remove it")
    body = _APPROX.sub("", text.translate(_NORMAL), count=1).strip()
    array = re.fullmatch(r"array\((.*?)(?:,\s*dtype=\w+)?\)", body, re.DOTALL)
    if array:
        body = array[1].strip()
    if not body:
        raise _fail(text, where, "it is empty", "write a number such as 0.136")
    if body.startswith("["):
        rows, vector = _rows_from_brackets(body, where)
    else:
        lines = [r for r in _split(body, ";\n") if r.strip()]
        rows, vector = [_row_items(r) for r in lines], len(lines) == 1
    if not rows or not rows[0]:
        raise _fail(text, where, "it has no entries", "write at least one number")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise _fail(text, where, f"row {i} has {len(row)} entries but row 0 has {width}",
                        "give every row the same number of entries")
    if len(rows) * width > MAX_ENTRIES:
        raise _fail(text, where, f"it has over {MAX_ENTRIES:,} entries", "check fewer at once")
    if width == 1 and len(rows) == 1:
        vector = body.startswith("[")
    labels = None
    if len(rows) == 1 and width > 1 and all(_LABELLED.fullmatch(e.strip()) for e in rows[0]):
        pairs = [m.groups() for e in rows[0] if (m := _LABELLED.fullmatch(e.strip())) is not None]
        labels = tuple(name for name, _ in pairs)
        rows, vector = [[value for _, value in pairs]], True
        if len(set(labels)) != len(labels):
            raise _fail(text, where, "a label is given twice", "name each column once")
    if expect is not None:
        problem = _shape_error(rows, vector, *expect)
        if problem is not None:
            _unreadable_entry(rows, where)
            raise ParseError(_separator_hint(body, rows, *expect) or problem)
    entries = tuple(tuple(read_entry(e, where) for e in row) for row in rows)
    return Written(text, entries, vector, labels)
