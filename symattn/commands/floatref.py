"""``symattn floatref``: a kernel's SDPA result against the exact values, in ULPs (or the reference)."""

from __future__ import annotations

import argparse
import io
import json
import math
from typing import Callable

from symattn.commands import Outcome, deprecated_alias, paper, pdf_or_text
from symattn.commands.heads import add_format_arguments, chosen_format

ORDER = 60


def max_ulp(text: str) -> float:
    """An argparse type for ``--max-ulp``: a finite number ≥ 0, else a one-line error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-ulp must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"--max-ulp must be a finite number ≥ 0, got {text!r}")
    return value


def finite(flag: str, example: str, why: str = "") -> Callable[[str], float]:
    """An argparse type: a finite float for ``flag``, else a one-line error naming it."""
    def read(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number{example}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{flag} must be finite{why}, got {text!r}")
        return value
    return read


scale = finite("--scale", "")


#: the formats floatref rounds to (floatref.binary.BINARY_FORMATS, listed here to keep the parser cheap)
BINARY_NAMES = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


def _align(text: str) -> str:
    name = text.strip().lower().replace("_", "-")
    if name not in ("top-left", "bottom-right"):
        raise argparse.ArgumentTypeError(f"--causal takes top-left or bottom-right, got {text!r}")
    return name


_mask_value = finite("--mask-value", " such as -5e4", " (blocked keys are -inf without it)")

#: the fp8 backward recipes (symattn.testing.recipe.RECIPES, listed here to keep the parser cheap)
RECIPE_NAMES = ("cudnn_fp8_per_tensor",)


def _recipe_name(text: str) -> str:
    if text not in RECIPE_NAMES:
        raise argparse.ArgumentTypeError(f"--recipe {text!r} is not a known recipe: use {', '.join(RECIPE_NAMES)}")
    return text


def _recipe_option(text: str) -> tuple[str, str]:
    field, eq, value = text.partition("=")
    if not eq or not field.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"--recipe-option takes FIELD=VALUE (e.g. scale_s=256), got {text!r}")
    return field.strip(), value.strip()


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "floatref", help="errors in ULPs of a float SDPA result against the exact values "
                         "(exit 0, 1 over --max-ulp, 2 bad input)",
        description="Reads Q, K, V (.npy, by their exact binary values) with torch SDPA's rules and "
                    "compares --candidate with the exact values (every error in ULPs; the worst certified), "
                    "or writes the correctly rounded reference (--write-reference).")
    parser.add_argument("Q")
    parser.add_argument("K")
    parser.add_argument("V")
    parser.add_argument("--candidate", metavar="OUT.npy", help="the kernel's result to judge (an input)")
    parser.add_argument("--out", dest="candidate", metavar="OUT.npy", action=deprecated_alias("--candidate"),
                        help="deprecated: the old name of --candidate (-o/--output is where the report goes)")
    parser.add_argument("--step", choices=("output", "weights"), default="output",
                        help="what --candidate holds (default: output)")
    parser.add_argument("--causal", nargs="?", const="top-left", type=_align, metavar="ALIGN",
                        help="is_causal=True; ALIGN is top-left (PyTorch, the default) or bottom-right "
                             "(FlashAttention >= 2.1), which differ when L != S")
    parser.add_argument("--mask-value", type=_mask_value, metavar="X",
                        help="a finite sentinel added where keys are blocked, instead of -inf (write --mask-value=-5e4: "
                             "argparse reads a bare -5e4 as an option)")
    parser.add_argument("--mask", metavar="M.npy", help="attn_mask: boolean (True = attend) or additive float")
    parser.add_argument("--scale", type=scale, help="the scale (default 1/sqrt(E), exactly)")
    parser.add_argument("--gqa", action="store_true", help="enable_gqa=True")
    parser.add_argument("--dtype", choices=tuple(BINARY_NAMES),
                        help="the format (default: --candidate's dtype, else float32)")
    parser.add_argument("--lse", metavar="LSE.npy",
                        help="the kernel's log-sum-exp per query row, (..., L), to judge (an input)")
    parser.add_argument("--lse-base", choices=("e", "2"), default="e",
                        help="the base --lse is in: e (natural, as FlashAttention stores it; default) or 2")
    parser.add_argument("--max-ulp", type=max_ulp, metavar="N",
                        help="exit 1 when some entry's error is proved to exceed N ulps")
    parser.add_argument("--worst", type=int, default=5, metavar="K", help="certify the K worst entries (default 5)")
    parser.add_argument("--grad-output", metavar="dO.npy",
                        help="the gradient of the loss with respect to the output: judge --dq, --dk, --dv")
    parser.add_argument("--dq", metavar="DQ.npy", help="the kernel's dQ (with --grad-output)")
    parser.add_argument("--dk", metavar="DK.npy", help="the kernel's dK (with --grad-output)")
    parser.add_argument("--dv", metavar="DV.npy", help="the kernel's dV (with --grad-output)")
    parser.add_argument("--conditional", action="store_true",
                        help="judge the gradients against the backward recipe on the kernel's own saved "
                             "forward: --candidate (O) and --lse (natural) instead of the exact gradients")
    parser.add_argument("--ulp-scale", choices=("magnitude", "entry"), default="magnitude",
                        help="gradient distances in ulps of each entry's scale (the sum of its |terms|; "
                             "default) or of the entry itself")
    parser.add_argument("--ds", metavar="DS.npy", help="the kernel's dS = P∘(dP − D), (…, L, S) (with --grad-output)")
    parser.add_argument("--dp", metavar="DP.npy", help="the kernel's dP = dO·Vᵀ, (…, L, S) (with --grad-output)")
    parser.add_argument("--delta", metavar="D.npy",
                        help="the kernel's D = rowsum(dO∘O), (…, L), FlashAttention's delta (with --grad-output)")
    parser.add_argument("--recipe", type=_recipe_name, metavar="NAME",
                        help="judge --dq, --dk, --dv against an fp8 backward recipe on the kernel's stored "
                             f"--candidate (O) and --lse (Stats), beside the true gradients: {', '.join(RECIPE_NAMES)}")
    parser.add_argument("--recipe-option", action="append", type=_recipe_option, default=[], metavar="FIELD=X",
                        help="one of the recipe's options (repeat it): scale_s, scale_dp, descale_q, descale_k, "
                             "descale_v, descale_o, descale_do, scale_dq, scale_dk, scale_dv (floats), "
                             "p_format, ds_format (formats)")
    parser.add_argument("--write-reference", metavar="REF.npz|DIR",
                        help="write the correctly rounded references: REF.npz (output, weights, LSE), or a "
                             "folder DIR of .npy files (and the gradients with --grad-output)")
    add_format_arguments(parser, json_help="the report as JSON (the keys of ULPReport.to_json)", latex_help="")
    parser.set_defaults(run=run)


def _load(path: str, what: str):
    """One array, its header checked against the caps before anything is allocated."""
    from symattn.floatref.arrays import read_array

    return read_array(path, what=what)


def run(args: argparse.Namespace) -> Outcome:
    from symattn import floatref
    from symattn.floatref import FloatRefError

    fmt = chosen_format(args)
    _check_grad_flags(args)
    if args.max_ulp is not None and args.candidate is None and args.lse is None and args.dq is None \
            and not any(v for _, v in _extra_flags(args)):
        raise FloatRefError("--max-ulp judges --candidate or --lse: give --candidate OUT.npy or --lse LSE.npy "
                            "(or gradients: --grad-output dO.npy with --dq, --dk, --dv)")
    if args.worst < 0:
        raise FloatRefError(f"--worst is {args.worst}: give 0 or more")
    if args.candidate is None and args.lse is None and not args.write_reference and args.grad_output is None:
        raise FloatRefError("give --candidate OUT.npy to judge a result (or --lse LSE.npy), "
                            "or --write-reference REF.npz")
    folder = bool(args.write_reference) and not args.write_reference.lower().endswith(".npz")
    if folder and fmt not in ("text", "json") and args.candidate is None and args.lse is None and args.dq is None \
            and not any(v for _, v in _extra_flags(args)):
        raise FloatRefError(f"--write-reference {args.write_reference} (a folder) is reported as text or JSON: "
                            f"drop --format {fmt} (or --pdf)")
    for flag, given in (("--lse", None if args.recipe else args.lse), *((f, v) for f, v in _extra_flags(args) if v)):
        if given is not None and fmt not in ("text", "json"):
            raise FloatRefError(f"{flag} is reported as text or JSON: drop --format {fmt} (or --pdf), or judge "
                                "the output alone")
    Q, K, V = (_load(p, f"the {n} array") for p, n in ((args.Q, "Q"), (args.K, "K"), (args.V, "V")))
    kwargs = dict(attn_mask=None if args.mask is None else _load(args.mask, "the mask array"),
                  is_causal=args.causal is not None, scale=args.scale, enable_gqa=args.gqa,
                  causal_align=(args.causal or "top-left").replace("-", "_"), mask_value=args.mask_value)
    out = None if args.candidate is None else _load(args.candidate, "the result array")
    lse = None if args.lse is None else _load(args.lse, "the LSE array (--lse)")
    dtype = args.dtype or (floatref.format_of(out) if out is not None else "float32")
    judged: dict = {}
    if out is not None and args.recipe is None:   # with --recipe, O and LSE are the recipe's inputs
        judged["output"] = floatref.ulp_report(out, Q, K, V, step=args.step, dtype=dtype, worst=args.worst,
                                               **kwargs)
    if lse is not None and args.recipe is None:
        judged["lse"] = _judge_lse(lse, args.lse, Q, K, V, dtype if args.dtype else None, args.lse_base, kwargs)
    dO = None if args.grad_output is None else _load(args.grad_output, "the output gradient (--grad-output)")
    if dO is not None and args.dq is not None:
        judged["backward"] = _judge_grads(args, Q, K, V, dO, out, lse, kwargs)
    if dO is not None and any(v for _, v in _extra_flags(args)):
        judged["extras"] = _judge_extras(args, Q, K, V, dO, kwargs)
    status = 1 if args.max_ulp is not None and _over(judged, args.max_ulp) else 0
    if args.write_reference:
        written = _write_reference(args, Q, K, V, dO, out, lse, kwargs, dtype, judged)
        if not judged:
            return pdf_or_text(args, _written_text(written, dtype, args, fmt))
    return _judged_outcome(args, judged, fmt, status)


def _extra_flags(args: argparse.Namespace) -> tuple[tuple[str, str | None], ...]:
    return (("--ds", args.ds), ("--dp", args.dp), ("--delta", args.delta))


def _over(judged: dict, max_ulp: float) -> bool:
    """Whether something judged is over --max-ulp: the output, the LSE, the gradients, dS/dP/D."""
    return bool(("output" in judged and judged["output"].exceeds(max_ulp))
                or ("lse" in judged and judged["lse"].over(max_ulp).any())
                or any(k in judged and not judged[k].passed for k in ("backward", "extras")))


def _judged_outcome(args: argparse.Namespace, judged: dict, fmt: str, status: int) -> Outcome:
    """The report of what was judged, in the chosen format."""
    report, lse_report, grads, extras = (judged.get(k) for k in ("output", "lse", "backward", "extras"))
    if fmt == "json":
        data = {} if report is None else report.to_json()
        if lse_report is not None:
            data["lse"] = lse_report.to_json(args.max_ulp)
        if grads is not None:
            data["backward"] = grads.to_json()
        if extras is not None:
            data["extras"] = extras.to_json()
        return Outcome(json.dumps(data, indent=2) + "\n", status)
    from symattn.document.formats import print_document

    text = ""
    if report is not None:
        from symattn.document.build.floatref import build_floatref_document

        doc = build_floatref_document(report, max_ulp=args.max_ulp)
        text = print_document(doc, fmt, fragment=args.fragment, paper=paper(args))
    if lse_report is not None:
        text += _lse_text(lse_report, args.max_ulp)
    if grads is not None:
        from symattn.document.build.floatref_grads import build_grads_document

        if args.recipe is None:
            doc = build_grads_document(grads, max_ulp=args.max_ulp)
        else:
            doc = build_grads_document(grads.gate, max_ulp=args.max_ulp, beside=tuple(grads.true_lines()),
                                       against=f"the fp8 recipe {args.recipe} (--recipe) on the kernel's stored "
                                               "Q, K, V, O (--candidate), dO and " +
                                               ("Stats (--lse)" if args.lse else "the exact LSE (no --lse)"))
        text += ("\n" if text else "") + print_document(doc, fmt, fragment=args.fragment, paper=paper(args))
    if extras is not None:
        lines = extras.lines()
        if args.max_ulp is not None:
            lines.append("  " + extras.gate_line())
        text += ("\n" if text else "") + "\n".join(lines) + "\n"
    return pdf_or_text(args, text, status)


def _check_grad_flags(args: argparse.Namespace) -> None:
    """--dq/--dk/--dv come together with --grad-output; --conditional and --recipe need the saved
    forward; --ds/--dp/--delta are the plain reference's."""
    from symattn.floatref import FloatRefError

    given = [flag for flag, value in (("--dq", args.dq), ("--dk", args.dk), ("--dv", args.dv)) if value]
    extras = [flag for flag, value in _extra_flags(args) if value]
    folder = bool(args.write_reference) and not args.write_reference.lower().endswith(".npz")
    fields = [field for field, _ in args.recipe_option]
    twice = next((f for f in fields if fields.count(f) > 1), None)
    if twice is not None:
        raise FloatRefError(f"--recipe-option {twice} is given twice: give each option once")
    if args.recipe_option and args.recipe is None:
        raise FloatRefError("--recipe-option sets an option of a recipe: give --recipe NAME too "
                            f"({', '.join(RECIPE_NAMES)})")
    if args.grad_output is None and (given or extras or args.conditional or args.recipe):
        first = (given + extras)[0] if given or extras else "--conditional" if args.conditional else "--recipe"
        raise FloatRefError(f"{first} judges gradients: give --grad-output dO.npy with --dq, --dk and --dv")
    if args.grad_output is not None and args.write_reference and not folder:
        raise FloatRefError(f"--write-reference {args.write_reference} holds the forward only: give a folder "
                            "(--write-reference DIR) to write the gradients")
    if args.grad_output is not None and len(given) != 3 and (given or not (extras or folder)):
        missing = [f for f in ("--dq", "--dk", "--dv") if f not in given]
        more = "" if given else " (or --ds, --dp, --delta; or --write-reference DIR to write the references)"
        raise FloatRefError(f"--grad-output judges the kernel's gradients: give {', '.join(missing)} too{more}")
    if args.conditional and (args.candidate is None or args.lse is None or args.lse_base != "e"):
        raise FloatRefError("--conditional reads the kernel's saved forward: give --candidate O.npy and "
                            "--lse LSE.npy (natural, --lse-base e)")
    if args.recipe and args.conditional:
        raise FloatRefError("--recipe judges against the recipe on the kernel's saved forward already: "
                            "drop --conditional")
    if args.recipe and (args.candidate is None or args.lse_base != "e"):
        raise FloatRefError("--recipe reads the kernel's stored forward: give --candidate O.npy (and --lse "
                            "LSE.npy, its natural Stats, if it saved them; --lse-base e)")
    if extras and (args.conditional or args.recipe):
        raise FloatRefError(f"{extras[0]} is judged against the plain reference (the exact dS, dP, D): drop "
                            f"{'--conditional' if args.conditional else '--recipe'}, or judge {extras[0]} alone")
    if args.grad_output is not None and args.step != "output":
        raise FloatRefError("--grad-output judges gradients of the output: drop --step weights")


