"""Reading a dump's array files on a budget: .safetensors and .npz, never a pickle.

Why a reader of our own around safetensors: ``safe_open`` trusts the header, and a
kernel developer's dump is an input like any other.  The safetensors header (8 bytes
of length, then JSON) is read and checked first: its size, the number of arrays, each
array's dtype, shape and byte range against the file's real size, within the caps
below.  Only then is one array loaded, with safetensors' numpy API (``framework="np"``;
torch is never imported).  An .npz member goes through :func:`symattn.floatref.arrays.
read_array`, whose header checks come first as well.

A ``torch.save`` file (a pickle, or a zip holding ``data.pkl``) is refused by name,
with the one line that writes the same tensors as safetensors instead.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.limits import (MAX_DUMP_ARRAY_BYTES, MAX_DUMP_DIMS, MAX_DUMP_FILE_BYTES, MAX_FILE_ARRAYS,
                            MAX_SAFETENSORS_HEADER)

SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
                      "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")
TO_SAFETENSORS = ("symattn never loads pickles (they run code): save the tensors with "
                  "safetensors.torch.save_file({'q': q, 'k': k, 'v': v, 'out': out}, 'L0.H0.safetensors')")


def refuse_pickle(path: Path) -> None:
    """A torch.save / pickle file, refused by name (by its suffix or its first bytes)."""
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise FloatRefError(f"{path}: a {path.suffix} file is a torch.save pickle; {TO_SAFETENSORS}")
    try:
        with open(path, "rb") as handle:
            start = handle.read(9)
    except OSError as exc:
        raise FloatRefError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    # a .safetensors file starts with its header's length (little-endian: a header of 128 to 255
    # bytes, mod 256, starts with 0x80 as a pickle does) and then the header's JSON "{"
    safetensors = path.suffix.lower() == ".safetensors" and start[8:9] == b"{"
    if start[:1] == b"\x80" and not safetensors:
        raise FloatRefError(f"{path}: a pickle (torch.save's format); {TO_SAFETENSORS}")
    if start.startswith(b"PK"):
        with open(path, "rb") as handle:          # torch.save's zip names archive/data.pkl first
            head = handle.read(1 << 16)
        if b"data.pkl" in head:
            raise FloatRefError(f"{path}: a torch.save archive (it holds data.pkl); {TO_SAFETENSORS}")


def _regular(path: Path) -> int:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise FloatRefError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    import stat

    if not stat.S_ISREG(info.st_mode):
        raise FloatRefError(f"{path} is not a regular file; give .safetensors or .npz files")
    if info.st_size > MAX_DUMP_FILE_BYTES:
        raise FloatRefError(f"{path}: {info.st_size:,} bytes, over the cap of {MAX_DUMP_FILE_BYTES:,} "
                            "(MAX_DUMP_FILE_BYTES); split the dump into one file per layer or head")
    return info.st_size


def safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name → (dtype, shape) of a .safetensors file, every entry checked against the file."""
    size = _regular(path)
    with open(path, "rb") as handle:
        start = handle.read(8)
        if len(start) < 8:
            raise FloatRefError(f"{path}: not a .safetensors file (too short); save it with safetensors")
        (length,) = struct.unpack("<Q", start)
        if length > MAX_SAFETENSORS_HEADER or length > size - 8:
            raise FloatRefError(f"{path}: its header declares {length:,} bytes, over the cap of "
                                f"{MAX_SAFETENSORS_HEADER:,} (MAX_SAFETENSORS_HEADER) or the file's size; "
                                "save it again with safetensors")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict):
        raise FloatRefError(f"{path}: the .safetensors header is not a JSON object; save it with safetensors")
    header.pop("__metadata__", None)
    if len(header) > MAX_FILE_ARRAYS:
        raise FloatRefError(f"{path}: {len(header):,} arrays, over the cap of {MAX_FILE_ARRAYS:,} "
                            "(MAX_FILE_ARRAYS); split the file")
    data = size - 8 - length
    out = {}
    for name, entry in header.items():
        out[name] = _entry(path, name, entry, data)
    return out


