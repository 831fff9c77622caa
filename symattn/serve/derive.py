"""What a request becomes: a problem read the CLI's way, and its derivation as HTML.

The page posts the problem as JSON holding the plain values a TOML file holds (numbers,
strings, lists, tables).  JSON floats keep their decimal text, as TOML's do, so 0.1 is
1/10; every entry then goes through :meth:`Problem.from_dict`, the CLI's parser and caps
(never eval).  The derivation is the ``<main>`` of the page ``symattn explain --format
html`` prints, so the page and the CLI show the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from symattn.errors import ProblemError, SymattnError
from symattn.exact.coerce import DecimalText
from symattn.problem.keys.table import KEYS
from symattn.problem.problem import PROBLEM_KEYS

__all__ = ["MATRIX_KEYS", "VARIANT_KEYS", "check_fragment", "derive_fragment", "field_of", "page_view",
           "parse_problem_json", "problem_data", "toml_of", "variant_keys"]

#: the inputs the page edits as grids (the other keys ride along unchanged)
MATRIX_KEYS = ("X", "X_kv", "W_q", "W_k", "W_v", "Q", "K", "V")

#: the keys the page edits with controls of their own (tokens, scale, the mask); every other
#: key of the table (``kind == "key"``) is a variant, offered with its table's doc as help
EDITED_KEYS = ("tokens", "key_tokens", "scale", "mask")
VARIANT_KEYS = tuple(k.name for k in KEYS if k.kind == "key" and k.name not in EDITED_KEYS)

_SOURCE = "problem"


def variant_keys() -> list[dict[str, str]]:
    """The variant keys as the page offers them, in the table's order: name and help line."""
    return [{"name": k.name, "doc": k.doc} for k in KEYS if k.name in VARIANT_KEYS]


def _no_constant(name: str) -> Any:
    raise ProblemError(f"{_SOURCE}: {name} is not a number; give a finite number")


def parse_problem_json(body: bytes) -> dict[str, Any]:
    """The problem table of a request body (JSON), floats as their decimal text."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(f"{_SOURCE}: the request is not UTF-8 text") from None
    try:
        data = json.loads(text, parse_float=DecimalText, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ProblemError(f"{_SOURCE} is not valid JSON: {exc}") from None
    except ProblemError:             # NaN or Infinity, refused by _no_constant
        raise
    except ValueError:   # an integer over Python's 4,300-digit conversion limit
        raise ProblemError(f"{_SOURCE}: an integer has too many digits (over 4,300); "
                           "write it as a string expression such as \"10^50\"") from None
    except RecursionError:
        raise ProblemError(f"{_SOURCE}: arrays or tables nest too deeply; flatten them") from None
    if not isinstance(data, dict):
        raise ProblemError(f"{_SOURCE} must be a table of problem keys")
    return data


def problem_data(toml_text: str, source: str) -> dict[str, Any]:
    """A problem file's table as the page holds it: JSON-ready, decimals as their text."""
    from symattn.problem.tomlfile import parse_toml

    return parse_toml(toml_text, source=source)


def toml_of(data: dict[str, Any]) -> str:
    """The problem file of a table the page holds; it reads back as the same table.

    Only the problem keys and plain values (integers, strings, lists, tables) are written;
    the values are not worked here: the page downloads the problem it last derived."""
    from symattn.classroom.worksheets.versions import problem_toml

    unknown = [k for k in data if k not in PROBLEM_KEYS]
    if unknown:
        raise ProblemError(f"{_SOURCE}: unknown key {unknown[0]!r}; the keys are {', '.join(PROBLEM_KEYS)}")
    try:
        text = problem_toml(data, comment="a problem from symattn serve: symattn explain problem.toml")
    except TypeError as exc:                   # null, or a float (JSON floats are read as text)
        raise ProblemError(f"{_SOURCE}: {exc}: use numbers, strings and lists") from None
    except RecursionError:
        raise ProblemError(f"{_SOURCE}: arrays or tables nest too deeply; flatten them") from None
    try:
        same = parse_toml_text(text) == data
    except ProblemError:            # a key or string TOML cannot hold as it is written
        same = False
    if not same:
        raise ProblemError(f"{_SOURCE}: a value would not read back from TOML as it is; "
                           "use numbers, strings and lists")
    return text


def parse_toml_text(text: str) -> dict[str, Any]:
    """A TOML text as the page holds it (decimals as their text)."""
    from symattn.problem.tomlfile import parse_toml

    return parse_toml(text, source=_SOURCE)


