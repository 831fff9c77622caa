"""Reading .npy and .npz arrays on a budget: the header first, then exactly the data it declares.

Why not ``numpy.load``: it trusts the header.  A 192-byte file whose header
declares a 10⁶ × 10⁶ shape makes numpy allocate 7 TiB before reading a
byte (a MemoryError traceback); a float128 array is later rounded to
float64 without a word; an .npz member is decompressed before its size is
known.  Here the header is parsed first (``ast.literal_eval`` of the header
dict, never ``eval``, never a pickle), the dtype is checked by name against
the formats floatref reads exactly, and the declared shape × itemsize must
be within the caps (symattn.limits) and equal to the bytes the file (or
the .npz member) actually holds.  Only then is one array of exactly that
size allocated and filled from the file: peak memory is the array itself,
not a copy of the file beside it.

Every refusal is a :class:`FloatRefError` of one line that names the file
and says what to do.
"""

from __future__ import annotations

import ast
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any

from symattn.floatref.errors import FloatRefError
from symattn.limits import MAX_ARRAY_BYTES, MAX_ARRAY_DIMS, MAX_NPY_HEADER_BYTES, MAX_NPZ_MEMBERS

__all__ = ["read_array", "check_dtype"]

_MAGIC = b"\x93NUMPY"
#: the dtypes floatref reads by their exact values: kind -> allowed item sizes
_ACCEPTED = {"f": (2, 4, 8), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "b": (1,)}
_DESCR = re.compile(r"([<>|=]?)([a-zA-Z?])(\d*)(\[\w+\])?")
#: names of the dtypes refused, and what to do instead
_CONVERT = "convert to float32 or float64 (e.g. a.astype(numpy.float64)) and save it again"


def _size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_dtype(descr: Any, where: str) -> str:
    """The numpy type string of an accepted dtype; any other is refused by name.

    Accepted: float16/32/64, integers of 1–8 bytes and bool, either byte order.
    Refused: object (a pickle), float128/longdouble (floatref's formats are at most
    float64: it would be rounded), complex, structured/record, strings, dates, raw
    bytes, and anything unknown."""
    if isinstance(descr, list):
        raise FloatRefError(f"{where}: a structured (record) dtype; save each field as its own "
                            f"array of float32 or float64")
    if not isinstance(descr, str):
        raise FloatRefError(f"{where}: the header's dtype is not a type string; save the array "
                            f"with numpy.save")
    match = _DESCR.fullmatch(descr)
    kind, size = (match.group(2), int(match.group(3) or 0)) if match else ("", 0)
    if kind == "?":
        kind, size = "b", 1
    if kind in _ACCEPTED and size in _ACCEPTED[kind]:
        return descr
    if kind == "O":
        raise FloatRefError(f"{where}: an object array (object arrays are refused: reading one needs a "
                            f"pickle, which symattn never loads); {_CONVERT}")
    if (kind == "f" and size > 8) or kind == "g":
        raise FloatRefError(f"{where}: dtype float{8 * size or 128} (long double), wider than float64, "
                            f"which floatref would round; {_CONVERT}")
    names = {"c": "complex", "U": "a string", "S": "a byte string", "a": "a byte string",
             "M": "a datetime", "m": "a timedelta", "V": "raw bytes (void; bfloat16 saved without "
             "its type?)"}
    if kind in names:
        raise FloatRefError(f"{where}: dtype {descr!r} is {names[kind]}, not real numbers; {_CONVERT}")
    raise FloatRefError(f"{where}: unknown dtype {descr!r}; {_CONVERT}")


