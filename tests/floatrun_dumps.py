"""Dumps for the floatref-run tests, and an independent reference written for them (mpmath).

The kernel that is right computes SDPA in float64 and rounds once to float32 (every entry
within ½ ulp of the exact value, plus float64's own error, far below 0.01 ulp); the wrong
one is the same with one head's row 3 scaled by 1 + 2⁻¹⁵ (about 256 ulp of float32).
"""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np

PERTURBED = (1, 2)          # (layer, head) of the wrong kernel's bad rows
BAD_ROW = 3


def sdpa64(q, k, v, causal: bool):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def make_dump(folder: Path, *, layers: int = 2, heads: int = 4, L: int = 6, E: int = 3, wrong: bool = False,
              causal: bool = True, seed: int = 0, backward: bool = False) -> dict:
    """L{l}.H{h} files (even heads .npz, odd heads .safetensors); the arrays by shard name."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    made = {}
    for layer in range(layers):
        for head in range(heads):
            q, k, v = (rng.standard_normal((L, E)).astype(np.float32) for _ in range(3))
            out = sdpa64(q, k, v, causal).astype(np.float32)
            if wrong and (layer, head) == PERTURBED:
                out[BAD_ROW] = (out[BAD_ROW].astype(np.float64) * (1 + 2.0 ** -15)).astype(np.float32)
            arrays = {"q": q, "k": k, "v": v, "out": out}
            if backward:
                do = rng.standard_normal((L, E)).astype(np.float32)
                grads = grads64(q, k, v, do, causal)
                arrays.update(do=do, **{g: x.astype(np.float32) for g, x in grads.items()})
            name = f"L{layer}.H{head}"
            if head % 2:
                save_file(arrays, str(folder / f"{name}.safetensors"))
            else:
                np.savez(folder / f"{name}.npz", **arrays)
            made[name] = arrays
    return made


def grads64(q, k, v, do, causal: bool) -> dict:
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    scale = 1 / np.sqrt(q.shape[1])
    s = q @ k.T * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dp = do @ v.T
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
    return {"dq": ds @ k * scale, "dk": ds.T @ q * scale, "dv": p.T @ do}


def exact_output(q, k, v, causal: bool, dps: int = 60) -> list[list[mpmath.mpf]]:
    """softmax(Q·Kᵀ/√E)·V at dps digits (mpmath), from the floats' exact binary values."""
    with mpmath.workdps(dps):
        E = q.shape[1]
        out = []
        for i in range(q.shape[0]):
            keys = range(i + 1) if causal else range(k.shape[0])
            t = [mpmath.fsum(mpmath.mpf(float(q[i, c])) * mpmath.mpf(float(k[j, c])) for c in range(E))
                 / mpmath.sqrt(E) for j in keys]
            m = max(t)
            w = [mpmath.exp(x - m) for x in t]
            z = mpmath.fsum(w)
            out.append([mpmath.fsum(w[n] * mpmath.mpf(float(v[j, c])) for n, j in enumerate(keys)) / z
                        for c in range(v.shape[1])])
        return out


def ulp_errors(got, exact, p: int = 24, e_min: int = -126) -> np.ndarray:
    """(y − x)/ulp(x) for float32 y against mpmath x (ulp(x) = 2^(max(e, e_min) − p + 1))."""
    with mpmath.workdps(60):
        out = np.zeros(got.shape)
        for i, row in enumerate(exact):
            for c, x in enumerate(row):
                e = int(mpmath.floor(mpmath.log(abs(x), 2)))
                unit = mpmath.mpf(2) ** (max(e, e_min) - p + 1)
                out[i, c] = float((mpmath.mpf(float(got[i, c])) - x) / unit)
        return out


def blind_to(folder: str) -> None:
    """Make this process (a Dask worker, through ``client.run``) unable to open or list anything
    under ``folder``, as a worker on another machine without the shared filesystem: an audit
    hook refuses the interpreter's "open", "os.scandir" and "os.listdir" events there (it
    cannot be removed: the worker keeps it until it exits)."""
    import errno
    import os
    import sys

    def hook(event: str, args: tuple) -> None:
        if event in ("open", "os.scandir", "os.listdir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(args[0]))
            if path == folder or path.startswith(folder + os.sep):
                raise PermissionError(errno.EACCES, "this worker cannot see the dump", path)

    sys.addaudithook(hook)
