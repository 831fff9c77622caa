"""``symattn floatref --grad-output dO.npy --dq --dk --dv`` (issue 21): the gradients judged on the
command line, in-process through ``symattn.cli.main`` (one run as a subprocess), with the same
one-line errors and exit 2 for bad arrays as the forward's.

The kernels are numpy float64 backward passes (tests/test_testing_grads.py); the worst entry's
exact value is checked against complex-step derivatives of an mpmath forward
(tests/backward_reference.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from symattn.cli import main

from backward_reference import Ref, gradients
from test_testing_grads import backward

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(12)
    Q, K, V, dO = (rng.standard_normal((2, 3, 2)) for _ in range(4))
    for name, a in zip(("Q", "K", "V", "dO"), (Q, K, V, dO)):
        np.save(tmp_path / f"{name}.npy", a)
    for bug in (None, "no-D"):
        for name, a in zip(("dq", "dk", "dv"), backward(Q, K, V, dO, bug=bug)):
            np.save(tmp_path / f"{name}{'' if bug is None else '_bad'}.npy", a)
    return tmp_path, (Q, K, V, dO)


def _argv(tmp, suffix="", *more):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--grad-output", str(tmp / "dO.npy"),
            *(x for n in ("dq", "dk", "dv") for x in (f"--{n}", str(tmp / f"{n}{suffix}.npy"))), *more]


def test_json_a_right_backward_passes_and_the_exact_value_is_right(files, capsys):
    tmp, (Q, K, V, dO) = files
    assert main(_argv(tmp, "", "--max-ulp", "8", "--json")) == 0
    data = json.loads(capsys.readouterr().out)["backward"]
    assert data["passed"] and data["format"] == "float64" and not data["conditional"]
    g = data["gradients"]["dK"]
    assert g["entries"] == 12 and g["over_max_ulp"] == 0 and sum(g["histogram"]) == 12 and g["max_ulps"] <= 8.5
    w = g["worst"][0]
    b, j, c = w["index"]
    exact = lambda A: [[Fraction(float(x)) for x in row] for row in A]  # noqa: E731
    truth = gradients(Ref(Q=exact(Q[b]), K=exact(K[b]), V=exact(V[b]), grad_output=exact(dO[b])), dps=40)
    with mpmath.workdps(40):
        assert abs(mpmath.mpf(w["exact"]) - truth["d_K"][j][c]) < mpmath.mpf(10) ** -18
    assert 0 < g["max_error_relative_to_max_abs"] < 1e-14 and 0 < g["max_error_relative_to_scale"] < 1e-14


def test_text_a_wrong_backward_fails_with_exit_1(files, capsys):
    tmp, _ = files
    assert main(_argv(tmp, "_bad", "--max-ulp", "8")) == 1
    out = capsys.readouterr().out
    assert "Errors of float64 SDPA gradients" in out and "FAIL: entries proved more than 8 ulp of scale away" in out
    assert "dQ[" in out and "κ entry, row" in out and "(1024, inf]" in out
    assert main(_argv(tmp, "_bad", "--max-ulp", "8", "--format", "html")) == 1
    assert "<table" in capsys.readouterr().out


def test_conditional_on_the_kernels_saved_forward(tmp_path, capsys):
    rng = np.random.default_rng(4)
    Q, K, V, dO = (rng.standard_normal((1, 3, 2)).astype(np.float32) for _ in range(4))
    s = 1 / np.sqrt(2)
    t = s * Q.astype(np.float64) @ np.swapaxes(K, -1, -2)
    lse = np.log(np.exp(t).sum(-1)).astype(np.float32)
    P = np.exp(t - lse[..., None])
    O = (P @ V).astype(np.float32)  # noqa: E741
    dS = P * (dO @ np.swapaxes(V, -1, -2) - (dO * O.astype(np.float64)).sum(-1, keepdims=True))
    grads = {"dq": s * dS @ K, "dk": s * np.swapaxes(dS, -1, -2) @ Q, "dv": np.swapaxes(P, -1, -2) @ dO}
    for name, a in {**grads, "Q": Q, "K": K, "V": V, "dO": dO, "O": O, "lse": lse}.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
    more = ["--candidate", str(tmp_path / "O.npy"), "--lse", str(tmp_path / "lse.npy"), "--max-ulp", "2", "--json"]
    assert main(_argv(tmp_path, "", *more, "--conditional")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backward"]["conditional"] and data["backward"]["passed"] and data["format"] == "float32"


@pytest.mark.parametrize("change, words", [
    ("dk-shape", "dK has shape (2, 2, 3), but the gradient's is (2, 3, 2)"),
    ("dq-nan", "the candidate dQ holds inf or NaN (first at [0, 1, 0])"),
    ("dO-complex", "is complex, not real numbers"),
    ("dO-shape", "dO has shape (2, 3, 1)"),
    ("no-dv", "--grad-output judges the kernel's gradients: give --dv too"),
    ("dq-alone", "--dq judges gradients: give --grad-output dO.npy"),
    ("conditional-no-lse", "--conditional reads the kernel's saved forward"),
])
def test_bad_arrays_and_flags_are_one_line_errors(files, capsys, change, words):
    tmp, (Q, K, V, dO) = files
    argv = _argv(tmp)
    if change == "dk-shape":
        np.save(tmp / "dk.npy", np.swapaxes(np.load(tmp / "dk.npy"), -1, -2))
    elif change == "dq-nan":
        a = np.load(tmp / "dq.npy")
        a[0, 1, 0] = np.nan
        np.save(tmp / "dq.npy", a)
    elif change == "dO-complex":
        np.save(tmp / "dO.npy", dO.astype(np.complex64))
    elif change == "dO-shape":
        np.save(tmp / "dO.npy", dO[..., :1])
    elif change == "no-dv":
        argv = argv[:-2]
    elif change == "dq-alone":
        argv = argv[:4] + ["--dq", str(tmp / "dq.npy")]
    else:
        argv = argv + ["--conditional", "--candidate", str(tmp / "dq.npy")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_as_a_subprocess(files):
    tmp, _ = files
    done = subprocess.run([sys.executable, "-m", "symattn", *_argv(tmp, "_bad", "--max-ulp", "8", "--json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)["backward"]
    assert not data["passed"] and data["gradients"]["dQ"]["over_max_ulp"] > 0 and data["gradients"]["dV"]["over_max_ulp"] == 0