def derive_fragment(data: dict[str, Any], digits: int = 3, places: int | None = None,
                    rows: tuple[int, ...] | None = None) -> str:
    """The derivation of a problem table as an HTML fragment (a ``SymattnError`` if invalid),
    rounded to ``digits`` significant digits or ``places`` decimal places, with ``rows`` (query
    indices) worked by hand as ``explain --rows`` does (None: the first and the last)."""
    from symattn.document.build.trace import build_document
    from symattn.document.printers.html import print_html
    from symattn.document.trace_latex import LatexOptions
    from symattn.numbers.certify import Rounding
    from symattn.problem.problem import Problem
    from symattn.trace.trace import IndexError_, Trace

    trace = Trace(Problem.from_dict(data, source=_SOURCE))
    rounding = Rounding(places=places) if places is not None else Rounding(digits=digits)
    try:
        doc = build_document(trace, LatexOptions(rounding=rounding, rows=rows).document_options())
    except IndexError_ as exc:
        raise ProblemError(f"row {', '.join(map(str, rows or ()))}: {exc}; choose another row") from None
    return main_of(print_html(doc))


MAX_PAGE_PLACES = 30        # the page's decimal places (the CLI's --places takes more)
MAX_ROW_TEXT = 5            # a worked row's index has at most this many digits
MAX_ROWS = 64               # worked rows in one request (each adds its sums and its softmax)


def page_view(params: Mapping[str, str]) -> dict[str, Any]:
    """How the page asks the derivation shown (``/derive?places=N&row=I,J``): the decimal
    places instead of the digits, and the query rows worked by hand (0-based indices, as
    explain's ``--rows``).  The downloads take the same view."""
    view: dict[str, Any] = {}
    places, row = params.get("places"), params.get("row")
    if places is not None:
        if "digits" in params:
            raise ProblemError("give digits or places, not both (as explain's --digits and --places)")
        if re.fullmatch("[0-9]{1,3}", places) is None or int(places) > MAX_PAGE_PLACES:
            raise ProblemError(f"places must be a whole number from 0 to {MAX_PAGE_PLACES}, got "
                               f"{places[:20]!r}: use the CLI's --places for more")
        view["places"] = int(places)
    if row is not None:
        one = f"[0-9]{{1,{MAX_ROW_TEXT}}}"
        if row.count(",") >= MAX_ROWS:
            raise ProblemError(f"row lists {row.count(',') + 1} rows, over the page's {MAX_ROWS}: use "
                               "explain's --rows for more")
        if re.fullmatch(f"{one}(,{one})*", row) is None:
            raise ProblemError(f"row must be a query's 0-based index such as 0 or 2, or several such as "
                               f"0,2 (as explain's --rows), got {row[:20]!r}")
        rows = tuple(int(r) for r in row.split(","))
        view["rows"] = rows
    return view


MAX_FIGURES = 50            # figures checked in one request from the page


def check_fragment(data: dict[str, Any], figures: object) -> str:
    """The verdicts on written figures (``[{"target": ..., "text": ...}]``), as ``symattn
    check --format html`` shows them, for the problem the page holds."""
    from symattn.check.figfile import FigureSpec, FiguresFile
    from symattn.document.build.check import build_check_document
    from symattn.document.printers.html import print_html
    from symattn.problem.problem import Problem

    if not isinstance(figures, list) or not 1 <= len(figures) <= MAX_FIGURES:
        raise ProblemError(f"figures must be a list of 1 to {MAX_FIGURES} tables with target and text")
    specs = [FigureSpec(k, f.get("target"), f.get("text")) if isinstance(f, dict)
             else FigureSpec(k, None, None) for k, f in enumerate(figures)]
    problem = Problem.from_dict(data, source=_SOURCE)
    verdicts = FiguresFile("page", {None: problem}, specs).check()
    return main_of(print_html(build_check_document(verdicts)))


def main_of(page: str) -> str:
    """The ``<main>`` of a page the HTML printer made."""
    start, end = page.index("<main>\n") + len("<main>\n"), page.rindex("</main>")
    return page[start:end]


_KEYS = "|".join(sorted(PROBLEM_KEYS, key=len, reverse=True))
_FIELD_AT = (re.compile(rf"\bin ({_KEYS})\b"), re.compile(rf"^({_KEYS})\b"), re.compile(rf"\b({_KEYS})\b"))


def field_of(message: str) -> str | None:
    """The problem key an error message is about (None: it names none).

    "... in W_q[0][2]: ..." first, then a key the message starts with, then the first key
    it names outside the list of keys an unknown key's message gives."""
    text = message.removeprefix(f"{_SOURCE}: ").split("; the keys are")[0]
    for pattern in _FIELD_AT:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


def one_line(exc: SymattnError) -> str:
    """The CLI's one-line message, as ``symattn`` prints it after ``symattn: error:``."""
    return " ".join(str(exc).split())