def _judge_grads(args: argparse.Namespace, Q, K, V, dO, out, lse, kwargs: dict):
    """The kernel's dQ, dK, dV against the correctly rounded gradients (or the conditional recipe,
    or an fp8 recipe beside the true gradients)."""
    from symattn import floatref
    from symattn.testing.gradients import grads_report

    dq, dk, dv = (_load(p, f"the kernel's {n} (--{n.lower()})") for p, n in
                  ((args.dq, "dQ"), (args.dk, "dK"), (args.dv, "dV")))
    dtype = args.dtype or floatref.format_of(dq)
    max_ulp = 8.0 if args.max_ulp is None else args.max_ulp
    if args.recipe is not None:
        from symattn.testing.recipe import make_recipe, recipe_grads_report

        recipe = make_recipe(args.recipe, dict(args.recipe_option))
        return recipe_grads_report(dq, dk, dv, Q, K, V, dO, out=out, lse=lse, recipe=recipe, dtype=dtype,
                                   max_ulp=max_ulp, ulp_scale=args.ulp_scale, worst=args.worst, **kwargs)
    given = {"out": out, "lse": lse} if args.conditional else None
    return grads_report(dq, dk, dv, Q, K, V, dO, given=given, dtype=dtype, max_ulp=max_ulp,
                        ulp_scale=args.ulp_scale, worst=args.worst, **kwargs)


