"""Writing exports: whole files, and never over a file symattn did not write.

``-o`` names a file (``quiz.xml``, ``quiz.zip``) or a folder (a PrairieLearn
question, self-check pages).  Every file goes through
:func:`symattn.files.write_atomically` (whole or not at all).  An existing
file is replaced only when symattn wrote it: an XML or HTML file carries a
marker comment, a zip a marker in its archive comment, and a folder lists
what symattn wrote in its manifest; anything else is refused before any file
is written.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from symattn import files
from symattn.classroom.answers import ClassroomError

__all__ = ["MARK", "ZIP_MARK", "write_file", "write_folder"]

MARK = "symattn export: a later symattn run may replace this file"
ZIP_MARK = ("symattn export: a later symattn run may replace this file").encode()
_HEAD = 4096


def marked(path: Path) -> bool:
    """Did symattn write this file (its marker is in the first 4 KiB, or in the zip comment)?"""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                return zf.comment == ZIP_MARK
        with open(path, "rb") as handle:
            return MARK.encode() in handle.read(_HEAD)
    except (OSError, zipfile.BadZipFile):
        return False


def write_file(data: str | bytes, target: str) -> None:
    """Write one export file; an existing file is replaced only if symattn wrote it."""
    path = files.resolve_output(target, ClassroomError)
    if path.exists() and path.is_file() and not marked(path):
        raise ClassroomError(f"{target} exists and symattn did not write it: give another name "
                             "or move it away (symattn never replaces a file it did not write)")
    files.write_atomically(data, target, error=ClassroomError)


def _listed(folder: Path, manifest: str) -> set[str]:
    path = folder / manifest
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return set()
    if not lines or MARK not in lines[0]:
        return set()
    return {line.strip() for line in lines[1:] if line.strip() and "/" not in line}


def write_folder(out: str, contents: dict[str, str | bytes], manifest: str) -> list[str]:
    """Write ``contents`` (file name → data) into the folder ``out``, with a manifest.

    The folder is made when missing (its parent must exist).  Files the
    manifest lists from an earlier run are replaced (or removed when no longer
    written); any other existing file of the same name is refused first.
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
    ours = _listed(folder, manifest) if folder.is_dir() else set()
    if folder.is_dir():
        manifest_path = folder / manifest
        if manifest_path.exists() and not marked(manifest_path):
            raise ClassroomError(f"{manifest_path} exists and symattn did not write it: give "
                                 "another folder")
        for name in contents:
            if (folder / name).exists() and name not in ours:
                raise ClassroomError(f"{folder / name} exists and symattn did not write it: give "
                                     "another folder or move the file away")
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise ClassroomError(f"cannot make {files.describe_os_error(exc, out)}") from None
    for name, data in contents.items():
        files.write_atomically(data, folder / name, error=ClassroomError)
    for name in sorted(ours - set(contents)):
        try:
            (folder / name).unlink()
        except OSError:
            pass
    listing = f"# {MARK}; the files it wrote here:\n" + "".join(f"{n}\n" for n in sorted(contents))
    files.write_atomically(listing, folder / manifest, error=ClassroomError)
    return sorted(contents)
