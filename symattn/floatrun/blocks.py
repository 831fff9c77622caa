"""``--blocks auto``: how many row blocks each head is split into, from its shape and a cost model.

Why a model and not a measurement: the block count must be known before any shard runs
(it names the shards and keys their cached results), and it must come out the same on a
rerun, so it is a pure function of what the files' headers say (L, S, E, Ev, the format,
whether the backward is checked), ``--worst`` and the number of workers.  The model is one
row block's CPU seconds on one core of the machine it was calibrated on
(``benchmarks/bench_floatrun_blocks.py``; the fit is in docs/benchmarks.md)::

    seconds = FIXED + f · (CERT · K · S · (E + Ev) + SCAN · L · S · E) + f · ROW · rows · S · (E + Ev)

``K`` is ``--worst``: each block certifies its own K worst entries, each reading its row's S
keys; ``SCAN`` is the float64 pass over the whole head's scores every block makes (the row
patterns); ``ROW`` the screening of each of the block's entries against every key (masked
keys cost the same: a causal head's blocks measured no cheaper); ``f`` the format's factor.
A head is split into the fewest equal row blocks whose largest is estimated within
TARGET_SECONDS; when what every block pays whatever its rows is over half of that, blocks
are made only until the rows' part is no more than it.  A head estimated under
MIN_SPLIT_SECONDS, or shorter than 2 · MIN_ROWS rows, stays one shard.  When the dump has
fewer shards than workers, the costliest heads are split further until every worker has
one.  A head whose backward is checked (``do`` and a gradient in the dump) stays one shard:
dK and dV sum over every row, and a row block checks the forward and LSE only.
"""

from __future__ import annotations

import ast
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.floatrun.dump import Shard
from symattn.floatrun.files import safetensors_header
from symattn.limits import MAX_NPY_HEADER_BYTES

#: a block's seconds to aim under (the issue's "shards sized so each takes seconds")
TARGET_SECONDS = 3.0
#: a head estimated under this stays one shard (splitting it saves less than Dask costs per shard)
MIN_SPLIT_SECONDS = 1.0
#: fewest rows in a block
MIN_ROWS = 64
#: the fitted constants (CPU seconds; docs/benchmarks.md): per shard; per certified worst
#: entry, key and value column; per score of the whole head; per entry of the block and key
FIXED = 0.0046
CERT = 1.24e-6
SCAN = 1.56e-10
ROW = 1.19e-9
#: the formats' factors on all but FIXED (measured at (1024, 1024, 64 and 128), causal, against
#: float32); a format not measured takes float32's
FORMAT = {"float32": 1.0, "bfloat16": 0.8, "float16": 0.8}
_SAFETENSORS_FORMATS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                        "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
_NPY_FORMATS = {"<f8": "float64", "<f4": "float32", "<f2": "float16"}


@dataclass(frozen=True)
class HeadShape:
    """What the cost of a head's check depends on, read from its files' headers."""

    L: int
    S: int
    E: int
    Ev: int
    format: str
    backward: bool

    def rows(self, block: int = 0, blocks: int = 1) -> int:
        """The rows of block ``block`` of ``blocks`` (as ``Shard.row_range`` splits them)."""
        return (block + 1) * self.L // blocks - block * self.L // blocks


def estimate(shape: HeadShape, block: int = 0, blocks: int = 1, worst: int = 5) -> float:
    """One block's CPU seconds on one core of the calibration machine (the module's model)."""
    return FIXED + _per_shard(shape, worst) + _rows_part(shape, block, blocks)


def _factor(shape: HeadShape) -> float:
    return FORMAT.get(shape.format, 1.0)


def _per_shard(shape: HeadShape, worst: int) -> float:
    """What every block of the head pays whatever its rows: the certified worst entries (each
    reads its row's S keys) and the float64 pass over the whole head's scores."""
    return _factor(shape) * (CERT * worst * shape.S * (shape.E + shape.Ev) + SCAN * shape.L * shape.S * shape.E)


def _rows_part(shape: HeadShape, block: int, blocks: int) -> float:
    return _factor(shape) * ROW * shape.rows(block, blocks) * shape.S * (shape.E + shape.Ev)


def largest(shape: HeadShape, blocks: int, worst: int = 5) -> float:
    """The estimate of the head's costliest block (the one with the most rows) of ``blocks``."""
    return max(estimate(shape, b, blocks, worst) for b in {0, blocks - 1})


