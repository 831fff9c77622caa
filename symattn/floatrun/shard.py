"""One shard's check, as a worker runs it: read its arrays, judge each against floatref.

The result is plain JSON data (numbers and certified decimals as text), so it travels
back from a Dask worker as a small dict and is written whole as the shard's file.  The
forward output goes through :func:`symattn.floatref.ulp_report` (every error from an
enclosure of the exact value, the worst certified); the gradients through
:func:`symattn.floatref.backward.correctly_rounded_backward` (each error measured from the
correctly rounded gradient, so within ½ ulp of the exact error, the worst certified
from the exact trace); the LSE against the correctly rounded LSE.

python-flint is not thread-safe: a worker pins flint's own threads to 1 before any work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from symattn.errors import SymattnError
from symattn.floatref.errors import FloatRefError
from symattn.floatrun.dump import Shard
from symattn.floatrun.files import array_names, read_arrays
from symattn.limits import MAX_WORST

#: worst entries kept per tensor
WORST = 5


@dataclass(frozen=True)
class Options:
    """How every shard is judged (the command line's flags; a manifest fills what is None)."""

    dtype: str | None = None           # default: the manifest's, else the out array's format
    causal: str | None = None          # "top-left", "bottom-right" or None (manifest: "none" to force off)
    scale: float | None = None
    worst: int = WORST
    rows: str = "all"                  # "all" or "sample:N+risky"
    seed: int = 0
    backward: bool = True
    blocks: int | str = 1              # split each head's rows into this many shards (forward only),
                                       # or "auto": per head, from its shape (floatrun.blocks)

    def __post_init__(self) -> None:
        if type(self.worst) is not int or not 0 <= self.worst <= MAX_WORST:
            raise FloatRefError(f"worst = {self.worst!r}: give a whole number from 0 to {MAX_WORST:,} (MAX_WORST)")
        if self.blocks != "auto" and (type(self.blocks) is not int or self.blocks < 1):
            raise FloatRefError(f"blocks = {self.blocks!r}: give a whole number of at least 1, or \"auto\"")

    def key(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "causal": self.causal, "scale": self.scale, "worst": self.worst,
                "rows": self.rows, "seed": self.seed, "backward": self.backward, "blocks": self.blocks}


def pin_flint_threads() -> None:
    """python-flint is not thread-safe and may start threads of its own: one, here."""
    import flint

    flint.ctx.threads = 1


def check_shard(shard: Shard, options: Options, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shard's result: {"shard", "status": "ok" | "bad", "tensors": {...}} (never raises on
    bad data: the error is the result, so the other shards go on).  ``inputs``: the arrays
    :func:`load_inputs` read (the client read them: the worker need not see the dump)."""
    pin_flint_threads()
    start = time.perf_counter()
    outcome = guarded(shard, lambda: _judge(shard, options, inputs or load_inputs(shard)))
    outcome["seconds"] = time.perf_counter() - start
    return outcome


def guarded(shard: Shard, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()``'s result marked ok, or the bad-input error it raised as the shard's result."""
    base = {"shard": shard.name, "layer": shard.layer, "head": shard.head}
    try:
        result = work()
    except SymattnError as exc:
        return {**base, "status": "bad", "error": str(exc)}
    except MemoryError:
        return {**base, "status": "bad", "error": f"{shard.name}: out of memory; check fewer rows "
                "(--rows sample:256+risky)"}
    return {**base, "status": "ok", **result}


def _two_d(array: Any, role: str, where: str) -> Any:
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    want = 1 if role == "lse" else 2
    while role == "lse" and array.ndim > 1 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != want:
        raise FloatRefError(f"{where}: {role} has shape {tuple(array.shape)}; give one head, "
                            f"{'(L,)' if role == 'lse' else '(L, E)'} or with leading 1s")
    return array


def load(shard: Shard) -> dict[str, Any]:
    """The shard's arrays by role (optional ones only when present), each one head."""
    root = Path(shard.root)
    by_file: dict[str, list[tuple[str, str]]] = {}
    for s in shard.sources:
        by_file.setdefault(s.file, []).append((s.role, s.array))
    arrays: dict[str, Any] = {}
    for file, wanted in by_file.items():
        path = root / file
        optional = [s for s in shard.sources if s.file == file and not s.required]
        present = array_names(path) if optional else None
        names = [(r, a) for r, a in wanted
                 if present is None or a in present or any(s.role == r and s.required for s in shard.sources)]
        got = read_arrays(path, [a for _, a in names])
        for role, array in names:
            arrays[role] = _two_d(got[array], role, f"{path}[{array}]")
    formats = {}
    for role, a in arrays.items():       # bfloat16 and fp8 (ml_dtypes) widened to float32: exact
        formats[role] = str(a.dtype)
        if formats[role] in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            import numpy as np

            arrays[role] = a.astype(np.float32)
    arrays["formats"] = formats
    return arrays


def load_inputs(shard: Shard) -> dict[str, Any]:
    """Everything a shard reads from the dump, as numpy arrays: its arrays by role (and
    ``formats``) and the manifest's mask (or None).  The readers check every header first."""
    arrays = load(shard)
    mask = None
    if (where := dict(shard.settings).get("mask")):
        file, array = where
        mask = _two_d(read_arrays(Path(shard.root) / file, [array])[array], "mask", f"{file}[{array}]")
    return {"arrays": arrays, "mask": mask}


def _settings(shard: Shard, options: Options, arrays: dict[str, Any], mask: Any) -> dict[str, Any]:
    from symattn import floatref

    manifest = dict(shard.settings)
    dtype = options.dtype or manifest.get("dtype") or arrays["formats"]["out"]
    if dtype not in floatref.FORMATS:
        raise FloatRefError(f"{shard.name}: out is {dtype}; give --dtype, or float32, bfloat16, float16 "
                            "or float64 arrays")
    causal = options.causal if options.causal is not None else manifest.get("causal")
    if causal == "none":
        causal = None
    scale = options.scale if options.scale is not None else manifest.get("scale")
    if mask is not None and causal is not None:
        raise FloatRefError(f"{shard.name}: the manifest gives a mask and causal; give one of them")
    return {"dtype": dtype, "causal": causal, "scale": scale, "mask": mask,
            "lse_format": arrays["formats"].get("lse")}


def _judge(shard: Shard, options: Options, inputs: dict[str, Any]) -> dict[str, Any]:
    from symattn.floatrun import judge, patterns, sampling

    arrays = inputs["arrays"]
    s = _settings(shard, options, arrays, inputs["mask"])
    q, k = arrays["q"], arrays["k"]
    found = patterns.scan(q, k, s)
    rows: tuple[list[int], dict[str, list[int]]] | None
    if shard.blocks > 1:
        a, b = shard.row_range(int(q.shape[0]))
        if a == b:                          # more blocks than rows: this one has none
            return {"dtype": s["dtype"], "causal": s["causal"], "tensors": {},
                    "rows": {"rule": f"block {shard.block} of {shard.blocks}", "count": 0, "of": int(q.shape[0])}}
        rows = (list(range(a, b)), {})
    else:
        rows = sampling.choose_rows(options.rows, options.seed, q, k, s, found)
    tensors = {"out": judge.forward(arrays, s, rows, options.worst)}
    if "lse" in arrays:
        tensors["lse"] = judge.lse(arrays, s, rows, options.worst)
    grads: list[str] = [g for g in ("dq", "dk", "dv") if g in arrays]
    if options.backward and grads and "do" in arrays and rows is None:
        tensors.update(judge.backward(arrays, s, grads, options.worst))
    classes = patterns.classify(q, k, s, found)
    for t in tensors.values():                  # which hard-case pattern each worst entry's row matches
        mine = classes[t["rows_over"]["axis"]]
        for w in t["worst"]:
            w["pattern"] = [reason for reason, at in mine.items() if at[w["index"][0]]]
    return {"dtype": s["dtype"], "causal": s["causal"], "patterns": patterns.described(classes, q.shape[0], k.shape[0]),
            "rows": None if rows is None else {"rule": options.rows if shard.blocks == 1 else
                                               f"block {shard.block} of {shard.blocks}", "seed": options.seed,
                                               "count": len(rows[0]), "of": int(q.shape[0]),
                                               "risky": rows[1]},
            "tensors": tensors}