def _judge_extras(args: argparse.Namespace, Q, K, V, dO, kwargs: dict):
    """The kernel's dS, dP, D (those given) against the correctly rounded ones."""
    from symattn import floatref
    from symattn.floatref import FloatRefError
    from symattn.testing.extras import extras_report

    if kwargs["mask_value"] is not None:
        raise FloatRefError("--ds, --dp, --delta are judged against the exact dS, dP, D, which have no finite "
                            "sentinel: drop --mask-value=X")
    got = {n: _load(p, f"the kernel's {n} ({flag})") for (flag, p), n in zip(_extra_flags(args), ("dS", "dP", "D"))
           if p}
    dtype = args.dtype or floatref.format_of(next(iter(got.values())))
    return extras_report(got, Q, K, V, dO, dtype=dtype, max_ulp=8.0 if args.max_ulp is None else args.max_ulp,
                         ulp_scale=args.ulp_scale, worst=args.worst,
                         **{k: v for k, v in kwargs.items() if k != "mask_value"})


def _judge_lse(lse, path: str, Q, K, V, dtype: str | None, base: str, kwargs: dict):
    """The LSE file against the correctly rounded LSE in its own format (or --dtype)."""
    from symattn import floatref
    from symattn.floatref import FloatRefError
    from symattn.floatref.lse import LSEReport

    lse_dtype = dtype or floatref.format_of(lse)
    ref = floatref.correctly_rounded(Q, K, V, dtype=lse_dtype, return_lse=True, lse_dtype=lse_dtype, **kwargs)
    if lse.shape != ref.lse.shape:
        raise FloatRefError(f"--lse {path} has shape {tuple(lse.shape)}, but one value per query row is "
                            f"{tuple(ref.lse.shape)}: save the kernel's LSE of every (batch…, head, query)")
    return LSEReport(lse, ref, base)


