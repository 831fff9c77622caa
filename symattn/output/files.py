"""Writing files whole or not at all.

A command that fails half-way must leave nothing half-written: every file
symattn writes goes to a temporary file beside its target, is flushed to
disk, and is renamed into place only when complete.

What a user expects from ``-o FILE`` is what the shell's ``> FILE`` does,
so the result looks like it:

- a new file gets the mode ``open()`` would give it (``0666 & ~umask``),
  not the private 0600 of a temporary file; a file that is replaced keeps
  its own mode, as it would when overwritten in place;
- ``-o LINK`` where LINK is a symbolic link writes the file the link points
  to and leaves the link alone (a dangling link creates its target);
- ``-o /dev/stdout`` (a device or a pipe) is written in place, not replaced;
- ``-o ""``, ``-o`` naming a folder, a folder that does not exist or cannot
  be written, and a full disk are each one line, and nothing is left behind.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from symattn.errors import SymattnError

#: Temporary files are named ``.NAME.symattn-XXXXXXXX.tmp`` beside their target.
TMP_INFIX = ".symattn-"


def current_umask() -> int:
    """The process umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: the classic read-and-restore
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permission bits ``open(path, "w")`` gives a new file."""
    return 0o666 & ~current_umask()


def resolve_output(target: str | os.PathLike, error: type[SymattnError] = SymattnError) -> Path:
    """The path to write for ``-o target``: checked, with symbolic links followed.

    Raises ``error`` with one line when the target cannot be a file.
    """
    text = os.fspath(target)
    if text == "":
        raise error("-o \"\": the output file name is empty; give a file name such as -o out.txt")
    path = Path(text)
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # write through the link, as '>' does
    if path.is_dir():
        raise error(f"cannot write {text}: it is a folder; give a file name (e.g. {text.rstrip('/')}/out.txt)")
    if text.endswith(os.sep):
        raise error(f"cannot write {text}: a file name cannot end with '{os.sep}'")
    directory = path.parent
    if not directory.is_dir():
        raise error(f"cannot write {text}: the folder {directory} does not exist")
    return path


def describe_os_error(exc: OSError, target: str | os.PathLike | None = None) -> str:
    """One line for an OSError: what could not be done to which file, and why."""
    name = os.fspath(target) if target is not None else (exc.filename or "")
    reason = exc.strerror or str(exc)
    hint = {errno.ENOSPC: "free some space or write elsewhere",
            errno.EDQUOT: "free some space or write elsewhere",
            errno.EACCES: "write to a folder you may write to",
            errno.EPERM: "write to a folder you may write to",
            errno.EROFS: "write to a writable disk"}.get(exc.errno or 0)
    text = f"{name}: {reason}" if name else reason
    return f"{text} ({hint})" if hint else text


def write_atomically(data: str | bytes, target: str | os.PathLike, *,
                     error: type[SymattnError] = SymattnError) -> None:
    """Write text (UTF-8) or bytes to ``target``: a whole file or nothing.

    Every failure (bad path, no permission, full disk) raises ``error`` with
    one line; the temporary file is removed.
    """
    path = resolve_output(target, error)
    name = os.fspath(target)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        existing = os.stat(path)
    except OSError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_device(payload, path, name, error)  # /dev/null, /dev/stdout, a pipe: never replaced
        return
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}{TMP_INFIX}", suffix=".tmp")
    except OSError as exc:
        raise error(f"cannot write {describe_os_error(exc, name)}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            view = memoryview(payload)
            while view:  # os.write may write less than asked
                view = view[handle.write(view):]
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise error(f"cannot write {describe_os_error(exc, name)}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_device(payload: bytes, path: Path, name: str, error: type[SymattnError]) -> None:
    """Write into a device or pipe (``-o /dev/stdout``) in place: renaming over it would
    replace the device itself."""
    try:
        with open(path, "wb") as handle:
            handle.write(payload)
    except OSError as exc:
        raise error(f"cannot write {describe_os_error(exc, name)}") from None


# -- folders ---------------------------------------------------------------------------
#
# Every folder symattn writes (a worksheet, self-check pages, a PrairieLearn
# question) is built whole in a staging folder beside its target,
# ``.NAME.symattn-new-PID-XXXXXXXX`` (it holds a marker file while it is being
# built), and swapped into place.  On Linux the swap is one atomic
# renameat2(RENAME_EXCHANGE): at every instant the target holds either the old
# folder or the new one.  Elsewhere it is two renames through
# ``.NAME.symattn-old-PID-XXXXXXXX``; a run killed between them is repaired by
# the next run (:func:`recover_folder` puts the old folder back).
#
# After the swap the old folder is drained: a file is removed only when the
# old folder's manifest lists its name *and* its content hash (symattn wrote it
# and nobody changed it since); every other entry (a file the user saved, even
# one saved while the run was building, a file they edited, a subfolder) is
# moved into the new folder, under its own name or, when symattn now writes
# that name, as ``NAME.kept`` (``NAME.kept-2`` ...).  A folder a killed run
# left is drained the same way by the next run, so no user file is lost.
# Both staging names carry the process id: a folder left by a process that no
# longer exists is known to be stale.

_STAGED = re.compile(r"^\.(?P<name>.+)\.symattn-(?P<kind>new|old)-(?P<pid>\d+)-[A-Za-z0-9_]+$")
#: Tests set this to False to exercise the two-rename swap.
USE_EXCHANGE = True
#: The marker file of a staging folder that is still being built (removed once swapped in).
STAGING_MARK = ".symattn-staging"
_STAGING_TEXT = b"symattn: a folder being built; it is removed when the folder is swapped in\n"
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")

#: Which files of a folder symattn may remove: given the folder, the names of the files its
#: manifest lists with their current content hash (and the manifest itself).
Owned = Callable[[Path], "set[str]"]


def content_hash(data: bytes | str) -> str:
    """``sha256:HEX`` of a file's bytes (text as UTF-8), as manifests record it."""
    return "sha256:" + hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def file_hash(path: Path) -> str | None:
    """The content hash of a regular file (not a link); None for anything else."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return "sha256:" + digest.hexdigest()
    except OSError:
        return None


def listing_lines(folder: Path, names: Iterable[str]) -> str:
    """A manifest's file lines, ``NAME sha256:HEX``, for files already written in ``folder``."""
    out = []
    for name in sorted(names):
        digest = file_hash(folder / name)
        out.append(f"{name} {digest}\n" if digest else f"{name}\n")
    return "".join(out)


