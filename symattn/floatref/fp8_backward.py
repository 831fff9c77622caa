"""The exact gradients an fp8 attention backward *recipe* gives, beside the true gradients.

A kernel that quantises P and dS to fp8 is not meant to give the correctly rounded gradient:
its algorithm has errors of its own (an e4m3 P is off by up to 1/16 of itself).  Judged
against the true gradient it can only be given a loose tolerance, inside which real bugs
live; judged against what *its algorithm* gives on its own inputs it can be held to a few
ulps.  This module gives that value, each entry correctly rounded and proved, for one named
recipe (docs/floatref.md, "The fp8 backward recipe"):

``cudnn_fp8_per_tensor``: the FP8 backward of cuDNN's ``sdpa_fp8_backward`` as Transformer
Engine's FusedAttention drives it with per-tensor scaling (DelayedScaling or
Float8CurrentScaling; Format.HYBRID: forward tensors e4m3, gradients e5m2).  Its fp8 inputs
are the stored tensors Q, K, V, O, dO with per-tensor descales (the real value of Q is
descale_q·Q), the forward's natural log-sum-exp ``Stats``, and scales for the two
intermediates and the three outputs.  In exact arithmetic, per head (t: the scaled logits):

    t    = s·descale_q·descale_k·(Q·Kᵀ) + mask
    P    = e^(t − lse)                      (lse: the kernel's Stats, or the exact LSE)
    P8   = RN_p(scale_s·P)                  p: e4m3 (the S tensor; "S" in cuDNN's names)
    dV   = (1/scale_s)·descale_dO·(P8ᵀ·dO)
    dP   = descale_dO·descale_v·(dO·Vᵀ),   D = descale_dO·descale_o·rowsum(dO ∘ O)
    dS   = P ∘ (dP − D)                     (P unquantised, as the kernel holds it in fp32)
    dS8  = RN_ds(scale_dP·dS)               ds: e5m2 (the "dP" tensor in cuDNN's names)
    dQ   = s·(1/scale_dP)·descale_k·(dS8·K),   dK = s·(1/scale_dP)·descale_q·(dS8ᵀ·Q)

and the kernel stores RN_out(scale_dQ·dQ), RN_out(scale_dK·dK), RN_out(scale_dV·dV) (fp8 with
delayed scaling, bfloat16/float16 with current scaling and scales 1).  RN is round to nearest
even; past the format's largest finite value it is ±inf (e5m2) or NaN (e4m3fn), as ml_dtypes
rounds (a kernel whose conversion saturates differs only there).  The descales of the two
intermediates are the exact reciprocals of their scales: a kernel that multiplies P by
scale_s and never divides it back ("P not rescaled") is off by the factor scale_s.

How an entry is proved: the scores, dP − D and every product after the two quantisations are
exact rationals (integers times powers of two, from the floats' significands: flint's fmpz_mat);
P8 and dS8 are decided from arb balls whose ends round alike, the precision doubling to 8192
bits.  P is rational only where t − lse = 0 (P = 1; with the exact LSE: every live key of the
row has the same logit, P = 1/n), and dS only where P is or dP = D: there they are rounded
exactly; elsewhere P and dS are transcendental (Lindemann–Weierstrass), never a rounding
midpoint, so a ball decides.  The outputs are rational (times s, when s = 1/√E is irrational:
then a ball decides, s·R ≠ 0 being irrational).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint

from symattn.floatref.backward import BackwardReference, correctly_rounded_backward
from symattn.floatref.binary import BINARY_FORMATS, BinaryFormat, round_ball, round_fraction
from symattn.floatref.conditional import kv_index
from symattn.floatref.errors import FloatRefError
from symattn.floatref.rows import _scale_ball, _scale_parts, dyadic_matrix
from symattn.numbers.precision import precision

#: the most (query, key) pairs over all heads one call decides (two arb balls each): 2^16, about
#: 7 s of CPU at (1, 4, 128, 128), E = 64 (measured once, load 7 on 2 cores)
MAX_RECIPE_PAIRS = 1 << 16
_PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
NAMES = ("dQ", "dK", "dV")


def _np():
    import numpy

    return numpy


@dataclass(frozen=True)
class FP8BackwardRecipe:
    """cuDNN/Transformer Engine's per-tensor-scaled fp8 attention backward (the module
    docstring has its equations).  Descales of the inputs and scales of the two intermediates
    and three outputs are floats (read by their binary values); the intermediates' descales
    are the exact reciprocals of ``scale_s`` and ``scale_dp``."""

    p_format: str = "float8_e4m3fn"
    ds_format: str = "float8_e5m2"
    scale_s: float = 1.0
    scale_dp: float = 1.0
    descale_q: float = 1.0
    descale_k: float = 1.0
    descale_v: float = 1.0
    descale_o: float = 1.0
    descale_do: float = 1.0
    scale_dq: float = 1.0
    scale_dk: float = 1.0
    scale_dv: float = 1.0
    name: str = "cudnn_fp8_per_tensor"

    def __post_init__(self) -> None:
        for field in ("p_format", "ds_format"):
            if getattr(self, field) not in BINARY_FORMATS:
                raise FloatRefError(f"{field} is {getattr(self, field)!r}: use one of {', '.join(BINARY_FORMATS)}")
        for field in ("scale_s", "scale_dp", "descale_q", "descale_k", "descale_v", "descale_o", "descale_do",
                      "scale_dq", "scale_dk", "scale_dv"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise FloatRefError(f"{field} is {value!r}: give a finite positive float")

    def exact(self, field: str) -> Fraction:
        """A scale or descale as the exact rational its float holds."""
        return Fraction(float(getattr(self, field)))

    def reference(self, Q: Any, K: Any, V: Any, dO: Any, *, given: dict[str, Any] | None,
                  dtype: str = "float32", attn_mask: Any = None, is_causal: bool = False,
                  causal_align: str = "top_left", scale: float | None = None, enable_gqa: bool = False,
                  mask_value: float | None = None) -> BackwardReference:
        """The recipe's stored dQ, dK, dV in ``dtype``, each correctly rounded, as a
        BackwardReference (what :func:`symattn.testing.assert_attention_grads_close` judges
        with ``recipe=``).  ``given``: {"out": O} (the kernel's saved fp8 output) and
        optionally "lse" (its Stats; absent: the exact LSE of the logits)."""
        if not isinstance(given, dict) or "out" not in given or not set(given) <= {"out", "lse"}:
            keys = sorted(given) if isinstance(given, dict) else type(given).__name__
            raise FloatRefError(f"given is {keys}: the fp8 recipe needs given={{'out': O}} or {{'out': O, "
                                "'lse': lse}}, the kernel's saved output (and natural log-sum-exp)")
        return _recipe(self, Q, K, V, dO, given, dtype, dict(
            attn_mask=attn_mask, is_causal=is_causal, causal_align=causal_align, scale=scale,
            enable_gqa=enable_gqa, mask_value=mask_value))


@dataclass(frozen=True)
class FP8BackwardResult:
    """The recipe's gradients (stored units: scale_dX times the gradient, in ``dtype``), the
    true ones (the correctly rounded gradient of the attention of the descaled inputs, in real
    units: compare dq / scale_dq; blocked keys removed even under a finite ``mask_value``), and
    the recipe's two quantised intermediates, P8 and dS8 (…, L, S; the fp8 values before
    descaling), for a kernel's intermediates to be checked."""

    recipe: BackwardReference
    true: BackwardReference
    P8: Any
    dS8: Any