def _header(handle: IO[bytes], where: str) -> tuple[str, bool, tuple[int, ...], int]:
    """(dtype string, fortran_order, shape, header length) of a .npy stream, checked."""
    start = handle.read(10)
    if len(start) < 10 or not start.startswith(_MAGIC):
        raise FloatRefError(f"{where}: not a .npy array (no NumPy header); save it with numpy.save")
    major = start[6]
    if major == 1:
        length, offset = struct.unpack("<H", start[8:10])[0], 10
    elif major in (2, 3):
        more = handle.read(2)
        if len(more) < 2:
            raise FloatRefError(f"{where}: the .npy header is cut short; save it again with numpy.save")
        length, offset = struct.unpack("<I", start[8:10] + more)[0], 12
    else:
        raise FloatRefError(f"{where}: .npy format version {major}.{start[7]} is unknown; "
                            f"save it with numpy.save")
    if length > MAX_NPY_HEADER_BYTES:
        raise FloatRefError(f"{where}: the .npy header is {length:,} bytes, over the "
                            f"{MAX_NPY_HEADER_BYTES:,}-byte cap (MAX_NPY_HEADER_BYTES); save it with numpy.save")
    raw = handle.read(length)
    if len(raw) < length:
        raise FloatRefError(f"{where}: the .npy header is cut short; save it again with numpy.save")
    try:
        text = raw.decode("utf-8" if major == 3 else "latin1")
        header = ast.literal_eval(text)          # literals only: never code
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise FloatRefError(f"{where}: the .npy header is not numpy's dict of descr, fortran_order "
                            f"and shape; save it with numpy.save")
    descr = check_dtype(header["descr"], where)
    order, shape = header["fortran_order"], header["shape"]
    if not isinstance(order, bool) or not isinstance(shape, tuple) or not all(
            type(n) is int and n >= 0 for n in shape):
        raise FloatRefError(f"{where}: the .npy header's shape or order is malformed; "
                            f"save it with numpy.save")
    if len(shape) > MAX_ARRAY_DIMS:
        raise FloatRefError(f"{where}: {len(shape)} dimensions, over the cap of {MAX_ARRAY_DIMS} "
                            f"(MAX_ARRAY_DIMS); reshape it to (..., rows, columns)")
    return descr, order, shape, offset + length


def _declared_bytes(descr: str, shape: tuple[int, ...], where: str) -> int:
    """shape × itemsize, within MAX_ARRAY_BYTES (before anything is allocated)."""
    found = _DESCR.fullmatch(descr)
    assert found is not None        # descr was checked against _DESCR when the header was read
    itemsize = int(found.group(3) or 1)
    nbytes = math.prod(shape) * itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise FloatRefError(f"{where}: its header declares shape {shape} of {descr}, {_size(nbytes)}, "
                            f"over the {_size(MAX_ARRAY_BYTES)} cap on one array (MAX_ARRAY_BYTES); "
                            f"give fewer rows or heads")
    return nbytes


def _fill(handle: Any, descr: str, order: bool, shape: tuple[int, ...], nbytes: int, where: str):
    """One array of exactly ``nbytes``, read straight into its own memory (``handle``: a file or a
    zip member, anything with ``readinto``, which typeshed's IO lacks)."""
    from symattn.floatref.sdpa import _numpy

    np = _numpy()
    try:
        array = np.empty(math.prod(shape), dtype=np.dtype(descr))
    except MemoryError:
        raise FloatRefError(f"{where}: no memory for {_size(nbytes)}; give fewer rows or heads") from None
    view, done = memoryview(array).cast("B"), 0
    while done < nbytes:
        got = handle.readinto(view[done:])
        if not got:
            break
        done += got
    if done < nbytes or handle.read(1):
        raise FloatRefError(f"{where}: its header declares shape {shape} of {descr} ({nbytes:,} bytes) "
                            f"but the data is {'shorter' if done < nbytes else 'longer'}; the file is cut "
                            f"or its header is wrong: save it again with numpy.save")
    if not array.dtype.isnative:      # '>f4' from a big-endian machine: native order, in place
        array = array.byteswap(inplace=True).view(array.dtype.newbyteorder("="))
    return array.reshape(shape, order="F" if order else "C")