def _lse_text(rep, max_ulp: float | None) -> str:
    name = "natural (base e)" if rep.base == "e" else "base 2"
    lines = ["", f"LSE ({name}, {rep.fmt}) against the correctly rounded LSE, per query row",
             f"  rows: {int(rep.live.sum())} (fully masked rows skipped); max distance "
             f"{rep.max_ulps:.3g} ulp (the exact error is within ½ ulp of it)"]
    if rep.nonfinite.any():
        lines.append(f"  inf or NaN on {int(rep.nonfinite.sum())} rows that have keys")
    for at, g, w, u in rep.worst():
        lines.append(f"  {list(at)}: got {g!r}, correctly rounded {w!r}, {u:+.3g} ulp")
    if max_ulp is not None:
        bad = int(rep.over(max_ulp).sum())
        lines.append(f"  {'FAIL' if bad else 'PASS'}: {bad} rows proved more than {max_ulp:g} ulp away")
        if bad and rep.matches_other_base(max_ulp):
            other = "2" if rep.base == "e" else "e"
            lines.append(f"  the LSE matches base {other} instead: the kernel mixes up the bases "
                         f"(--lse-base {other} if that is what it stores)")
    return "\n".join(lines) + "\n"


def _write_reference(args: argparse.Namespace, Q, K, V, dO, out, lse, kwargs: dict, dtype: str, judged: dict):
    """--write-reference: REF.npz (the forward, as before; returns the SDPAReference) or a folder
    of .npy files (symattn.testing.reference_folder; returns the names written)."""
    from symattn import floatref
    from symattn.floatref import FloatRefError
    from symattn.output.files import write_atomically

    if args.write_reference.lower().endswith(".npz"):
        import numpy as np

        ref = floatref.correctly_rounded(Q, K, V, dtype=dtype, return_lse=True, **kwargs)
        buffer = io.BytesIO()
        np.savez(buffer, output=ref.output, weights=ref.weights, fully_masked=ref.fully_masked,
                 lse=ref.lse, lse2=ref.lse2)
        write_atomically(buffer.getvalue(), args.write_reference, error=FloatRefError)
        return ref
    from symattn.testing.reference_folder import MANIFEST, reference_files, write_reference_folder

    arrays: dict = {}
    if args.recipe is None:     # with --recipe, Q, K, V are stored fp8 tensors: no forward of them is asked
        ref = floatref.correctly_rounded(Q, K, V, dtype=dtype, return_lse=True, **kwargs)
        lse_fmt = ref.lse_dtype or dtype
        arrays.update(out=(ref.output, dtype), weights=(ref.weights, dtype), lse=(ref.lse, lse_fmt),
                      lse2=(ref.lse2, lse_fmt), fully_masked=(ref.fully_masked, None))
    about: dict = {"written_by": "symattn floatref", "dtype": dtype,
                   "inputs": {n: p for n, p in (("Q", args.Q), ("K", args.K), ("V", args.V), ("dO", args.grad_output),
                                                ("out", args.candidate), ("lse", args.lse), ("mask", args.mask))
                              if p is not None},
                   **{k: v for k, v in kwargs.items() if k != "attn_mask"}}
    if dO is not None:
        arrays.update(_backward_arrays(args, Q, K, V, dO, out, lse, kwargs, dtype, judged.get("backward"), about))
    contents = reference_files(arrays, about)
    write_reference_folder(args.write_reference, contents)
    return sorted(contents) + [MANIFEST]


