"""A kernel's gradients against a named fp8 backward recipe, beside the true gradients
(``symattn floatref --recipe NAME``).

The gate is :func:`symattn.testing.gradients.grads_report` with ``recipe=``: every entry of
the kernel's stored dQ, dK, dV against the recipe's exact value on the kernel's own stored
Q, K, V, O, dO (and Stats), correctly rounded (:mod:`symattn.floatref.fp8_backward`).  Beside
it, not gated, the same candidates in real units (divided by ``scale_dX``, in float64)
against the correctly rounded true gradient of the descaled inputs: how far the recipe's
own quantisation puts a right kernel from the truth.  The recipe is computed once
(:func:`symattn.floatref.fp8_backward.fp8_backward_reference`) for both.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from symattn.floatref.backward import BackwardReference
from symattn.floatref.errors import FloatRefError
from symattn.floatref.fp8_backward import FP8BackwardRecipe, FP8BackwardResult, fp8_backward_reference
from symattn.testing.gradients import NAMES, GradsReport, grads_report

#: the recipes by name (what ``--recipe`` accepts)
RECIPES: dict[str, type[FP8BackwardRecipe]] = {"cudnn_fp8_per_tensor": FP8BackwardRecipe}
#: the fields of a recipe that are formats (the others are scales: finite positive floats)
_FORMAT_FIELDS = ("p_format", "ds_format")

__all__ = ["RECIPES", "RecipeReport", "make_recipe", "recipe_fields", "recipe_grads_report"]


def recipe_fields(name: str) -> tuple[str, ...]:
    """The options a recipe takes (its dataclass fields but its name)."""
    return tuple(f.name for f in dataclasses.fields(RECIPES[name]) if f.name != "name")


def make_recipe(name: str, options: dict[str, str], flag: str = "--recipe-option") -> FP8BackwardRecipe:
    """The recipe ``name`` with ``options`` (field → text): a scale read as a float, a format by
    its name; an unknown recipe or field, or a bad value, is one line naming it."""
    if name not in RECIPES:
        raise FloatRefError(f"--recipe {name!r} is not a known recipe: use {', '.join(RECIPES)}")
    known = recipe_fields(name)
    values: dict[str, Any] = {}
    for field, text in options.items():
        if field not in known:
            raise FloatRefError(f"{flag} {field}: {name} has no option {field!r}; its options are {', '.join(known)}")
        if field in _FORMAT_FIELDS:
            values[field] = text
            continue
        try:
            values[field] = float(text)
        except ValueError:
            raise FloatRefError(f"{flag} {field}={text}: give a finite positive number") from None
    try:
        return RECIPES[name](**values)
    except FloatRefError as exc:
        raise FloatRefError(f"{flag}: {exc}") from None


@dataclass(frozen=True)
class _Computed:
    """The recipe's (or the truth's) reference computed once, handed to grads_report as a recipe."""

    name: str
    ref: BackwardReference

    def reference(self, *arrays: Any, **options: Any) -> BackwardReference:
        return self.ref


@dataclass(frozen=True)
class RecipeReport:
    """The gate (the candidates against the recipe) and, beside it, against the true gradients."""

    recipe: FP8BackwardRecipe
    gate: GradsReport
    true: GradsReport
    result: FP8BackwardResult

    @property
    def passed(self) -> bool:
        return self.gate.passed

    def to_json(self) -> dict[str, Any]:
        """The gate's ``GradsReport.to_json`` with "recipe" (its name and options) and "true"."""
        def number(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        data = self.gate.to_json()
        data["recipe"] = {"name": self.recipe.name,
                          **{f: getattr(self.recipe, f) for f in recipe_fields(self.recipe.name)}}
        data["true"] = {"candidate": "the stored gradient divided by scale_dQ, scale_dK, scale_dV (float64)",
                        "gradients": {n: {"max_ulps": number(g.max_ulps), "max_abs_error": number(g.max_abs),
                                          "max_error_relative_to_max_abs": number(g.normwise),
                                          "max_error_relative_to_scale": number(g.of_scale)}
                                      for n, g in self.true.grads.items()}}
        return data

    def true_lines(self) -> list[str]:
        """The true gradients' section, as text lines."""
        unit = "ulps of scale" if self.true.ulp_scale == "magnitude" else "ulps"
        out = [f"Beside the recipe {self.recipe.name}: the candidates / scale_dX against the true gradients "
               f"({self.true.fmt}, correctly rounded; not gated: the recipe's fp8 P and dS are off by themselves)"]
        for g in self.true.grads.values():
            out.append(f"  {g.name}: max {g.max_ulps:.4g} {unit}; max |error| {g.max_abs:.3g} = {g.normwise:.3g} "
                       f"of max |{g.name}|")
        return out


def recipe_grads_report(dq: Any, dk: Any, dv: Any, Q: Any, K: Any, V: Any, dO: Any, *, out: Any, lse: Any = None,
                        recipe: FP8BackwardRecipe, dtype: str | None = None, max_ulp: float = 8.0,
                        ulp_scale: str = "magnitude", worst: int = 5, **sdpa: Any) -> RecipeReport:
    """The kernel's stored dQ, dK, dV against ``recipe`` on its stored Q, K, V, O (``out``), dO
    and Stats (``lse``, natural; None: the exact LSE), and beside it against the true gradient;
    SDPA options as :func:`symattn.floatref.fp8_backward.fp8_backward_reference`."""
    import numpy as np

    from symattn.testing.attention import _dtype_of, to_numpy

    fmt = _dtype_of(dq, dtype)
    result = fp8_backward_reference(Q, K, V, dO, out=out, lse=lse, recipe=recipe, dtype=fmt, **sdpa)
    given = {"out": out} if lse is None else {"out": out, "lse": lse}
    options = {k: v for k, v in sdpa.items() if k != "mask_value"}
    gate = grads_report(dq, dk, dv, Q, K, V, dO, given=given, dtype=fmt, max_ulp=max_ulp, ulp_scale=ulp_scale,
                        worst=worst, recipe=_Computed(recipe.name, result.recipe), **sdpa)
    scales = {"dQ": recipe.scale_dq, "dK": recipe.scale_dk, "dV": recipe.scale_dv}
    rq, rk, rv = (to_numpy(x, n).astype(np.float64) / scales[n] for x, n in zip((dq, dk, dv), NAMES))
    true = grads_report(rq, rk, rv, Q, K, V, dO, dtype=fmt, max_ulp=max_ulp, ulp_scale=ulp_scale, worst=0,
                        recipe=_Computed("true", result.true), **options)
    return RecipeReport(recipe, gate, true, result)