def read_listing(lines: Iterable[str]) -> dict[str, str | None]:
    """Name → recorded hash of a manifest's file lines (None: an older line without one).
    Names with a path separator or starting with a dot are never listed."""
    found: dict[str, str | None] = {}
    for line in lines:
        parts = line.split()
        if not parts or "/" in parts[0] or "\\" in parts[0] or parts[0].startswith("."):
            continue
        digest = parts[1] if len(parts) == 2 and _HASH.match(parts[1]) else None
        found[parts[0]] = digest
    return found


def unchanged(folder: Path, listed: dict[str, str | None]) -> set[str]:
    """The listed files whose content still has the recorded hash (those symattn may remove)."""
    return {name for name, digest in listed.items()
            if digest is not None and file_hash(folder / name) == digest}


def read_headed_listing(folder: Path, manifest: str, head: str) -> dict[str, str | None] | None:
    """The listing of ``folder/manifest`` when its first line is ``head`` (symattn wrote the
    folder); None when the file is missing, a symlink, unreadable or someone else's."""
    path = folder / manifest
    try:
        if path.is_symlink() or not path.is_file():
            return None
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[0] + "\n" != head:
        return None
    return read_listing(lines[1:])


def owned_by_listing(folder: Path, manifest: str, head: str) -> set[str]:
    """The files of an old folder symattn may remove: listed under ``head``, unchanged since."""
    listed = read_headed_listing(folder, manifest, head)
    return set() if listed is None else unchanged(folder, listed) | {manifest}


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a folder named after it may be in use)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    return True


def new_folder_mode() -> int:
    """The permission bits ``mkdir`` gives a new folder."""
    return 0o777 & ~current_umask()


def staging_folder(target: Path) -> Path:
    """A new folder beside ``target`` to build its replacement in (holding only the marker)."""
    folder = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.symattn-new-{os.getpid()}-"))
    try:
        (folder / STAGING_MARK).write_bytes(_STAGING_TEXT)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _is_marker(path: Path) -> bool:
    try:
        return not path.is_symlink() and path.is_file() and path.read_bytes() == _STAGING_TEXT
    except OSError:
        return False