def _backward_arrays(args: argparse.Namespace, Q, K, V, dO, out, lse, kwargs: dict, dtype: str, grads,
                     about: dict) -> dict:
    """The gradients' files: dq, dk, dv and ds, dp, delta (plain); dq, dk, dv (--conditional); the
    recipe's dq, dk, dv, p8, ds8 and the true_dq, true_dk, true_dv (--recipe)."""
    from symattn.floatref.backward import correctly_rounded_backward

    if args.recipe is not None:
        from symattn.floatref.fp8_backward import fp8_backward_reference
        from symattn.testing.recipe import make_recipe, recipe_fields

        recipe = grads.recipe if grads is not None else make_recipe(args.recipe, dict(args.recipe_option))
        g = grads.gate.fmt if grads is not None else dtype
        res = grads.result if grads is not None else fp8_backward_reference(
            Q, K, V, dO, out=out, lse=lse, recipe=recipe, dtype=g, **kwargs)
        about.update(dtype=g, recipe={"name": recipe.name, **{f: getattr(recipe, f) for f in recipe_fields(recipe.name)}})
        return {**{n.lower(): (getattr(res.recipe, n), g) for n in ("dQ", "dK", "dV")},
                **{"true_" + n.lower(): (getattr(res.true, n), g) for n in ("dQ", "dK", "dV")},
                "p8": (res.P8, recipe.p_format), "ds8": (res.dS8, recipe.ds_format)}
    g = grads.fmt if grads is not None else dtype
    about.update(dtype=g)
    if args.conditional:
        b = grads.reference if grads is not None else correctly_rounded_backward(
            Q, K, V, dO, dtype=g, given={"out": out, "lse": lse}, **kwargs)
        return {n.lower(): (getattr(b, n), g) for n in ("dQ", "dK", "dV")}
    b = correctly_rounded_backward(Q, K, V, dO, dtype=g, extras=("dS", "dP", "D"), **kwargs)
    return {**{n.lower(): (getattr(b, n), g) for n in ("dQ", "dK", "dV")},
            "ds": (b.dS, g), "dp": (b.dP, g), "delta": (b.D, g)}


