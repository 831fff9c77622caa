"""``symattn floatref --grad-output dO.npy --ds --dp --delta`` (issue 21, scope 6): a kernel's dS, dP
and D judged against the correctly rounded ones on the command line, in-process through
``symattn.cli.main``.

The reference written for the tests: the backward pass in mpmath at 50 digits from its
definitions (P, O, dP = dO·Vᵀ, D = rowsum(dO∘O), dS = P∘(dP − D), dQ, dK, dV), rounded with
the round-to-nearest-even of Fractions of tests/test_floatref_fp8_recipe.py.  The kernels are
numpy float64 passes, one right and one that forgets D in dS."""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest

from symattn.cli import main

from test_floatref_fp8_recipe import frac, rne


def mp_backward(Q, K, V, dO, allowed=None, dps=50):
    """The exact-enough backward of (H, L, E) arrays: {out, lse, dQ, dK, dV, dS, dP, D} as mpf arrays."""
    H, L, E = Q.shape
    S, Ev = K.shape[1], V.shape[2]
    f = lambda x: mpmath.mpf(frac(x).numerator) / frac(x).denominator  # noqa: E731
    r = {n: np.zeros(shape, dtype=object) for n, shape in (
        ("out", (H, L, Ev)), ("lse", (H, L)), ("dQ", (H, L, E)), ("dK", (H, S, E)), ("dV", (H, S, Ev)),
        ("dS", (H, L, S)), ("dP", (H, L, S)), ("D", (H, L)))}
    with mpmath.workdps(dps):
        for a in r.values():
            a.fill(mpmath.mpf(0))
        s = 1 / mpmath.sqrt(E)
        for h in range(H):
            for i in range(L):
                keys = [j for j in range(S) if allowed is None or allowed[h, i, j]]
                t = {j: s * sum(f(Q[h, i, e]) * f(K[h, j, e]) for e in range(E)) for j in keys}
                z = sum(mpmath.exp(x) for x in t.values())
                P = {j: mpmath.exp(x) / z for j, x in t.items()}
                r["lse"][h, i] = mpmath.log(z)
                for c in range(Ev):
                    r["out"][h, i, c] = sum(P[j] * f(V[h, j, c]) for j in keys)
                r["D"][h, i] = sum(f(dO[h, i, c]) * r["out"][h, i, c] for c in range(Ev))
                for j in range(S):
                    r["dP"][h, i, j] = sum(f(dO[h, i, c]) * f(V[h, j, c]) for c in range(Ev))
                for j in keys:
                    ds = P[j] * (r["dP"][h, i, j] - r["D"][h, i])
                    r["dS"][h, i, j] = ds
                    for c in range(Ev):
                        r["dV"][h, j, c] += P[j] * f(dO[h, i, c])
                    for e in range(E):
                        r["dQ"][h, i, e] += s * ds * f(K[h, j, e])
                        r["dK"][h, j, e] += s * ds * f(Q[h, i, e])
    return r


def rounded(a, fmt):
    """Each mpf entry rounded to nearest even in ``fmt`` (as float64)."""
    return np.vectorize(lambda x: rne(frac(x), fmt), otypes=[np.float64])(a)


def kernel(Q, K, V, dO, causal, bug=None):
    """dS, dP, D in numpy float64 (``bug="no-D"``: dS = P∘dP)."""
    q, k, v, do = (a.astype(np.float64) for a in (Q, K, V, dO))
    t = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        t = np.where(np.tril(np.ones(t.shape[-2:], bool)), t, -np.inf)
    P = np.exp(t - t.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    dP = do @ np.swapaxes(v, -1, -2)
    D = (do * (P @ v)).sum(-1)
    dS = P * dP if bug == "no-D" else P * (dP - D[..., None])
    return {"ds": dS, "dp": dP, "delta": D}


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(21)
    Q, K, V, dO = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(4))
    for name, a in zip(("Q", "K", "V", "dO"), (Q, K, V, dO)):
        np.save(tmp_path / f"{name}.npy", a)
    for bug in (None, "no-D"):
        for name, a in kernel(Q, K, V, dO, True, bug).items():
            np.save(tmp_path / f"{name}{'' if bug is None else '_bad'}.npy", a.astype(np.float32))
    return tmp_path, (Q, K, V, dO)


def argv(tmp, suffix="", *more, names=("ds", "dp", "delta")):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--grad-output", str(tmp / "dO.npy"), "--causal",
            *(x for n in names for x in (f"--{n}", str(tmp / f"{n}{suffix}.npy"))), *more]


