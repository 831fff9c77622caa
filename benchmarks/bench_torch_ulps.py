"""PyTorch SDPA on CPU against the exact values: errors in ULPs (a finding for docs/floatref.md).

Not a test, and torch is never a dependency: run it where torch is importable, e.g. in a
venv that also sees the system packages (symattn, numpy, python-flint):

    python3 -m venv --system-site-packages /work/venv-torch
    /work/venv-torch/bin/pip install torch          # the CPU wheel
    PYTHONPATH=. /work/venv-torch/bin/python benchmarks/bench_torch_ulps.py [--markdown]

For each shape, mask and dtype (float32 and bfloat16 inputs, seeded standard normal; the
output in the input's dtype, as torch returns it), torch's default CPU backend and its
math backend (``sdpa_kernel(SDPBackend.MATH)``) are run, and
``symattn.floatref.ulp_report`` measures the output against the exact SDPA of the very
same inputs (their binary values): max, mean, median and 99th percentile |error| in
ulps, the share of entries that are the correct rounding, and the max relative error.
"""

from __future__ import annotations

import argparse
import sys

CASES = [
    # (name, (batch, q heads, kv heads, L, S, E), mask)
    ("no mask", (1, 4, 4, 256, 256, 64), None),
    ("causal", (1, 4, 4, 256, 256, 64), "causal"),
    ("boolean mask (70% kept)", (1, 4, 4, 256, 256, 64), "bool"),
    ("GQA 8 → 2 heads, causal", (1, 8, 2, 256, 256, 64), "causal"),
    ("long: L = S = 1024", (1, 2, 2, 1024, 1024, 64), None),
    ("E = 128", (1, 2, 2, 256, 256, 128), None),
]


def run(markdown: bool) -> None:
    import numpy as np
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from symattn.floatref import ulp_report

    rows = []
    for name, (b, hq, hkv, L, S, E), mask in CASES:
        rng = np.random.default_rng(0)
        q = rng.standard_normal((b, hq, L, E)).astype(np.float32)
        k = rng.standard_normal((b, hkv, S, E)).astype(np.float32)
        v = rng.standard_normal((b, hkv, S, E)).astype(np.float32)
        kwargs = {}
        if mask == "causal":
            kwargs["is_causal"] = True
        elif mask == "bool":
            m = rng.random((L, S)) < 0.7
            m[:, 0] = True
            kwargs["attn_mask"] = m
        if hq != hkv:
            kwargs["enable_gqa"] = True
        for dtype in (torch.float32, torch.bfloat16):
            Q, K, V = (torch.from_numpy(x).to(dtype) for x in (q, k, v))
            tkw = dict(kwargs)
            if "attn_mask" in tkw:
                tkw["attn_mask"] = torch.from_numpy(tkw["attn_mask"])
            for backend in ("default", "math"):
                with torch.no_grad():
                    if backend == "math":
                        with sdpa_kernel(SDPBackend.MATH):
                            out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, **tkw)
                    else:
                        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, **tkw)
                report = ulp_report(out, Q, K, V, worst=0, **kwargs)
                # the max is set by outputs near 0 (tiny ulps): the percentiles show the bulk
                exact = np.asarray(report.errors)
                p50, p99 = np.nanpercentile(np.abs(exact), [50, 99])
                rows.append((name, f"({b}, {hq}, {L}, {E})", str(dtype)[6:], backend,
                             f"{report.max_ulps:.3g}", f"{report.mean_ulps:.3g}", f"{p50:.3g}",
                             f"{p99:.3g}", f"{100 * report.correctly_rounded / report.entries:.2f}%",
                             f"{report.max_relative:.2e}"))
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    head = ("case", "(batch, heads, L, E)", "dtype", "backend", "max ulp", "mean ulp",
            "median ulp", "99th pct ulp", "correctly rounded", "max rel. error")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
        for r in [head] + rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("torch is not importable here: see the docstring for a venv with the CPU wheel")
    run(args.markdown)


if __name__ == "__main__":
    main()