def _dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    return shape


def _npz_headers(path: Path, names: set[str]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """(format, shape) of the named members of an .npz, from their .npy headers only."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if name not in names:
                continue
            with archive.open(info) as stream:
                start = stream.read(12)
                major = start[6]
                length, at = (struct.unpack("<H", start[8:10])[0], 10) if major == 1 else \
                    (struct.unpack("<I", start[8:12])[0], 12)
                if not start.startswith(b"\x93NUMPY") or length > MAX_NPY_HEADER_BYTES:
                    raise ValueError(name)
                raw = start[at:] + stream.read(length - (12 - at))
                header = ast.literal_eval(raw.decode("latin1"))          # literals only: never code
                out[name] = (_NPY_FORMATS.get(header["descr"], str(header["descr"])), tuple(header["shape"]))
    return out


def _headers(path: Path, names: set[str]) -> dict[str, tuple[str, tuple[int, ...]]]:
    if path.suffix.lower() == ".safetensors":
        return {n: (_SAFETENSORS_FORMATS.get(d, d), s) for n, (d, s) in safetensors_header(path).items()
                if n in names}
    return _npz_headers(path, names)


def head_shape(shard: Shard, options: Any) -> HeadShape | None:
    """The head's shape from its files' headers (nothing loaded); None when they cannot be read
    (the shard then runs whole and reports the problem)."""
    found: dict[str, tuple[str, tuple[int, ...]]] = {}
    try:
        for file in {s.file for s in shard.sources}:
            wanted = {s.array for s in shard.sources if s.file == file}
            got = _headers(Path(shard.root) / file, wanted)
            found.update({s.role: got[s.array] for s in shard.sources if s.file == file and s.array in got})
        q, k, v = (_dims(found[r][1]) for r in ("q", "k", "v"))
        settings = dict(shard.settings)
        fmt = options.dtype or settings.get("dtype") or found["out"][0]
        backward = bool(options.backward and "do" in found and {"dq", "dk", "dv"} & set(found))
        return HeadShape(int(q[0]), int(k[0]), int(q[-1]), int(v[-1]), fmt, backward)
    except (FloatRefError, OSError, KeyError, IndexError, ValueError, SyntaxError, TypeError,
            zipfile.BadZipFile, UnicodeDecodeError, struct.error):
        return None


def _fewest(shape: HeadShape, most: int, worst: int) -> int:
    """The fewest equal row blocks whose largest is within TARGET_SECONDS, or, when what every
    block pays already takes half of that, whose rows cost no more than it (more blocks would
    then mostly repeat it); at most ``most``."""
    fixed = FIXED + _per_shard(shape, worst)
    for blocks in range(1, most + 1):
        rows = largest(shape, blocks, worst) - fixed
        if fixed + rows <= TARGET_SECONDS or (2 * fixed > TARGET_SECONDS and rows <= fixed):
            return blocks
    return most


def splittable(shape: HeadShape | None, worst: int = 5) -> int:
    """The most blocks a head may have under auto (1: it stays whole)."""
    if shape is None or shape.backward or shape.L < 2 * MIN_ROWS or estimate(shape, worst=worst) < MIN_SPLIT_SECONDS:
        return 1
    return shape.L // MIN_ROWS


def choose(shapes: dict[str, HeadShape | None], workers: int = 1, worst: int = 5) -> dict[str, int]:
    """Each head's block count (by head name): the cost model's, then more for the costliest
    heads until there are at least ``workers`` shards (when the heads allow)."""
    most = {name: splittable(shape, worst) for name, shape in shapes.items()}
    blocks = {name: _fewest(shape, most[name], worst) if shape is not None and most[name] > 1 else 1
              for name, shape in shapes.items()}

    def cost(name: str) -> float:
        shape = shapes[name]
        assert shape is not None
        return largest(shape, blocks[name], worst)

    while sum(blocks.values()) < workers:
        room = [name for name in shapes if blocks[name] < most[name]]
        if not room:
            break
        blocks[max(room, key=cost)] += 1
    return blocks


def worker_count(client: Any) -> int:
    """How many shards a Dask client's cluster runs at once (its workers' threads)."""
    workers = client.scheduler_info().get("workers") or {}
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))


def local_workers(workers: int | None) -> int:
    return workers or os.cpu_count() or 1
