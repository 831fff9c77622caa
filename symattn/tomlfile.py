"""Reading TOML files the one way symattn reads them.

Floats keep their decimal text (:class:`symattn.exact.DecimalText`, so 0.1
is 1/10), and every failure (missing file, not UTF-8, not TOML) is a one-line
error of the caller's kind that names the file and the fix.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from symattn.errors import ProblemError, SymattnError
from symattn.exact import DecimalText


def parse_toml(text: str, *, source: str,
               error: type[SymattnError] = ProblemError) -> dict[str, Any]:
    """The table of a TOML text, floats as their decimal text."""
    try:
        return tomllib.loads(text, parse_float=DecimalText)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source} is not valid TOML: {exc}") from None


def read_text(path: str | Path, *, what: str,
              error: type[SymattnError] = ProblemError) -> str:
    """A file's UTF-8 text; ``what`` says which file was expected ("a problem TOML file")."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file; give the path of {what}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text; save {what} as UTF-8") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the file ({exc})") from None


def load_toml(path: str | Path, *, what: str,
              error: type[SymattnError] = ProblemError) -> dict[str, Any]:
    """:func:`read_text` then :func:`parse_toml`."""
    return parse_toml(read_text(path, what=what, error=error), source=str(path), error=error)
