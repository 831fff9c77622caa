"""A dump folder as shards: one (layer, head) each, found by file name or by manifest.toml.

Default layout: ``L{layer}.H{head}.npz`` or ``.safetensors``, each holding the arrays
``q``, ``k``, ``v`` and the kernel's ``out`` (optionally ``do``, ``dq``, ``dk``, ``dv``,
``lse``).  Any other layout is described by a small ``manifest.toml``::

    dtype = "bfloat16"            # the kernel's format (--dtype overrides)
    causal = "top-left"           # or "bottom-right", or false
    scale = 0.125                 # default 1/sqrt(E)
    layers = 2
    heads = 8
    kv_heads = 2                  # GQA: query head h reads kv head h // (heads / kv_heads)
    mask = "mask.npz:mask"        # a boolean (L, S) mask, True = attend (instead of causal)
    [arrays]                      # FILE:ARRAY, with {layer}, {head} and {kv_head} filled in
    q = "L{layer}.safetensors:q.{head}"
    k = "L{layer}.safetensors:k.{kv_head}"
    v = "L{layer}.safetensors:v.{kv_head}"
    out = "L{layer}.safetensors:out.{head}"

Why shards are plain data: a shard travels to a Dask worker as its file names and
options (workers read the shared path themselves), never as arrays of exact numbers.
Every problem with the manifest is one line naming the key; a file that cannot be a
shard (a pickle, say) becomes a bad shard reported beside the others.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.floatrun.files import PICKLE_SUFFIXES, TO_SAFETENSORS
from symattn.limits import MAX_DUMP_ENTRIES, MAX_MANIFEST_BYTES, MAX_SHARDS

MANIFEST = "manifest.toml"
ROLES = ("q", "k", "v", "out", "do", "dq", "dk", "dv", "lse")
REQUIRED = ("q", "k", "v", "out")
_NAME = re.compile(r"^L(\d{1,6})\.H(\d{1,6})\.(npz|safetensors)$")
_PICKLED = re.compile(r"^L(\d{1,6})\.H(\d{1,6})(\.[A-Za-z]+)$")
_FIELD = re.compile(r"\{([^{}]*)\}")
_KEYS = {"dtype", "causal", "scale", "layers", "heads", "kv_heads", "mask", "arrays"}
FORMATS = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class Source:
    """Where one array of a shard is: a file under the dump and the array's name in it."""

    role: str
    file: str
    array: str
    required: bool


@dataclass(frozen=True)
class Shard:
    """One unit of work: a (layer, head), its arrays' sources and the options they are read with."""

    layer: int
    head: int
    root: str
    sources: tuple[Source, ...]
    settings: tuple[tuple[str, Any], ...] = ()     # manifest defaults: dtype, causal, scale, mask
    block: int = 0                                 # this shard's rows: block ``block`` of ``blocks``
    blocks: int = 1

    @property
    def head_name(self) -> str:
        return f"L{self.layer}.H{self.head}"

    @property
    def name(self) -> str:
        return self.head_name + (f".b{self.block}of{self.blocks}" if self.blocks > 1 else "")

    def row_range(self, L: int) -> tuple[int, int]:
        """The rows of an L-row head this shard checks (equal blocks, the last ones one shorter)."""
        return self.block * L // self.blocks, (self.block + 1) * L // self.blocks

    def files(self) -> list[str]:
        return sorted({s.file for s in self.sources} | ({m[0]} if (m := dict(self.settings).get("mask")) else set()))


@dataclass(frozen=True)
class BadShard:
    """A file or shard refused while planning (the rest go on)."""

    name: str
    file: str
    error: str


@dataclass
class Plan:
    shards: list[Shard] = field(default_factory=list)
    bad: list[BadShard] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


def plan(root: str | os.PathLike) -> Plan:
    """The shards of a dump folder (default layout, or its manifest.toml)."""
    folder = Path(root)
    if not folder.is_dir():
        raise FloatRefError(f"{root}: not a folder; give the folder of L{{layer}}.H{{head}}.safetensors files")
    if (folder / MANIFEST).is_file():
        return _from_manifest(folder)
    names = []
    with os.scandir(folder) as entries:
        for k, entry in enumerate(entries):
            if k >= MAX_DUMP_ENTRIES:
                raise FloatRefError(f"{root}: over {MAX_DUMP_ENTRIES:,} entries (MAX_DUMP_ENTRIES); "
                                    "split the dump into folders")
            names.append(entry.name)
    out = Plan()
    for name in sorted(names):
        if (m := _NAME.match(name)):
            sources = tuple(Source(r, name, r, r in REQUIRED) for r in ROLES)
            out.shards.append(Shard(int(m[1]), int(m[2]), str(folder.resolve()), sources))
        elif (m := _PICKLED.match(name)) and m[3].lower() in PICKLE_SUFFIXES:
            out.bad.append(BadShard(f"L{int(m[1])}.H{int(m[2])}", name,
                                    f"{name}: a {m[3]} file is a torch.save pickle; {TO_SAFETENSORS}"))
    if not out.shards and not out.bad:
        raise FloatRefError(f"{root}: no L{{layer}}.H{{head}}.safetensors or .npz files and no {MANIFEST}; "
                            "name one file per head L0.H0.safetensors (arrays q, k, v, out) or write a manifest")
    _refuse_twins(out)
    cap_shards(out, root)
    out.shards.sort(key=lambda s: (s.layer, s.head))
    return out