def _entry(path: Path, name: str, entry: Any, data: int) -> tuple[str, tuple[int, ...]]:
    where = f"{path}[{name}]"
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise FloatRefError(f"{where}: a malformed header entry; save the file again with safetensors")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in SAFETENSORS_DTYPES:
        raise FloatRefError(f"{where}: dtype {dtype!r} is not a real float or integer format floatref reads; "
                            "convert to float32, bfloat16 or float16")
    if (not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape)
            or len(shape) > MAX_DUMP_DIMS):
        raise FloatRefError(f"{where}: shape {shape!r} is not a list of at most {MAX_DUMP_DIMS} sizes "
                            "(MAX_DUMP_DIMS); save (L, E) or (1, 1, L, E) arrays")
    nbytes = math.prod(shape) * SAFETENSORS_DTYPES[dtype]
    if nbytes > MAX_DUMP_ARRAY_BYTES:
        raise FloatRefError(f"{where}: shape {tuple(shape)} of {dtype} is {nbytes:,} bytes, over the cap of "
                            f"{MAX_DUMP_ARRAY_BYTES:,} (MAX_DUMP_ARRAY_BYTES); save one head per array")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(n) is int for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data or offsets[1] - offsets[0] != nbytes):
        raise FloatRefError(f"{where}: its byte range {offsets!r} does not match shape {tuple(shape)} of "
                            f"{dtype} within the file's {data:,} bytes of data; the file is cut or damaged")
    return dtype, tuple(shape)


def array_names(path: Path) -> set[str]:
    """The names of the arrays a .safetensors or .npz file holds (headers only)."""
    refuse_pickle(path)
    if path.suffix.lower() == ".safetensors":
        return set(safetensors_header(path))
    if path.suffix.lower() == ".npz":
        _regular(path)
        with open(path, "rb") as handle:              # the zip's directory count, before zipfile
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - (1 << 16) - 22))
            tail = handle.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            raise FloatRefError(f"{path}: not an .npz archive (no zip directory); save it with numpy.savez")
        (entries,) = struct.unpack("<H", tail[at + 10:at + 12])
        if entries > MAX_FILE_ARRAYS:
            raise FloatRefError(f"{path}: {entries:,} arrays, over the cap of {MAX_FILE_ARRAYS:,} "
                                "(MAX_FILE_ARRAYS); split the file")
        import zipfile

        try:
            with zipfile.ZipFile(path) as archive:
                return {n.removesuffix(".npy") for n in archive.namelist()}
        except (zipfile.BadZipFile, OSError, ValueError):
            raise FloatRefError(f"{path}: not an .npz archive; save it with numpy.savez") from None
    raise FloatRefError(f"{path}: a {path.suffix or 'suffix-less'} file; give .safetensors or .npz files")


def read_arrays(path: Path, names: list[str]) -> dict[str, Any]:
    """The named arrays of one .safetensors or .npz file, each checked before it is loaded."""
    refuse_pickle(path)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        header = safetensors_header(path)
        missing = [n for n in names if n not in header]
        if missing:
            raise FloatRefError(f"{path}: no array {missing[0]!r} (it has {', '.join(sorted(header)[:12])}); "
                                "name the arrays q, k, v, out (do, dq, dk, dv, lse) or describe them in "
                                "manifest.toml")
        if any(header[n][0] in ("BF16", "F8_E4M3", "F8_E5M2") for n in names):
            try:                              # numpy learns bfloat16 and fp8 from ml_dtypes
                import ml_dtypes  # noqa: F401
            except ImportError:
                raise FloatRefError(f"{path}: bfloat16 and fp8 arrays need ml_dtypes: "
                                    "pip install 'symattn[distributed]'") from None
        try:
            from safetensors import safe_open
        except ImportError:
            raise FloatRefError("reading .safetensors needs safetensors: "
                                "pip install 'symattn[distributed]'") from None
        try:
            with safe_open(os.fspath(path), framework="np") as handle:
                return {n: handle.get_tensor(n) for n in names}
        except (OSError, ValueError, TypeError, RuntimeError) as exc:   # safetensors' own errors
            raise FloatRefError(f"{path}: safetensors cannot read it ({str(exc).splitlines()[0][:200]}); "
                                "save it again with safetensors") from None
    if suffix == ".npz":
        from symattn.floatref.arrays import read_array

        _regular(path)
        return {n: read_array(path, what=f"the {n} array", member=n) for n in names}
    raise FloatRefError(f"{path}: a {suffix or 'suffix-less'} file; give .safetensors or .npz files")