def _written_text(written, dtype: str, args: argparse.Namespace, fmt: str) -> str:
    """What --write-reference wrote, when nothing was judged."""
    if not isinstance(written, list):
        return _reference_text(written, dtype, args.write_reference, fmt, args)
    if fmt == "json":
        return json.dumps({"dtype": dtype, "written": args.write_reference, "files": written}, indent=2) + "\n"
    return (f"correctly rounded references written to {args.write_reference} (every entry proved; "
            f"what each file holds: reference.json):\n" + "".join(f"  {n}\n" for n in written))


def _reference_text(ref, dtype: str, written: str, fmt: str, args: argparse.Namespace) -> str:
    """What --write-reference wrote, in the chosen format (JSON: the summary's keys, as before)."""
    if fmt == "json":
        summary = {"dtype": dtype, "output_shape": list(ref.output.shape),
                   "weights_shape": list(ref.weights.shape), "entries": ref.entries,
                   "arb_entries": ref.arb_entries, "fully_masked_rows": int(ref.fully_masked.sum()),
                   "written": written}
        return json.dumps(summary, indent=2) + "\n"
    from symattn.document.build.floatref import build_reference_document
    from symattn.document.formats import print_document

    return print_document(build_reference_document(ref, dtype, written), fmt, fragment=args.fragment,
                          paper=paper(args))
