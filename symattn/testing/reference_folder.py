"""A folder of correctly rounded references as .npy files (``symattn floatref --write-reference DIR``).

Kernel test suites load expected tensors from files.  Each array is written as ``NAME.npy`` in
its format when numpy has it (float64, float32, float16); numpy has no bfloat16 or fp8, so those
are written twice, both exact:

- ``NAME.npy``: the values in the narrowest numpy float holding every value of the format
  exactly (bfloat16 → float32, float8_e4m3fn and float8_e5m2 → float16), readable by any numpy
  and by ``symattn floatref`` itself (``--dtype bfloat16``); ``torch.from_numpy(a).bfloat16()``
  gives the tensor back without a rounding;
- ``NAME.bits.npy``: the bit patterns (bfloat16 → uint16, fp8 → uint8), for bit-for-bit
  comparisons: ``a.view(ml_dtypes.bfloat16)`` or ``torch.from_numpy(a.view(numpy.int16)).view(torch.bfloat16)``.

``reference.json`` says what each file holds (format, storage, shape) and the problem's
options; ``reference.txt`` is the manifest, listing every file symattn wrote with its content
hash.  The folder is built whole beside its target and swapped in
(:func:`symattn.output.files.replace_folder`): a later run removes only the files the manifest
lists and nobody changed; any other file is kept.  A folder without the manifest that is not
empty is refused, as is a file symattn would write that someone made or changed.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.output import files

MANIFEST = "reference.txt"
DESCRIPTION = "reference.json"
_HEAD = "symattn floatref reference: the files symattn wrote here, with their content hashes\n"
#: the formats numpy lacks: (the numpy float holding their values exactly, the bits' integer type)
_WIDER = {"bfloat16": ("float32", "uint16"), "float8_e4m3fn": ("float16", "uint8"),
          "float8_e5m2": ("float16", "uint8")}

__all__ = ["DESCRIPTION", "MANIFEST", "reference_files", "write_reference_folder"]


def _read_manifest(folder: Path) -> dict[str, str | None] | None:
    return files.read_headed_listing(folder, MANIFEST, _HEAD)


def _owned(folder: Path) -> set[str]:
    return files.owned_by_listing(folder, MANIFEST, _HEAD)


def _npy(a: Any) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(a), allow_pickle=False)
    return buffer.getvalue()


def _bits(values: Any, fmt: str) -> Any:
    """The bit patterns of values exactly in ``fmt`` (bfloat16 by the top half of float32's)."""
    import numpy as np

    if fmt == "bfloat16":
        return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if fmt == "float8_e5m2":
        return (np.asarray(values, dtype=np.float16).view(np.uint16) >> 8).astype(np.uint8)
    try:
        import ml_dtypes
    except ImportError:
        raise FloatRefError("writing float8_e4m3fn bit patterns needs ml_dtypes: pip install "
                            "'symattn[fp8]'") from None
    return np.asarray(values, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def reference_files(arrays: dict[str, tuple[Any, str | None]], about: dict[str, Any]) -> dict[str, bytes]:
    """name → file bytes: ``arrays`` maps a stem to (array, its format or None for bool/int
    arrays); ``about`` goes into reference.json beside each file's description."""
    import numpy as np

    out: dict[str, bytes] = {}
    described: dict[str, Any] = {}
    for stem, (a, fmt) in arrays.items():
        a = np.asarray(a)
        if fmt is None:
            out[f"{stem}.npy"] = _npy(a)
            described[f"{stem}.npy"] = {"format": str(a.dtype), "storage": str(a.dtype), "shape": list(a.shape)}
            continue
        wide, bits = _WIDER.get(fmt, (fmt, None))
        values = a.astype(wide)
        if not np.array_equal(values.astype(np.float64), a.astype(np.float64), equal_nan=True):
            raise FloatRefError(f"{stem}: the values are not all {fmt} values (an internal error: report it)")
        out[f"{stem}.npy"] = _npy(values)
        described[f"{stem}.npy"] = {"format": fmt, "storage": f"{wide} values" + (", exactly" if bits else ""),
                                    "shape": list(a.shape)}
        if bits:
            out[f"{stem}.bits.npy"] = _npy(_bits(values, fmt))
            described[f"{stem}.bits.npy"] = {"format": fmt, "storage": f"{bits} bit patterns", "shape": list(a.shape)}
    out[DESCRIPTION] = (json.dumps({**about, "files": described}, indent=2) + "\n").encode("utf-8")
    return out


def write_reference_folder(target: str | os.PathLike, contents: dict[str, bytes], flag: str = "--write-reference") -> None:
    """Write ``contents`` (name → bytes) as the folder ``target``, whole (module docstring)."""
    shown = os.fspath(target)
    if shown == "":
        raise FloatRefError(f'{flag} "": the folder name is empty; give a folder such as {flag} ref/')
    path = Path(shown)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_dir():
        raise FloatRefError(f"{flag} {shown} is a file, not a folder: give a new folder name (or REF.npz)")
    if not path.parent.is_dir():
        raise FloatRefError(f"{flag} {shown}: the folder {path.parent} does not exist")
    try:
        if path.is_dir():
            files.recover_folder(path, _owned)
        entries = {e.name for e in path.iterdir()} if path.is_dir() else set()
    except OSError as exc:
        raise FloatRefError(f"{flag} {shown}: {files.describe_os_error(exc)}") from None
    if entries and _read_manifest(path) is None:
        raise FloatRefError(f"{flag} {shown} is a folder symattn did not write (no {MANIFEST} in it) and it "
                            "is not empty: give a new folder name")
    ours = _owned(path) if entries else set()
    clash = sorted(n for n in contents if n in entries and n not in ours)
    if clash:
        raise FloatRefError(f"{flag} {shown}: {clash[0]} was made or changed by someone else since symattn "
                            "wrote the folder: move it away or give a new folder name (symattn never replaces it)")

    def build(staging: Path) -> None:
        for name, data in contents.items():
            (staging / name).write_bytes(data)
        (staging / MANIFEST).write_text(_HEAD + files.listing_lines(staging, list(contents)), encoding="utf-8")

    files.replace_folder(path, build, _owned, FloatRefError, f"{shown} ({flag})")
