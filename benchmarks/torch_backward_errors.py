"""PyTorch SDPA's backward on CPU against the correctly rounded gradients: errors in ULPs
(issue 21, scope 8; the table in docs/floatref.md).

Not a test, and torch is never a dependency: run it where torch is importable, e.g. a venv
that also sees the system packages (symattn, numpy, python-flint):

    python3 -m venv --system-site-packages /work/venv-torch
    /work/venv-torch/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    PYTHONPATH=. /work/venv-torch/bin/python benchmarks/torch_backward_errors.py --markdown

For each shape, mask (none, causal) and dtype (float32, bfloat16: seeded standard normal Q, K, V
and dO rounded to the dtype), torch's default CPU backend and its math backend
(``sdpa_kernel(SDPBackend.MATH)``) run ``scaled_dot_product_attention`` forward and
``backward(dO)``; dQ, dK, dV (in the input dtype, as torch returns them) are measured against
``floatref.correctly_rounded_backward`` of the very same inputs (their binary values): the
largest distance in ulps of the entry itself and in ulps of the entry's scale (the sum of the
absolute values of its terms, the gate's default unit), the 99th percentile entry-ulp distance
and the share of entries that are the correct rounding.  One torch thread.
"""

from __future__ import annotations

import argparse
import sys

CASES = [
    # (name, (batch, heads, L, E), causal)
    ("(1, 4, 64, 32)", (1, 4, 64, 32), False),
    ("(1, 4, 64, 32)", (1, 4, 64, 32), True),
    ("(1, 4, 128, 64)", (1, 4, 128, 64), False),
    ("(1, 4, 128, 64)", (1, 4, 128, 64), True),
    ("(1, 2, 256, 64)", (1, 2, 256, 64), False),
    ("(1, 2, 256, 64)", (1, 2, 256, 64), True),
]
NAMES = ("dQ", "dK", "dV")


def ulp(x, fmt_name: str):
    """One ulp of each |x| in the format (the quantum of its binade; subnormal quantum below)."""
    import numpy as np

    from symattn.floatref.binary import BINARY_FORMATS

    fmt = BINARY_FORMATS[fmt_name]
    _, e = np.frexp(np.abs(np.asarray(x, dtype=np.float64)))
    return np.ldexp(1.0, np.maximum(e - 1, fmt.e_min) - fmt.p + 1)


def torch_grads(q, k, v, do, dtype, backend: str, causal: bool):
    """dQ, dK, dV from torch's SDPA (``backend`` 'default' or 'math') as float64 numpy arrays."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    Q, K, V = (torch.from_numpy(x).to(dtype).requires_grad_(True) for x in (q, k, v))
    dO = torch.from_numpy(do).to(dtype)
    if backend == "math":
        with sdpa_kernel(SDPBackend.MATH):
            out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    out.backward(dO)
    assert Q.grad is not None and K.grad is not None and V.grad is not None
    return [t.grad.double().numpy() for t in (Q, K, V)]


def run(markdown: bool) -> None:
    import numpy as np
    import torch

    from symattn.floatref.backward import correctly_rounded_backward

    torch.set_num_threads(1)
    rows = []
    for name, shape, causal in CASES:
        rng = np.random.default_rng(0)
        q, k, v, do = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
        for dtype, fmt in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
            # the inputs as the dtype holds them (bfloat16: rounded, then widened to float32 exactly)
            ins = [torch.from_numpy(x).to(dtype).float().numpy() for x in (q, k, v, do)]
            ref = correctly_rounded_backward(*ins, dtype=fmt, is_causal=causal)
            for backend in ("default", "math"):
                got = torch_grads(*ins, dtype, backend, causal)
                cells = []
                for g, n in zip(got, NAMES):
                    want = np.asarray(getattr(ref, n), dtype=np.float64)
                    err = np.abs(g - want)
                    entry = err / ulp(want, fmt)
                    of_scale = err / ulp(np.maximum(ref.scales[n], np.abs(want)), fmt)
                    cells += [f"{entry.max():.3g}", f"{np.percentile(entry, 99):.3g}", f"{of_scale.max():.3g}",
                              f"{100 * float((err == 0).mean()):.2f}%"]
                rows.append((name, "causal" if causal else "none", fmt, backend, *cells))
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    head = ["shape (B, H, L=S, E)", "mask", "dtype", "backend"]
    for n in NAMES:
        head += [f"{n} max ulp", f"{n} p99 ulp", f"{n} max ulp of scale", f"{n} correctly rounded"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, numpy {np.__version__}")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(r[i]) for r in rows + [tuple(head)]) for i in range(len(head))]
        for r in [tuple(head)] + rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("torch is not importable here: see the docstring for a venv with the CPU wheel") from None
    run(args.markdown)


if __name__ == "__main__":
    main()
