"""Writing files whole or not at all.

A command that fails half-way must leave nothing half-written: every file
symattn writes goes to a temporary file beside its target and is renamed
into place only when complete.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from symattn.errors import SymattnError


def write_atomically(data: str | bytes, target: str | Path, *,
                     error: type[SymattnError] = SymattnError) -> None:
    """Write text (UTF-8) or bytes to ``target``: a whole file or nothing."""
    target = Path(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise error(f"cannot write {target}: the folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if isinstance(data, str):
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