def fp8_backward_reference(Q: Any, K: Any, V: Any, dO: Any, *, out: Any, lse: Any = None,
                           recipe: FP8BackwardRecipe | None = None, dtype: str = "float32",
                           **sdpa: Any) -> FP8BackwardResult:
    """What the fp8 backward recipe gives on a kernel's stored Q, K, V, O, dO (and Stats
    ``lse``), correctly rounded to ``dtype``, beside the true gradient; SDPA options as
    :func:`symattn.floatref.correctly_rounded_backward` (``attn_mask``, ``is_causal``,
    ``causal_align``, ``scale``, ``enable_gqa``, ``mask_value``)."""
    recipe = recipe or FP8BackwardRecipe()
    given = {"out": out} if lse is None else {"out": out, "lse": lse}
    from symattn.floatref.sdpa import _array

    np = _np()
    real = [_descaled(_array(a, name).astype(np.float64), recipe.exact(d), name)
            for a, d, name in ((Q, "descale_q", "Q"), (K, "descale_k", "K"), (V, "descale_v", "V"),
                               (dO, "descale_do", "dO"))]
    parts: dict[str, Any] = {}
    ref = _recipe(recipe, Q, K, V, dO, given, dtype, _sdpa(sdpa), parts)
    # the true gradient of the attention the mask means: blocked keys removed (a finite mask_value
    # is the kernel's convention, which the recipe follows, not the model's)
    true = correctly_rounded_backward(*real, dtype=dtype, **{k: v for k, v in _sdpa(sdpa).items()
                                                             if k != "mask_value"})
    return FP8BackwardResult(ref, true, parts["P8"], parts["dS8"])