def _kept_name(target: Path, name: str) -> Path:
    for k in range(1, 10_000):
        candidate = target / (f"{name}.kept" if k == 1 else f"{name}.kept-{k}")
        if not os.path.lexists(candidate):
            return candidate
    raise OSError(errno.EEXIST, "no free name to keep a file under", os.fspath(target / name))


def drain(old: Path, target: Path, owned: Owned | None) -> None:
    """Empty the old folder ``old`` after a swap: remove the files ``owned`` says symattn wrote
    unchanged, move everything else into ``target`` (as ``NAME.kept`` when the name is taken)."""
    removable = owned(old) if owned is not None else set()
    for entry in sorted(old.iterdir()):
        if entry.name == STAGING_MARK and _is_marker(entry):
            entry.unlink()
        elif entry.name in removable and not entry.is_symlink() and entry.is_file():
            entry.unlink()
        else:
            dest = target / entry.name
            os.rename(entry, _kept_name(target, entry.name) if os.path.lexists(dest) else dest)
    os.rmdir(old)


def recover_folder(target: Path, owned: Owned | None = None) -> None:
    """Repair what a killed run left beside ``target``.

    An unfinished build (its marker is there) is removed; an old folder moved
    aside by an interrupted two-rename swap goes back to ``target`` when
    nothing took its place; any other stale staging folder holds an old folder
    that was swapped out and is drained into ``target`` (:func:`drain`).
    Folders of a live process are left alone.
    """
    try:
        entries = sorted(target.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = _STAGED.match(entry.name)
        if not match or match["name"] != target.name or not entry.is_dir() or entry.is_symlink():
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and pid_alive(pid):
            continue
        try:
            if _is_marker(entry / STAGING_MARK):
                shutil.rmtree(entry, ignore_errors=True)
            elif not os.path.lexists(target):
                os.rename(entry, target)
            elif target.is_dir() and not target.is_symlink():
                drain(entry, target, owned)
        except OSError:
            continue              # left for a later run; nothing is removed that is not ours
    if _is_marker(target / STAGING_MARK):
        (target / STAGING_MARK).unlink(missing_ok=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not USE_EXCHANGE or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def swap_in(new: Path, target: Path, owned: Owned | None = None) -> None:
    """Put the folder ``new`` at ``target``; the old folder is drained (:func:`drain`): only
    the files ``owned`` names are removed, everything else is kept in the new folder."""
    if not os.path.lexists(target):
        os.rename(new, target)
        old = None
    elif _exchange(new, target):
        old = new                             # ``new`` now holds the old folder
    else:
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.symattn-old-{os.getpid()}-"))
        os.rmdir(old)
        os.rename(target, old)
        os.rename(new, target)
    (target / STAGING_MARK).unlink(missing_ok=True)
    if old is not None:
        drain(old, target, owned)


def replace_folder(target: Path, build: Callable[[Path], None], owned: Owned | None,
                   error: type[SymattnError] = SymattnError, shown: str | None = None) -> None:
    """Write a whole folder: ``build(staging)`` fills a staging folder beside ``target``, which
    is then swapped in (:func:`swap_in`).  An error or a kill before the swap leaves
    ``target`` as it was; after it, the new folder with every file of the user's."""
    shown = shown or os.fspath(target)
    try:
        recover_folder(target, owned)
        building = staging_folder(target)
    except OSError as exc:
        raise error(f"-o {shown}: {describe_os_error(exc)}") from None
    swapped = False
    try:
        build(building)
        mode = (os.stat(target).st_mode & 0o7777) if target.is_dir() else new_folder_mode()
        os.chmod(building, mode)
        if not os.path.lexists(target):
            os.rename(building, target)
            swapped = True
            (target / STAGING_MARK).unlink(missing_ok=True)
            return
        swapped = True       # from here ``building`` may hold the old folder: never removed whole
        swap_in(building, target, owned)
    except OSError as exc:  # a full disk, a permission: one line, nothing left behind
        if not swapped:
            shutil.rmtree(building, ignore_errors=True)
        raise error(f"-o {shown}: {describe_os_error(exc)}") from None
    except BaseException:
        if not swapped:
            shutil.rmtree(building, ignore_errors=True)
        raise
