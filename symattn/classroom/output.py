"""Writing exports: whole files, and never over a file symattn did not write.

``-o`` names a file (``quiz.xml``, ``quiz.zip``) or a folder (a PrairieLearn
question, self-check pages).  Every file goes through
:func:`symattn.output.files.write_atomically` (whole or not at all).  An existing
file is replaced only when symattn wrote it: an XML or HTML file carries a
marker comment, a zip a marker in its archive comment, and a folder lists
what symattn wrote in its manifest; anything else is refused before any file
is written.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

from symattn.output import files
from symattn.classroom.answers import ClassroomError

__all__ = ["MADE_FROM", "MARK", "ZIP_MARK", "made_from", "write_file", "write_folder"]

MARK = "symattn export: a later symattn run may replace this file"
ZIP_MARK = ("symattn export: a later symattn run may replace this file").encode()
#: What an export was made from (its source and number of versions), after this prefix
MADE_FROM = "made from: "
_HEAD = 4096


def _head(path: Path) -> bytes | None:
    """The marker's place: a zip's archive comment, or any other file's first 4 KiB."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                return zf.comment
        with open(path, "rb") as handle:
            return handle.read(_HEAD)
    except (OSError, zipfile.BadZipFile):
        return None


def marked(path: Path) -> bool:
    """Did symattn write this file (its marker is in the first 4 KiB, or in the zip comment)?"""
    head = _head(path)
    if head is None:
        return False
    if zipfile.is_zipfile(path):
        return head == ZIP_MARK or head.startswith(ZIP_MARK + b"\n")
    return MARK.encode() in head


def made_from(path: Path) -> str | None:
    """What an export file symattn wrote was made from (None: not recorded)."""
    head = b"\n".join((_head(path) or b"").split(b"\n")[:3])   # a comment before any user text
    found = re.search(re.escape(MADE_FROM.encode()) + rb"([^\n]*?)(?: -->|\n|$)", head)
    return found[1].decode("utf-8", "replace").strip() if found else None


def write_file(data: str | bytes, target: str, identity: str | None = None,
               force: bool = False) -> None:
    """Write one export file; an existing file is replaced only if symattn wrote it, and (with
    ``identity``) only if it was made from the same source and size, or with ``force``."""
    path = files.resolve_output(target, ClassroomError)
    if path.exists() and path.is_file() and not marked(path):
        raise ClassroomError(f"{target} exists and symattn did not write it: give another name "
                             "or move it away (symattn never replaces a file it did not write)")
    before = made_from(path) if path.exists() and path.is_file() else None
    if identity is not None and before is not None and before != identity and not force:
        raise ClassroomError(f"{target} holds an export made from {before}, not {identity}: give "
                             "another name, or --force to replace it")
    files.write_atomically(data, target, error=ClassroomError)


def _manifest_lines(folder: Path, manifest: str) -> list[str] | None:
    """The lines of the folder's manifest when symattn wrote it (its first line is marked)."""
    path = folder / manifest
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return None
    return lines if lines and MARK in lines[0] else None


def _listed(folder: Path, manifest: str) -> dict[str, str | None]:
    lines = _manifest_lines(folder, manifest)
    return {} if lines is None else files.read_listing(
        line for line in lines[1:] if not line.startswith("#"))


def _identity(folder: Path, manifest: str) -> str | None:
    for line in _manifest_lines(folder, manifest) or []:
        if line.startswith(_IDENTITY):
            return line[len(_IDENTITY):].strip()
    return None


def _owner(manifest: str) -> files.Owned:
    def owned(folder: Path) -> set[str]:
        mine = {manifest} if _manifest_lines(folder, manifest) is not None else set()
        return files.unchanged(folder, _listed(folder, manifest)) | mine
    return owned


_IDENTITY = "# " + MADE_FROM


def write_folder(out: str, contents: Mapping[str, str | bytes], manifest: str,
                 identity: str | None = None, force: bool = False) -> list[str]:
    """Write ``contents`` (file name → data) as the folder ``out``, with a manifest.

    The folder is built beside ``out`` and swapped in whole
    (:func:`symattn.output.files.replace_folder`): a kill leaves the old folder or the
    new one, never a mix.  The manifest records each file's content hash; of
    the old folder only the files it lists unchanged are removed, everything
    else (the user's files, files they edited) is kept.  A file of the same
    name that symattn did not write, or that was changed, is refused first.
    ``identity`` (what the output was made from, and its size) is recorded; an
    existing folder made from something else is replaced only with ``force``.
    """
    if out == "":
        raise ClassroomError('-o "": the folder name is empty; give a folder such as -o export')
    folder = Path(out)
    if folder.is_symlink():
        folder = Path(os.path.realpath(folder))
    if folder.exists() and not folder.is_dir():
        raise ClassroomError(f"-o {out} is a file, not a folder: give a folder name")
    if not folder.parent.is_dir():
        raise ClassroomError(f"-o {out}: the folder {folder.parent} does not exist")
    owned = _owner(manifest)
    files.recover_folder(folder, owned)         # a killed run's folders first: nothing is lost
    if folder.is_dir():
        manifest_path = folder / manifest
        if manifest_path.exists() and _manifest_lines(folder, manifest) is None:
            raise ClassroomError(f"{manifest_path} exists and symattn did not write it: give "
                                 "another folder")
        before = _identity(folder, manifest)
        if identity is not None and before is not None and before != identity and not force:
            raise ClassroomError(f"-o {out} holds an export made from {before}, not {identity}: "
                                 "give another folder, or --force to replace it")
        ours, listed = owned(folder), _listed(folder, manifest)
        for name in contents:
            if (folder / name).exists() and name not in ours:
                why = ("was changed since symattn wrote it (or an older symattn listed it without "
                       "its content hash)") if name in listed else "exists and symattn did not write it"
                raise ClassroomError(f"{folder / name} {why}: give another folder or move the "
                                     "file away")

    def build(building: Path) -> None:
        for name, data in contents.items():
            (building / name).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        head = f"# {MARK}; the files it wrote here:\n"
        if identity is not None:
            head += f"{_IDENTITY}{identity}\n"
        (building / manifest).write_text(head + files.listing_lines(building, contents),
                                         encoding="utf-8")

    files.replace_folder(folder, build, owned, ClassroomError, out)
    return sorted(contents)