def _descaled(a: Any, d: Fraction, name: str) -> Any:
    """descale·a as float64, refused when a product is not exact (a 53-bit descale times a
    float32): the true gradient must be of the recipe's own real inputs."""
    y = a * float(d)
    if d.numerator & (d.numerator - 1) or d.denominator & (d.denominator - 1):   # not a power of two
        for x, z in zip(a.ravel().tolist(), y.ravel().tolist()):
            if Fraction(z) != Fraction(x) * d:
                raise FloatRefError(f"descale × {name} is not a float64 exactly (at {x!r}): give descales "
                                    "that are float32 values, as cuDNN's are")
    return y


def _sdpa(sdpa: dict[str, Any]) -> dict[str, Any]:
    known = ("attn_mask", "is_causal", "causal_align", "scale", "enable_gqa", "mask_value")
    bad = sorted(set(sdpa) - set(known))
    if bad:
        raise FloatRefError(f"unknown option {bad[0]!r}: give {', '.join(known)}")
    return {"attn_mask": None, "is_causal": False, "causal_align": "top_left", "scale": None,
            "enable_gqa": False, "mask_value": None, **sdpa}


def _recipe(recipe: FP8BackwardRecipe, Q: Any, K: Any, V: Any, dO: Any, given: dict[str, Any], dtype: str,
            sdpa: dict[str, Any], parts: dict[str, Any] | None = None) -> BackwardReference:
    """Check the arrays, decide P8 and dS8 head by head, and round the exact products."""
    from symattn.floatref.sdpa import _array, normalise

    np = _np()
    fmt = BINARY_FORMATS.get(dtype)
    if fmt is None:
        raise FloatRefError(f"dtype is {dtype!r}: use one of {', '.join(BINARY_FORMATS)}")
    pr = normalise(Q, K, V, **sdpa)
    L, S = pr.Q.shape[-2], pr.K.shape[-2]
    group = _array(Q, "Q").shape[-3] // _array(K, "K").shape[-3] if sdpa["enable_gqa"] else 1
    kv_batch = pr.batch[:-1] + (pr.batch[-1] // group,) if group > 1 else pr.batch
    for name, a in (("K", _array(K, "K")), ("V", _array(V, "V"))):
        if a.shape[:-2] != kv_batch:
            raise FloatRefError(f"{name} has shape {a.shape}: the backward needs K and V with Q's batch "
                                f"shape {pr.batch} (or its heads grouped, enable_gqa), not broadcast")
    pairs = math.prod(pr.batch) * L * S
    if pairs > MAX_RECIPE_PAIRS:
        raise FloatRefError(f"{pairs:,} (query, key) pairs over all heads is over the cap of "
                            f"{MAX_RECIPE_PAIRS:,} (MAX_RECIPE_PAIRS) for the fp8 recipe: check fewer heads "
                            "or rows at a time")
    live = np.ones(pr.batch + (L,), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed).any(axis=-1)
    arrays = _given_arrays(dO, given, pr.batch + (L, pr.V.shape[-1]), pr.batch + (L,), live)
    s_frac, s_exact = _scale_parts(pr)
    P8, dS8, Pf = np.zeros(pr.batch + (L, S)), np.zeros(pr.batch + (L, S)), np.zeros(pr.batch + (L, S))
    R: dict[tuple[str, tuple], list[list[Fraction]]] = {}   # (name, head): the exact products
    for idx in (np.ndindex(*pr.batch) if pr.batch else [()]):
        head = _Head(recipe, pr, idx, arrays["dO"][idx], arrays["out"][idx],
                     None if arrays["lse"] is None else arrays["lse"][idx], s_frac, s_exact)
        P8[idx], dS8[idx], Pf[idx] = head.quantise()
        for name, value in head.products(P8[idx], dS8[idx]).items():
            at = idx if name == "dQ" else kv_index(idx, group)
            R[name, at] = value if (name, at) not in R else [
                [a + b for a, b in zip(x, y)] for x, y in zip(R[name, at], value)]
    if parts is not None:
        parts.update(P8=P8, dS8=dS8)
    out_scale = {"dQ": recipe.exact("scale_dq"), "dK": recipe.exact("scale_dk"), "dV": recipe.exact("scale_dv")}
    grads = {n: _rounded(R, n, pr.batch if n == "dQ" else kv_batch, out_scale[n], s_frac, s_exact, fmt)
             for n in NAMES}

    def balls(name: str, index: tuple, prec: int) -> flint.arb:
        value = R[name, tuple(index[:-2])][index[-2]][index[-1]] * out_scale[name]
        if name == "dV" or s_frac is not None:
            return _fq(value if name == "dV" else value * s_frac)
        return _fq(value) * _scale_ball(s_exact)

    condition, scales = _conditioning(recipe, pr, arrays, Pf, P8, dS8, group, kv_batch)
    lse = arrays["lse"] if arrays["lse"] is not None else np.full(pr.batch + (L,), np.nan)
    return BackwardReference(grads["dQ"], grads["dK"], grads["dV"], lse, fmt.name, (), condition, scales,
                             conditional=True, balls=balls)


def _given_arrays(dO: Any, given: dict[str, Any], shape: tuple, lse_shape: tuple, live: Any) -> dict[str, Any]:
    """dO, the kernel's O and (optional) lse as float64 arrays of the right shapes, finite on
    the rows that attend to some key (the others are set to 0: no gradient flows there)."""
    from symattn.floatref.sdpa import _array

    np = _np()
    out: dict[str, Any] = {"lse": None}
    for name, value, want in (("dO", dO, shape), ("out", given["out"], shape), ("lse", given.get("lse"), lse_shape)):
        if value is None:
            continue
        what = "dO" if name == "dO" else f"given[{name!r}]"
        a = _array(value, what).astype(np.float64)
        if a.shape != want:
            raise FloatRefError(f"{what} has shape {a.shape}: give {want}")
        ok = np.isfinite(a) if name == "lse" else np.isfinite(a).all(axis=-1)
        if (live & ~ok).any():
            at = [int(v) for v in np.argwhere(live & ~ok)[0]]
            raise FloatRefError(f"{what} holds inf or NaN at row {at}: give finite values on rows that "
                                "attend to some key")
        out[name] = np.where(live if name == "lse" else live[..., None], a, 0.0)
    return out


def _fq(x: Fraction) -> flint.arb:
    return flint.arb(flint.fmpq(x.numerator, x.denominator))


class _Head:
    """One query head: the exact logits t = s·a + b (a, b rational), dP − D (rational) and the
    mask; decides P8 = RN(scale_s·P) and dS8 = RN(scale_dP·P·(dP − D)) entry by entry."""

    def __init__(self, recipe: FP8BackwardRecipe, pr: Any, idx: tuple, dO: Any, out: Any, lse: Any,
                 s_frac: Fraction | None, s_exact: Any) -> None:
        np = _np()
        self.recipe, self.s_frac, self.s_exact = recipe, s_frac, s_exact
        self.qn, self.gq = dyadic_matrix(pr.Q[idx])
        self.kn, self.gk = dyadic_matrix(pr.K[idx])
        vn, gv = dyadic_matrix(pr.V[idx])
        self.don, self.go = dyadic_matrix(dO)
        on, g_out = dyadic_matrix(out)
        L, S = len(self.qn), len(self.kn)
        self.allowed = np.ones((L, S), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed[idx])
        add = None if pr.additive is None else np.asarray(pr.additive[idx], dtype=np.float64)
        scores = (flint.fmpz_mat(self.qn) * flint.fmpz_mat(self.kn).transpose()).tolist()
        c = recipe.exact("descale_q") * recipe.exact("descale_k") * Fraction(2) ** (self.gq + self.gk)
        self.a = [[c * int(x) for x in row] for row in scores]
        self.b = [[Fraction(0) if add is None else Fraction(float(add[i, j])) for j in range(S)] for i in range(L)]
        dpv = (flint.fmpz_mat(self.don) * flint.fmpz_mat(vn).transpose()).tolist()
        rows = [sum(x * y for x, y in zip(d, o)) for d, o in zip(self.don, on)]
        cdo = recipe.exact("descale_do")
        cp = cdo * recipe.exact("descale_v") * Fraction(2) ** (self.go + gv)
        cd = cdo * recipe.exact("descale_o") * Fraction(2) ** (self.go + g_out)
        self.r = [[cp * int(x) - cd * rows[i] for x in dpv[i]] for i in range(L)]
        self.lse = None if lse is None else [Fraction(float(x)) for x in lse]
        self.L, self.S = L, S

    def _x(self, i: int, j: int) -> Any:
        """t_ij exactly (a Fraction) when the scale is rational, else the pair (a, b)."""
        return self.s_frac * self.a[i][j] + self.b[i][j] if self.s_frac is not None else (self.a[i][j], self.b[i][j])

    def exact_p(self, i: int) -> dict[int, Fraction]:
        """The row's entries whose P is rational: t = lse (P = 1), or with the exact LSE a row whose
        live logits are all equal (P = 1/n); Lindemann–Weierstrass leaves no others."""
        keys = [j for j in range(self.S) if self.allowed[i, j]]
        if not keys:
            return {}
        if self.lse is None:
            xs = {self._x(i, j) for j in keys}
            return {j: Fraction(1, len(keys)) for j in keys} if len(xs) == 1 else {}
        zero = Fraction(0) if self.s_frac is not None else (Fraction(0), self.lse[i])
        shift = self.lse[i] if self.s_frac is not None else Fraction(0)
        return {j: Fraction(1) for j in keys if (self._x(i, j) - shift if self.s_frac is not None
                                                 else self._x(i, j)) == zero}

    def _p_balls(self, i: int, keys: list[int], s_ball: flint.arb) -> dict[int, flint.arb]:
        """Balls of P_ij = e^(t_ij − lse_i) for the keys (the exact LSE over all live keys when
        the kernel's is not given), at the current precision."""
        x = {j: s_ball * _fq(self.a[i][j]) + _fq(self.b[i][j]) for j in range(self.S) if self.allowed[i, j]}
        if self.lse is None:
            top = max(x.values(), key=lambda v: float(v.mid()))
            lse = top + sum(((v - top).exp() for v in x.values()), flint.arb(0)).log()
        else:
            lse = _fq(self.lse[i])
        return {j: (x[j] - lse).exp() for j in keys}

    def quantise(self) -> tuple[Any, Any, Any]:
        """(P8, dS8, a float64 estimate of P), every live entry decided."""
        np = _np()
        rc = self.recipe
        pf, dsf = BINARY_FORMATS[rc.p_format], BINARY_FORMATS[rc.ds_format]
        ss, sdp = rc.exact("scale_s"), rc.exact("scale_dp")
        P8, dS8, Pf = (np.zeros((self.L, self.S)) for _ in range(3))
        todo: dict[int, tuple[set, set]] = {}
        for i in range(self.L):
            exact = self.exact_p(i)
            for j, p in exact.items():
                P8[i, j], dS8[i, j], Pf[i, j] = round_fraction(ss * p, pf), round_fraction(sdp * p * self.r[i][j], dsf), p
            keys = {j for j in range(self.S) if self.allowed[i, j] and j not in exact}
            if keys:
                todo[i] = (set(keys), {j for j in keys if self.r[i][j] != 0})
        first = True
        for prec in _PRECISIONS:
            with precision(prec):
                s_ball = _scale_ball(self.s_exact)
                for i, (p_left, d_left) in todo.items():
                    balls = self._p_balls(i, sorted(p_left | d_left), s_ball)
                    if first:
                        Pf[i, list(balls)] = [float(b.mid()) for b in balls.values()]
                    for j in list(p_left):
                        y = round_ball(_fq(ss) * balls[j], pf)
                        if y is not None:
                            P8[i, j] = y
                            p_left.discard(j)
                    for j in list(d_left):
                        y = round_ball(_fq(sdp * self.r[i][j]) * balls[j], dsf)
                        if y is not None:
                            dS8[i, j] = y
                            d_left.discard(j)
            first = False
            todo = {i: t for i, t in todo.items() if t[0] or t[1]}
            if not todo:
                break
        if todo:
            i, (p_left, d_left) = next(iter(todo.items()))
            raise FloatRefError(f"P or dS at row {i}, key {min(p_left | d_left)} sits on an fp8 rounding "
                                f"boundary as far as {_PRECISIONS[-1]} bits show: it cannot be rounded here")
        return P8, dS8, Pf

    def products(self, P8: Any, dS8: Any) -> dict[str, list[list[Fraction]]]:
        """The exact rational dV, and dQ, dK without the factor s, from the quantised P8 and dS8."""
        np = _np()
        for name, m in (("P8", P8), ("dS8", dS8)):
            if not np.isfinite(m).all():
                at = [int(v) for v in np.argwhere(~np.isfinite(m))[0]]
                raise FloatRefError(f"the recipe's {name} overflows its fp8 format at {at}: scale_"
                                    f"{'s' if name == 'P8' else 'dp'} is too large for these values")
        rc = self.recipe
        pn, gp = dyadic_matrix(P8)
        sn, gs = dyadic_matrix(dS8)
        P, dS = flint.fmpz_mat(pn), flint.fmpz_mat(sn)
        parts = {"dV": (P.transpose() * flint.fmpz_mat(self.don), gp + self.go,
                        rc.exact("descale_do") / rc.exact("scale_s")),
                 "dQ": (dS * flint.fmpz_mat(self.kn), gs + self.gk, rc.exact("descale_k") / rc.exact("scale_dp")),
                 "dK": (dS.transpose() * flint.fmpz_mat(self.qn), gs + self.gq,
                        rc.exact("descale_q") / rc.exact("scale_dp"))}
        out = {}
        for name, (m, g, c) in parts.items():
            k = c * Fraction(2) ** g
            out[name] = [[k * int(x) for x in row] for row in m.tolist()]
        return out


def _rounded(R: dict, name: str, batch: tuple, out_scale: Fraction, s_frac: Fraction | None, s_exact: Any,
             fmt: BinaryFormat) -> Any:
    """RN(out_scale·(s)·R) of every entry into ``fmt`` (float64 storage): exactly when rational,
    else from balls of s (irrational, so s·R ≠ 0 is never a midpoint)."""
    np = _np()
    heads = list(np.ndindex(*batch)) if batch else [()]
    first = R[name, heads[0]]
    out = np.zeros(batch + (len(first), len(first[0]) if first else 0))
    for idx in heads:
        pending = []
        for i, row in enumerate(R[name, idx]):
            for j, x in enumerate(row):
                v = out_scale * x
                if name == "dV" or s_frac is not None:
                    out[idx + (i, j)] = round_fraction(v * (1 if name == "dV" else s_frac), fmt)
                elif v:
                    pending.append((i, j, v))
        for prec in _PRECISIONS:
            with precision(prec):
                s_ball = _scale_ball(s_exact)
                left = []
                for i, j, v in pending:
                    y = round_ball(_fq(v) * s_ball, fmt)
                    if y is None:
                        left.append((i, j, v))
                    else:
                        out[idx + (i, j)] = y
            pending = left
            if not pending:
                break
        if pending:  # pragma: no cover - s·R is irrational: a ball decides long before
            raise FloatRefError(f"{name}{list(idx + pending[0][:2])} cannot be rounded within {_PRECISIONS[-1]} bits")
    return out


def _conditioning(rc: FP8BackwardRecipe, pr: Any, arrays: dict, Pf: Any, P8: Any, dS8: Any, group: int,
                  kv_batch: tuple) -> tuple[Any, dict[str, Any]]:
    """κ per query row (the cancellation in dP − D, from the float64 P) and each stored entry's
    sum of absolute terms, float64 estimates for reading errors (never for rounding)."""
    np = _np()
    f = {k: float(rc.exact(k)) for k in ("descale_q", "descale_k", "descale_v", "descale_o", "descale_do",
                                         "scale_s", "scale_dp", "scale_dq", "scale_dk", "scale_dv")}
    s = float(pr.scale_f)
    dO, out = arrays["dO"], arrays["out"]
    dP = f["descale_do"] * f["descale_v"] * (dO @ np.swapaxes(pr.V, -1, -2))
    D = f["descale_do"] * f["descale_o"] * (dO * out).sum(axis=-1, keepdims=True)
    dPa = f["descale_do"] * f["descale_v"] * (np.abs(dO) @ np.swapaxes(np.abs(pr.V), -1, -2))
    Da = f["descale_do"] * f["descale_o"] * np.abs(dO * out).sum(axis=-1, keepdims=True)
    num, den = (Pf * (dPa + Da)).sum(axis=-1), (Pf * np.abs(dP - D)).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        condition = np.where(num == 0, 1.0, np.where(den == 0, np.inf, num / np.where(den == 0, 1.0, den)))
    T = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
    scales = {"dV": f["scale_dv"] * f["descale_do"] / f["scale_s"] * (T(np.abs(P8)) @ np.abs(dO)),
              "dQ": s * f["scale_dq"] * f["descale_k"] / f["scale_dp"] * (np.abs(dS8) @ np.abs(pr.K)),
              "dK": s * f["scale_dk"] * f["descale_q"] / f["scale_dp"] * (T(np.abs(dS8)) @ np.abs(pr.Q))}
    if group > 1:
        for k in ("dK", "dV"):
            scales[k] = scales[k].reshape(kv_batch + (group,) + scales[k].shape[-2:]).sum(axis=-3)
    return condition, scales
