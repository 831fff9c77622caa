"""Reading input files the one way symattn reads them.

Floats keep their decimal text (:class:`symattn.exact.coerce.DecimalText`, so 0.1
is 1/10), and every failure (missing file, not a regular file, too large,
not UTF-8, not TOML) is a one-line error of the caller's kind that names the
file and the fix.

Why a byte cap and regular files only: ``problem = "/dev/zero"`` once read
14 GB before anything failed; a FIFO blocks forever.  :func:`read_text` is
the shared reader (TOML here, CSV submissions in :mod:`symattn.check.grading.grade`).
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from symattn.errors import ProblemError, SymattnError
from symattn.exact.coerce import DecimalText
from symattn.limits import MAX_FILE_BYTES

__all__ = ["load_toml", "parse_toml", "read_text"]

_BOM = "\ufeff"


def parse_toml(text: str, *, source: str,
               error: type[SymattnError] = ProblemError) -> dict[str, Any]:
    """The table of a TOML text, floats as their decimal text (a leading UTF-8 BOM is fine)."""
    try:
        return tomllib.loads(text.removeprefix(_BOM), parse_float=DecimalText)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source} is not valid TOML: {exc}") from None
    except ValueError:   # an integer over Python's 4,300-digit conversion limit
        raise error(f"{source}: an integer has too many digits (over 4,300); "
                    "write it as a string expression such as \"10^50\"") from None
    except RecursionError:
        raise error(f"{source}: arrays or tables nest too deeply; flatten them") from None


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:.1f} MiB" if count >= 1024 * 1024 else f"{count:,} bytes"


def read_bytes(path: str | Path, *, what: str, error: type[SymattnError] = ProblemError,
               limit: int = MAX_FILE_BYTES) -> bytes:
    """At most ``limit`` bytes of a regular file.

    ``what`` says which file was expected ("a problem TOML file"); ``error``
    is the caller's error class.  Devices (/dev/zero), FIFOs, sockets and
    folders are refused before any byte is read."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"{path}: no such file; give the path of {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the file ({exc.strerror or exc}); "
                    f"give the path of {what}") from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{path} is a folder; give the path of {what}")
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path} is not a regular file (a device, pipe or socket); "
                    f"give the path of {what}")
    cap = " (MAX_FILE_BYTES)" if limit == MAX_FILE_BYTES else ""
    too_big = error(f"{path} is over {_size(limit)}{cap}, the most symattn reads for "
                    f"{what}; split or shrink it")
    if info.st_size > limit:
        raise too_big
    try:
        # O_NONBLOCK: should the path become a FIFO after the check, open does not hang
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error(f"{path} is not a regular file; give the path of {what}")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if len(data) > limit:   # it grew after the size check
        raise too_big
    return data


def read_text(path: str | Path, *, what: str, error: type[SymattnError] = ProblemError,
              limit: int = MAX_FILE_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading BOM is dropped)."""
    data = read_bytes(path, what=what, error=error, limit=limit)
    try:
        return data.decode("utf-8").removeprefix(_BOM)
    except UnicodeDecodeError:
        raise error(f"{Path(path)}: not UTF-8 text; save {what} as UTF-8") from None


def load_toml(path: str | Path, *, what: str,
              error: type[SymattnError] = ProblemError) -> dict[str, Any]:
    """:func:`read_text` then :func:`parse_toml`."""
    return parse_toml(read_text(path, what=what, error=error), source=str(path), error=error)