def test_a_right_kernel_passes_and_the_reference_values_are_right(files, capsys):
    tmp, (Q, K, V, dO) = files
    assert main(argv(tmp, "", "--max-ulp", "2", "--json")) == 0
    data = json.loads(capsys.readouterr().out)["extras"]
    assert data["passed"] and data["format"] == "float32" and data["ulp_scale"] == "magnitude"
    allowed = np.broadcast_to(np.tril(np.ones((3, 3), bool)), (2, 3, 3))
    want = {n: rounded(a, "float32") for n, a in mp_backward(Q, K, V, dO, allowed).items() if n in ("dS", "dP", "D")}
    for name, shape in (("dS", (2, 3, 3)), ("dP", (2, 3, 3)), ("D", (2, 3))):
        g = data["intermediates"][name]
        assert g["entries"] == int(np.prod(shape)) and g["over_max_ulp"] == 0 and g["max_ulps"] <= 2.5
        assert len(g["worst"]) == 5
        for w in g["worst"]:
            assert w["correctly_rounded"] == want[name][tuple(w["index"])], (name, w)
    # dS is 0 exactly on the blocked keys: the causal mask's upper triangle
    assert all(w["correctly_rounded"] == 0 for w in data["intermediates"]["dS"]["worst"]
               if w["index"][2] > w["index"][1])


def test_a_kernel_that_forgets_D_fails_naming_the_worst_dS(files, capsys):
    tmp, (Q, K, V, dO) = files
    assert main(argv(tmp, "_bad", "--max-ulp", "8", names=("ds",))) == 1
    out = capsys.readouterr().out
    assert "FAIL: entries proved more than 8 ulps of scale away (dS " in out
    worst = [line for line in out.splitlines() if line.strip().startswith("dS[")]
    assert worst and "(1024, inf]" in out
    # the worst named entry is the one a float64 computation finds furthest off
    good, bad = kernel(Q, K, V, dO, True)["ds"], kernel(Q, K, V, dO, True, "no-D")["ds"].astype(np.float32)
    at = np.unravel_index(np.argmax(np.abs(bad - good)), bad.shape)
    assert worst[0].strip().startswith(f"dS{list(int(i) for i in at)}: got {bad[at]:.9g}")
    # dP and D of the same kernel are right
    assert main(argv(tmp, "_bad", "--max-ulp", "8", "--json", names=("dp", "delta"))) == 0
    assert json.loads(capsys.readouterr().out)["extras"]["passed"]


def test_beside_the_gradients(files, capsys):
    tmp, (Q, K, V, dO) = files
    from test_testing_grads import backward

    for name, a in zip(("dq", "dk", "dv"), backward(Q, K, V, dO, causal="top_left")):
        np.save(tmp / f"{name}.npy", a.astype(np.float32))
    grads = [x for n in ("dq", "dk", "dv") for x in (f"--{n}", str(tmp / f"{n}.npy"))]
    assert main(argv(tmp, "", *grads, "--max-ulp", "8", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backward"]["passed"] and data["extras"]["passed"]


@pytest.mark.parametrize("change, words", [
    ("ds-shape", "the candidate dS has shape (2, 3, 2), but the reference's is (2, 3, 3)"),
    ("ds-nan", "the candidate dS holds inf or NaN (first at [0, 1, 2])"),
    ("no-grad-output", "--ds judges gradients: give --grad-output dO.npy"),
    ("conditional", "--ds is judged against the plain reference"),
    ("html", "--ds is reported as text or JSON"),
    ("mask-value", "drop --mask-value=X"),
    ("complex", "is complex, not real numbers"),
])
def test_bad_files_and_flags_are_one_line_errors(files, capsys, change, words):
    tmp, _ = files
    args = argv(tmp, names=("ds",))
    if change == "ds-shape":
        np.save(tmp / "ds.npy", np.load(tmp / "ds.npy")[..., :2])
    elif change == "ds-nan":
        a = np.load(tmp / "ds.npy")
        a[0, 1, 2] = np.nan
        np.save(tmp / "ds.npy", a)
    elif change == "no-grad-output":
        args = args[:4] + args[6:]
    elif change == "conditional":
        args += ["--conditional", "--candidate", str(tmp / "dO.npy"), "--lse", str(tmp / "delta.npy")]
    elif change == "html":
        args += ["--format", "html"]
    elif change == "mask-value":
        args += ["--mask-value=-5e4"]
    else:
        np.save(tmp / "ds.npy", np.load(tmp / "ds.npy").astype(np.complex64))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--ds", "--dp", "--delta"])
@pytest.mark.parametrize("bad, words", [
    ("huge", "MAX_ARRAY_BYTES"),
    ("object", "object arrays are refused"),
])
def test_every_new_input_keeps_the_readers_caps(files, capsys, flag, bad, words):
    """dS, dP, D files go through the header-checked reader: a 7 TiB header or a pickle is refused."""
    from test_hostile_arrays import head, npy

    tmp, _ = files
    path = tmp / f"hostile-{bad}.npy"
    if bad == "huge":
        path.write_bytes(npy(head((1000000, 1000000))))
    else:
        path.write_bytes(npy(head((2,), descr="|O")) + b"\x80\x04N.")
    args = argv(tmp, names=()) + [flag, str(path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
