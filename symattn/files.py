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
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

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
# A folder symattn writes (a worksheet) is built in a staging folder beside its
# target, ``.NAME.symattn-new-PID-XXXXXXXX``, and swapped into place.  On Linux
# the swap is one atomic renameat2(RENAME_EXCHANGE): at every instant the
# target holds either the old folder or the new one.  Elsewhere it is two
# renames through ``.NAME.symattn-old-PID-XXXXXXXX``; a run killed between
# them is repaired by the next run (:func:`recover_folder` puts the old
# folder back).  Both names carry the process id, so a folder left by a
# process that no longer exists is known to be stale and removed.

_STAGED = re.compile(r"^\.(?P<name>.+)\.symattn-(?P<kind>new|old)-(?P<pid>\d+)-[A-Za-z0-9_]+$")
#: Tests set this to False to exercise the two-rename swap.
USE_EXCHANGE = True


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
    """A new empty folder beside ``target`` to build its replacement in."""
    folder = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.symattn-new-{os.getpid()}-"))
    return folder


def recover_folder(target: Path) -> None:
    """Repair what a killed run left beside ``target``.

    An old folder moved aside by an interrupted two-rename swap goes back to
    ``target`` when nothing took its place; every other stale staging folder
    of ``target`` (its process is gone) is removed.  Folders of a live
    process are left alone.
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
        if match["kind"] == "old" and not os.path.lexists(target):
            os.rename(entry, target)
        else:
            shutil.rmtree(entry, ignore_errors=True)


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


def swap_in(new: Path, target: Path) -> None:
    """Put the folder ``new`` at ``target``; what was at ``target`` is removed."""
    if not os.path.lexists(target):
        os.rename(new, target)
        return
    if _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # ``new`` now holds the old folder
        return
    aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.symattn-old-{os.getpid()}-"))
    os.rmdir(aside)
    os.rename(target, aside)
    os.rename(new, target)
    shutil.rmtree(aside, ignore_errors=True)
