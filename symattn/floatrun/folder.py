"""The report folder: shards/ filled as shards finish, then the whole folder swapped in.

``report/`` is symattn's when it holds ``floatref-run.txt`` (the manifest: every file
symattn wrote there with its content hash).  A folder without it that is not empty is
refused: symattn never writes into a folder it did not make.  While the run goes, each
finished shard's result is written whole into ``report/shards/`` (the resume cache).  At
the end summary.json and index.html are built in a staging folder beside it, shards/ is
moved in, and the folder is swapped whole (``output.files.replace_folder``): the old
files symattn wrote are removed only when unchanged, any other file is kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from symattn.floatref.errors import FloatRefError
from symattn.output import files

MANIFEST = "floatref-run.txt"
SHARDS = "shards"
_HEAD = "symattn floatref-run report: the files symattn wrote here, with their content hashes\n"


def read_manifest(folder: Path) -> dict[str, str | None] | None:
    """The report's listing when symattn wrote ``folder``, else None."""
    return files.read_headed_listing(folder, MANIFEST, _HEAD)


def owned(folder: Path) -> set[str]:
    """The files of an old report symattn may remove: listed, and unchanged since."""
    return files.owned_by_listing(folder, MANIFEST, _HEAD)


def _harvest(target: Path) -> None:
    """Shard results in a staging folder a killed run left (its swap never came): back into
    target/shards/, before recover_folder removes the staging folder."""
    for entry in target.parent.glob(f".{target.name}{files.TMP_INFIX}new-*"):
        try:
            pid = int(entry.name.split("-new-")[1].split("-")[0])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid() or files.pid_alive(pid) or not (entry / SHARDS).is_dir():
            continue
        (target / SHARDS).mkdir(parents=True, exist_ok=True)
        for shard in (entry / SHARDS).glob("*.json"):
            if not (target / SHARDS / shard.name).exists():
                os.replace(shard, target / SHARDS / shard.name)


def prepare(out: str | os.PathLike) -> Path:
    """Check ``-o`` (refusing a folder symattn did not write), make it if new; the shard cache."""
    target = Path(out)
    shown = os.fspath(out)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise FloatRefError(f"-o {shown}: not a folder; give a folder name for the report (e.g. -o report/)")
    if not target.parent.is_dir():
        raise FloatRefError(f"-o {shown}: the folder {target.parent} does not exist")
    try:
        if target.is_dir():
            _harvest(target)
            files.recover_folder(target, owned)
            if any(target.iterdir()) and read_manifest(target) is None:
                raise FloatRefError(f"-o {shown} is a folder symattn did not write (no {MANIFEST} in it) and "
                                    "it is not empty: give a new folder name")
        else:
            target.mkdir()
        if read_manifest(target) is None:
            files.write_atomically(_HEAD, target / MANIFEST, error=FloatRefError)
        (target / SHARDS).mkdir(exist_ok=True)
    except OSError as exc:
        raise FloatRefError(f"-o {shown}: {files.describe_os_error(exc)}") from None
    return target / SHARDS


def finish(out: str | os.PathLike, texts: dict[str, str]) -> None:
    """Build the report (``texts``: name → content) beside ``out`` with its shards, swap it in."""
    target = Path(out)

    def build(staging: Path) -> None:
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        (staging / MANIFEST).write_text(_HEAD + files.listing_lines(staging, list(texts)), encoding="utf-8")
        if (target / SHARDS).is_dir():
            os.rename(target / SHARDS, staging / SHARDS)     # last: a kill before it leaves them in place

    files.replace_folder(target, build, owned, FloatRefError, os.fspath(out))