def _refuse_twins(out: Plan) -> None:
    """A head with two files (L0.H1.npz and L0.H1.safetensors, or a pickle beside one) is a bad
    shard: which of them the kernel wrote is not for symattn to guess."""
    files: dict[str, list[str]] = {}
    for s in out.shards:
        files.setdefault(s.head_name, []).append(s.sources[0].file)
    for b in out.bad:
        files.setdefault(b.name, []).append(b.file)
    twins = {name: sorted(names) for name, names in files.items() if len(names) > 1}
    if not twins:
        return
    out.shards[:] = [s for s in out.shards if s.head_name not in twins]
    out.bad[:] = [b for b in out.bad if b.name not in twins]
    for name, names in sorted(twins.items()):
        out.bad.append(BadShard(name, names[0], f"{name}: {' and '.join(names)} are both in the dump; "
                                                f"keep one file per head"))


def cap_shards(out: Plan, root: str | os.PathLike, blocks: int = 1) -> None:
    """Refuse a run of more than MAX_SHARDS shards (heads × --blocks) before anything is made."""
    if len(out.shards) * blocks > MAX_SHARDS:
        count = f"{len(out.shards):,} heads × {blocks:,} blocks" if blocks > 1 else f"{len(out.shards):,} shards"
        raise FloatRefError(f"{root}: {count}, over the cap of {MAX_SHARDS:,} shards (MAX_SHARDS); "
                            "check part of the model at a time")


def _fail(path: Path, message: str) -> FloatRefError:
    return FloatRefError(f"{path}: {message}")


def _read_manifest(path: Path) -> dict[str, Any]:
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise _fail(path, f"over {MAX_MANIFEST_BYTES:,} bytes (MAX_MANIFEST_BYTES); a manifest is a few lines")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _fail(path, f"not valid TOML ({str(exc).splitlines()[0]})") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _fail(path, f"unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_KEYS))}")
    return data


def _count(path: Path, data: dict, key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if type(value) is not int or not 1 <= value <= MAX_SHARDS:
        raise _fail(path, f"{key} = {value!r}: give a whole number from 1 to {MAX_SHARDS:,}")
    return value


def manifest_settings(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """dtype, causal, scale and mask of a manifest, checked (one line per problem)."""
    out: dict[str, Any] = {}
    if "dtype" in data:
        if data["dtype"] not in FORMATS:
            raise _fail(path, f"dtype = {data['dtype']!r}: use one of {', '.join(FORMATS)}")
        out["dtype"] = data["dtype"]
    if "causal" in data:
        causal = data["causal"]
        if causal is True:
            causal = "top-left"
        if causal is not False and causal not in ("top-left", "bottom-right"):
            raise _fail(path, f"causal = {causal!r}: use true, false, \"top-left\" or \"bottom-right\"")
        out["causal"] = None if causal is False else causal
    if "scale" in data:
        scale = data["scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (scale == scale) \
                or abs(scale) == float("inf"):
            raise _fail(path, f"scale = {scale!r}: give a finite number")
        out["scale"] = float(scale)
    if "mask" in data:
        out["mask"] = _location(path, "mask", data["mask"], {})
    return out


def _location(path: Path, role: str, text: Any, fields: dict[str, int]) -> tuple[str, str]:
    """(file, array) of a FILE:ARRAY template, fields filled in, kept inside the dump."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise _fail(path, f"{role} = {text!r}: give \"FILE:ARRAY\", e.g. \"L{{layer}}.safetensors:{role}.{{head}}\"")

    def fill(m: re.Match) -> str:
        if m[1] not in fields:
            raise _fail(path, f"{role} = {text!r}: {{{m[1]}}} is not a field; use {{layer}}, {{head}} or {{kv_head}}")
        return str(fields[m[1]])

    file, array = (_FIELD.sub(fill, part) for part in text.split(":"))
    parts = Path(file).parts
    if not file or Path(file).is_absolute() or ".." in parts or not array:
        raise _fail(path, f"{role} = {text!r}: the file must be a path inside the dump folder")
    return file, array


def _from_manifest(folder: Path) -> Plan:
    path = folder / MANIFEST
    data = _read_manifest(path)
    settings = manifest_settings(path, data)
    arrays = data.get("arrays")
    if not isinstance(arrays, dict):
        raise _fail(path, "no [arrays] table; give q, k, v and out as \"FILE:ARRAY\" templates")
    unknown = sorted(set(arrays) - set(ROLES))
    if unknown:
        raise _fail(path, f"arrays.{unknown[0]} is not an array floatref-run reads; use {', '.join(ROLES)}")
    missing = [r for r in REQUIRED if r not in arrays]
    if missing:
        raise _fail(path, f"arrays.{missing[0]} is missing; q, k, v and out are required")
    layers, heads = _count(path, data, "layers"), _count(path, data, "heads")
    kv = _count(path, data, "kv_heads", heads)
    if heads % kv:
        raise _fail(path, f"kv_heads = {kv} does not divide heads = {heads}")
    if layers * heads > MAX_SHARDS:
        raise _fail(path, f"{layers} layers × {heads} heads is over the cap of {MAX_SHARDS:,} shards (MAX_SHARDS)")
    out = Plan(settings=settings)
    setting_items = tuple(sorted(settings.items()))
    for layer in range(layers):
        for head in range(heads):
            fields = {"layer": layer, "head": head, "kv_head": head // (heads // kv)}
            sources = tuple(Source(role, *_location(path, f"arrays.{role}", arrays[role], fields), True)
                            for role in ROLES if role in arrays)
            out.shards.append(Shard(layer, head, str(folder.resolve()), sources, setting_items))
    return out
