"""``symattn floatref --write-reference DIR`` (issue 21): the correctly rounded references written as
.npy files into a folder symattn owns, in-process through ``symattn.cli.main``.

Values against the mpmath backward of tests/test_floatref_cli_extras.py (50 digits, rounded
to nearest even by Fractions); the fp8 recipe's files against tests/test_floatref_fp8_recipe.py's
``recipe_mp``.  The folder's rules: built whole and swapped in, a user's files kept, a folder
symattn did not write refused, a file someone changed never replaced."""

# ruff: noqa: E741

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

from symattn.cli import main

from test_floatref_cli_extras import mp_backward, rounded
from test_floatref_fp8_recipe import RECIPE, forward, inputs, recipe_mp


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(8)
    Q = rng.standard_normal((2, 2, 4)).astype(np.float32)
    K, V, dO = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    dO = dO[:, :2]
    for name, a in zip(("Q", "K", "V", "dO"), (Q, K, V, dO)):
        np.save(tmp_path / f"{name}.npy", a)
    return tmp_path, (Q, K, V, dO)


def argv(tmp, target, *more):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--grad-output", str(tmp / "dO.npy"),
            "--write-reference", str(target), *more]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
def test_every_file_is_the_correctly_rounded_value(files, capsys, dtype):
    tmp, (Q, K, V, dO) = files
    target = tmp / "ref"
    # bottom-right causal with L = 2 < S = 3: query i sees keys j <= i + 1
    assert main(argv(tmp, target, "--causal", "bottom-right", "--dtype", dtype, "--json")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == str(target) and "dq.npy" in summary["files"]
    allowed = np.broadcast_to(np.tril(np.ones((2, 3), bool), k=1), (2, 2, 3))
    want = mp_backward(Q, K, V, dO, allowed)
    about = json.loads((target / "reference.json").read_text())
    assert about["dtype"] == dtype and about["causal_align"] == "bottom_right" and about["is_causal"]
    storage = {"float32": np.float32, "bfloat16": np.float32, "float8_e4m3fn": np.float16}[dtype]
    for stem, name in (("out", "out"), ("lse", "lse"), ("dq", "dQ"), ("dk", "dK"), ("dv", "dV"), ("ds", "dS"),
                       ("dp", "dP"), ("delta", "D")):
        got = np.load(target / f"{stem}.npy", allow_pickle=False)
        assert got.dtype == storage, stem
        np.testing.assert_array_equal(got.astype(np.float64), rounded(want[name], dtype), err_msg=stem)
        assert about["files"][f"{stem}.npy"]["format"] == dtype
        if dtype != "float32":
            bits = np.load(target / f"{stem}.bits.npy", allow_pickle=False)
            kind = ml_dtypes.bfloat16 if dtype == "bfloat16" else ml_dtypes.float8_e4m3fn
            assert bits.dtype == (np.uint16 if dtype == "bfloat16" else np.uint8)
            np.testing.assert_array_equal(bits.view(kind).astype(np.float64), got.astype(np.float64), err_msg=stem)
    weights = np.load(target / "weights.npy")
    assert (weights[..., 0, 2] == 0).all() and (weights[..., 0, :2] > 0).all() and (weights[..., 1, :] > 0).all()
    assert not np.load(target / "fully_masked.npy").any()
    listed = (target / "reference.txt").read_text().splitlines()
    assert listed[0].startswith("symattn floatref reference") and len(listed) == len(os.listdir(target))


def test_the_written_files_read_back_as_candidates(files, capsys):
    tmp, _ = files
    target = tmp / "ref"
    assert main(argv(tmp, target, "--dtype", "bfloat16")) == 0
    capsys.readouterr()
    back = ["--dq", "--dk", "--dv", "--ds", "--dp", "--delta"]
    more = [x for flag in back for x in (flag, str(target / f"{flag[2:]}.npy"))]
    assert main(["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--grad-output", str(tmp / "dO.npy"), *more,
                 "--candidate", str(target / "out.npy"), "--dtype", "bfloat16", "--max-ulp", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_ulps"] <= 0.5 and data["correctly_rounded"] == data["entries"] and data["backward"]["passed"] and data["extras"]["passed"]
    assert max(g["max_ulps"] for g in data["backward"]["gradients"].values()) == 0


def test_a_second_run_keeps_the_users_files_and_refuses_what_is_not_its_own(files, capsys, tmp_path):
    tmp, _ = files
    target = tmp / "ref"
    assert main(argv(tmp, target)) == 0
    (target / "notes.txt").write_text("mine")
    assert main(argv(tmp, target, "--dtype", "float16")) == 0       # replaced whole; notes.txt kept
    assert (target / "notes.txt").read_text() == "mine" and np.load(target / "dq.npy").dtype == np.float16
    assert not [e for e in os.listdir(tmp) if ".symattn-" in e]     # no staging folder left
    capsys.readouterr()
    mine = np.load(target / "dk.npy") + 1
    np.save(target / "dk.npy", mine)                                 # a file symattn wrote, changed since
    assert main(argv(tmp, target)) == 2
    err = capsys.readouterr().err
    assert "dk.npy was made or changed by someone else" in err and len(err.strip().splitlines()) == 1
    np.testing.assert_array_equal(np.load(target / "dk.npy"), mine)
    other = tmp / "other"
    other.mkdir()
    (other / "data.npy").write_bytes(b"x")
    assert main(argv(tmp, other)) == 2
    err = capsys.readouterr().err
    assert "is a folder symattn did not write (no reference.txt in it)" in err and len(err.strip().splitlines()) == 1
    assert os.listdir(other) == ["data.npy"]
    (tmp / "empty").mkdir()
    assert main(argv(tmp, tmp / "empty")) == 0                       # an empty folder is fine


@pytest.mark.parametrize("target, words", [
    ("file", "is a file, not a folder"),
    ("missing/ref", "the folder"),
    ("ref.npz", "holds the forward only: give a folder (--write-reference DIR) to write the gradients"),
])
def test_bad_targets_are_one_line_errors(files, capsys, target, words):
    tmp, _ = files
    (tmp / "file").write_text("x")
    assert main(argv(tmp, tmp / target)) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp / "file").read_text() == "x" and not (tmp / "ref.npz").exists()


def test_html_without_a_judgement_is_refused(files, capsys):
    tmp, _ = files
    assert main(argv(tmp, tmp / "ref", "--max-ulp", "4")) == 2            # nothing to judge
    assert "--max-ulp judges --candidate or --lse" in capsys.readouterr().err
    assert main(argv(tmp, tmp / "ref", "--format", "html")) == 2
    assert "(a folder) is reported as text or JSON" in capsys.readouterr().err
    assert not (tmp / "ref").exists()


def test_the_fp8_recipes_references(tmp_path, capsys):
    Q, K, V, dO = inputs(5, H=2, L=4, S=4, E=2)
    O, lse = forward(Q, K, V, RECIPE)
    for name, a in dict(Q=Q, K=K, V=V, dO=dO, O=O, lse=lse).items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
    options = {"scale_s": 256.0, "scale_dp": 64.0, "descale_q": 0.5, "descale_do": 0.25, "scale_dq": 2.0,
               "scale_dv": 0.5}
    args = [*argv(tmp_path, tmp_path / "ref"), "--candidate", str(tmp_path / "O.npy"), "--lse", str(tmp_path / "lse.npy"),
            "--recipe", "cudnn_fp8_per_tensor", *(x for k, v in options.items() for x in ("--recipe-option", f"{k}={v}"))]
    assert main(args) == 0
    want, P8, dS8 = recipe_mp(Q, K, V, O, dO, lse, RECIPE)
    ref = tmp_path / "ref"
    for stem, name in (("dq", "dQ"), ("dk", "dK"), ("dv", "dV")):
        np.testing.assert_array_equal(np.load(ref / f"{stem}.npy"), want[name].astype(np.float32), err_msg=stem)
    np.testing.assert_array_equal(np.load(ref / "p8.npy").astype(np.float64), P8)
    np.testing.assert_array_equal(np.load(ref / "ds8.npy").astype(np.float64), dS8)
    np.testing.assert_array_equal(np.load(ref / "p8.bits.npy").view(ml_dtypes.float8_e4m3fn).astype(np.float64), P8)
    np.testing.assert_array_equal(np.load(ref / "ds8.bits.npy").view(ml_dtypes.float8_e5m2).astype(np.float64), dS8)
    about = json.loads((ref / "reference.json").read_text())
    assert about["recipe"]["name"] == "cudnn_fp8_per_tensor" and about["recipe"]["scale_dq"] == 2.0
    assert not (ref / "out.npy").exists() and (ref / "true_dq.npy").exists()


def test_the_conditional_references(tmp_path, capsys):
    """--conditional: dq, dk, dv of FlashAttention's recipe on the kernel's own O and LSE (P = e^(t − lse),
    D = rowsum(dO∘O)), against that recipe in mpmath at 50 digits."""
    import mpmath

    from test_floatref_fp8_recipe import frac

    rng = np.random.default_rng(4)
    Q, K, V, dO = (rng.standard_normal((1, 3, 2)).astype(np.float32) for _ in range(4))
    t = Q.astype(np.float64) @ np.swapaxes(K, -1, -2) / np.sqrt(2)
    lse = np.log(np.exp(t).sum(-1)).astype(np.float32)
    O = (np.exp(t - lse[..., None]) @ V).astype(np.float32)
    for name, a in dict(Q=Q, K=K, V=V, dO=dO, O=O, lse=lse).items():
        np.save(tmp_path / f"{name}.npy", a)
    args = [*argv(tmp_path, tmp_path / "ref"), "--candidate", str(tmp_path / "O.npy"), "--lse",
            str(tmp_path / "lse.npy"), "--conditional"]
    assert main(args) == 0
    capsys.readouterr()
    f = lambda x: mpmath.mpf(frac(x).numerator) / frac(x).denominator  # noqa: E731
    want = {n: np.zeros((1, 3, 2), dtype=object) for n in ("dQ", "dK", "dV")}
    with mpmath.workdps(50):
        for a in want.values():
            a.fill(mpmath.mpf(0))
        s = 1 / mpmath.sqrt(2)
        for i in range(3):
            D = sum(f(dO[0, i, c]) * f(O[0, i, c]) for c in range(2))
            for j in range(3):
                P = mpmath.exp(s * sum(f(Q[0, i, e]) * f(K[0, j, e]) for e in range(2)) - f(lse[0, i]))
                dS = P * (sum(f(dO[0, i, c]) * f(V[0, j, c]) for c in range(2)) - D)
                for e in range(2):
                    want["dV"][0, j, e] += P * f(dO[0, i, e])
                    want["dQ"][0, i, e] += s * dS * f(K[0, j, e])
                    want["dK"][0, j, e] += s * dS * f(Q[0, i, e])
    for stem in ("dq", "dk", "dv"):
        got = np.load(tmp_path / "ref" / f"{stem}.npy")
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.astype(np.float64), rounded(want["d" + stem[1].upper()], "float32"))
    assert not (tmp_path / "ref" / "ds.npy").exists()