def _open(path: Path, what: str) -> IO[bytes]:
    """A regular file opened for reading (folders, devices, FIFOs refused before any byte)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FloatRefError(f"{path}: no such file; give the path of {what}") from None
    except OSError as exc:
        raise FloatRefError(f"{path}: cannot read the file ({exc.strerror or exc}); give the path of {what}") from None
    if stat.S_ISDIR(info.st_mode):
        raise FloatRefError(f"{path} is a folder; give the path of {what}")
    if not stat.S_ISREG(info.st_mode):
        raise FloatRefError(f"{path} is not a regular file (a device, pipe or socket); give the path of {what}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        handle = os.fdopen(fd, "rb")
    except OSError as exc:
        raise FloatRefError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise FloatRefError(f"{path} is not a regular file; give the path of {what}")
    return handle


def _zip_entries(handle: IO[bytes], where: str) -> None:
    """Refuse an archive whose central directory lists too many members, before zipfile
    parses it (a million tiny entries would cost gigabytes of ZipInfo objects)."""
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    tail_start = max(0, size - (1 << 16) - 22)
    handle.seek(tail_start)
    tail = handle.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise FloatRefError(f"{where}: not an .npz archive (no zip directory); save it with numpy.savez")
    entries, directory = struct.unpack("<HI", tail[at + 10:at + 16])
    if entries == 0xFFFF or directory == 0xFFFFFFFF or entries > MAX_NPZ_MEMBERS:
        raise FloatRefError(f"{where}: the archive lists {'over 65,535' if entries == 0xFFFF else entries} "
                            f"members, over the cap of {MAX_NPZ_MEMBERS} (MAX_NPZ_MEMBERS); "
                            f"give one array saved with numpy.save")
    handle.seek(0)


def _read_npz(handle: IO[bytes], path: Path, member: str | None):
    where = str(path)
    _zip_entries(handle, where)
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, NotImplementedError):
        raise FloatRefError(f"{where}: not an .npz archive; save it with numpy.savez") from None
    with archive:
        infos = archive.infolist()
        names = [i.filename.removesuffix(".npy") for i in infos]
        for info in infos:
            inner = f"{where}[{info.filename}]"
            if not info.filename.endswith(".npy") or info.is_dir():
                raise FloatRefError(f"{inner}: an .npz member that is not a .npy array; save the "
                                    f"arrays with numpy.savez")
            if info.flag_bits & 0x1:
                raise FloatRefError(f"{inner}: an encrypted member; save the arrays with numpy.savez")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise FloatRefError(f"{inner}: compression method {info.compress_type} is not numpy's; "
                                    f"save the arrays with numpy.savez or numpy.savez_compressed")
            # the declared size, before decompressing anything (zipfile then stops there)
            if info.file_size > MAX_ARRAY_BYTES + MAX_NPY_HEADER_BYTES + 12:
                raise FloatRefError(f"{inner}: declares {_size(info.file_size)} uncompressed, over the "
                                    f"{_size(MAX_ARRAY_BYTES)} cap on one array (MAX_ARRAY_BYTES); "
                                    f"give fewer rows or heads")
        if member is None:
            if len(infos) != 1:
                shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                raise FloatRefError(f"{where}: an .npz archive of {len(infos)} arrays ({shown or 'none'}); "
                                    f"give one array saved with numpy.save, or an .npz of one array")
            info = infos[0]
        elif member in names:
            info = infos[names.index(member)]
        else:
            raise FloatRefError(f"{where}: the archive has no array {member!r} (it has {', '.join(names)})")
        inner = f"{where}[{info.filename}]"
        try:
            with archive.open(info) as stream:   # zipfile never yields more than file_size bytes
                descr, order, shape, offset = _header(stream, inner)
                nbytes = _declared_bytes(descr, shape, inner)
                if offset + nbytes != info.file_size:
                    raise FloatRefError(f"{inner}: its header declares shape {shape} of {descr} "
                                        f"({nbytes:,} bytes) but the member holds {info.file_size - offset:,}; "
                                        f"save the arrays again with numpy.savez")
                return _fill(stream, descr, order, shape, nbytes, inner)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError):
            raise FloatRefError(f"{inner}: the archive member is damaged (a bad CRC or a cut stream); "
                                f"save the arrays again with numpy.savez") from None


def read_array(path: str | Path, *, what: str = "an array", member: str | None = None) -> Any:
    """The array in a .npy file, or one member of an .npz archive, read on a budget.

    ``what`` names the expected input in messages ("the Q array"); ``member``
    picks a named array of an .npz (default: the archive must hold exactly one).
    The header is checked before any allocation (module docstring)."""
    path = Path(path)
    handle = _open(path, what)
    with handle:
        if handle.read(4).startswith(b"PK"):
            handle.seek(0)
            return _read_npz(handle, path, member)
        handle.seek(0)
        where = str(path)
        try:
            size = os.fstat(handle.fileno()).st_size
            descr, order, shape, offset = _header(handle, where)
        except FloatRefError as exc:
            if "not a .npy array" in str(exc):
                raise FloatRefError(f"{path}: not a .npy array of numbers; save {what} with "
                                    f"numpy.save") from None
            raise
        nbytes = _declared_bytes(descr, shape, where)
        if size - offset != nbytes:
            raise FloatRefError(f"{where}: its header declares shape {shape} of {descr} ({nbytes:,} bytes) "
                                f"but the file holds {max(size - offset, 0):,} bytes of data; the file is cut "
                                f"or its header is wrong: save it again with numpy.save")
        try:
            return _fill(handle, descr, order, shape, nbytes, where)
        except OSError as exc:
            raise FloatRefError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
