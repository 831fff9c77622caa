"""``symattn floatref``: a kernel's SDPA result against the exact values, in ULPs (or the reference)."""

from __future__ import annotations

import argparse
import io
import json
import math

from symattn.commands import Outcome, deprecated_alias, paper, pdf_or_text
from symattn.commands.heads import add_format_arguments, chosen_format

ORDER = 60


def _max_ulp(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-ulp must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"--max-ulp must be a finite number ≥ 0, got {text!r}")
    return value


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--scale must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"--scale must be finite, got {text!r}")
    return value


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
    parser.add_argument("--causal", action="store_true", help="is_causal=True (top-left)")
    parser.add_argument("--mask", metavar="M.npy", help="attn_mask: boolean (True = attend) or additive float")
    parser.add_argument("--scale", type=_scale, help="the scale (default 1/sqrt(E), exactly)")
    parser.add_argument("--gqa", action="store_true", help="enable_gqa=True")
    parser.add_argument("--dtype", choices=("float64", "float32", "bfloat16", "float16"),
                        help="the format (default: --candidate's dtype, else float32)")
    parser.add_argument("--max-ulp", type=_max_ulp, metavar="N",
                        help="exit 1 when some entry's error is proved to exceed N ulps")
    parser.add_argument("--worst", type=int, default=5, metavar="K", help="certify the K worst entries (default 5)")
    parser.add_argument("--write-reference", metavar="REF.npz",
                        help="write the correctly rounded output and weights (and fully_masked)")
    add_format_arguments(parser, json_help="the report as JSON (the keys of ULPReport.to_json)", latex_help="")
    parser.set_defaults(run=run)


def _load(path: str, what: str):
    """One array, its header checked against the caps before anything is allocated."""
    from symattn.floatref.arrays import read_array

    return read_array(path, what=what)


def run(args: argparse.Namespace) -> Outcome:
    from symattn import floatref
    from symattn.output.files import write_atomically
    from symattn.floatref import FloatRefError

    fmt = chosen_format(args)
    if args.max_ulp is not None and args.candidate is None:
        raise FloatRefError("--max-ulp judges --candidate: give --candidate OUT.npy")
    if args.worst < 0:
        raise FloatRefError(f"--worst is {args.worst}: give 0 or more")
    if args.candidate is None and not args.write_reference:
        raise FloatRefError("give --candidate OUT.npy to judge a result, or --write-reference REF.npz")
    Q, K, V = (_load(p, f"the {n} array") for p, n in ((args.Q, "Q"), (args.K, "K"), (args.V, "V")))
    kwargs = dict(attn_mask=None if args.mask is None else _load(args.mask, "the mask array"),
                  is_causal=args.causal, scale=args.scale, enable_gqa=args.gqa)
    out = None if args.candidate is None else _load(args.candidate, "the result array")
    dtype = args.dtype or (floatref.format_of(out) if out is not None else "float32")
    if out is not None:
        report = floatref.ulp_report(out, Q, K, V, step=args.step, dtype=dtype, worst=args.worst, **kwargs)
        status = 1 if args.max_ulp is not None and report.exceeds(args.max_ulp) else 0
    if args.write_reference:
        import numpy as np

        ref = floatref.correctly_rounded(Q, K, V, dtype=dtype, **kwargs)
        buffer = io.BytesIO()
        np.savez(buffer, output=ref.output, weights=ref.weights, fully_masked=ref.fully_masked)
        write_atomically(buffer.getvalue(), args.write_reference, error=FloatRefError)
        if out is None:
            return pdf_or_text(args, _reference_text(ref, dtype, args.write_reference, fmt, args))
    if fmt == "json":
        return Outcome(json.dumps(report.to_json(), indent=2) + "\n", status)
    from symattn.document.build.floatref import build_floatref_document
    from symattn.document.formats import print_document

    doc = build_floatref_document(report, max_ulp=args.max_ulp)
    return pdf_or_text(args, print_document(doc, fmt, fragment=args.fragment, paper=paper(args)), status)


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
