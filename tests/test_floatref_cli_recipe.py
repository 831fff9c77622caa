"""``symattn floatref --recipe cudnn_fp8_per_tensor`` (issue 21, scopes 4 and 6): an fp8 kernel's dQ,
dK, dV judged on the command line against the exact value of its own recipe, beside the true
gradients, in-process through ``symattn.cli.main``.

The reference written for the tests is tests/test_floatref_fp8_recipe.py's: the recipe in
mpmath at 60 digits and Fractions (``recipe_mp``), its kernel in numpy float64 with ml_dtypes'
casts (``fp8_kernel``, right or with P not rescaled); the true gradients of the descaled inputs
are a numpy float64 backward (tests/test_testing_grads.py)."""

# ruff: noqa: E741

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli import main

from test_floatref_fp8_recipe import RECIPE, forward, fp8_kernel, inputs, recipe_mp
from test_testing_grads import backward

OPTIONS = {"scale_s": 256.0, "scale_dp": 64.0, "descale_q": 0.5, "descale_do": 0.25, "scale_dq": 2.0, "scale_dv": 0.5}


@pytest.fixture
def files(tmp_path):
    Q, K, V, dO = inputs(5, H=2, L=4, S=4, E=2)
    O, lse = forward(Q, K, V, RECIPE)
    for name, a in dict(Q=Q, K=K, V=V, dO=dO, O=O, lse=lse).items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))        # fp8 values, exactly in float32
    for bug in (None, "p-not-rescaled"):
        for name, a in zip(("dq", "dk", "dv"), fp8_kernel(Q, K, V, O, dO, lse, RECIPE, bug=bug)):
            np.save(tmp_path / f"{name}{'' if bug is None else '_bad'}.npy", a)
    return tmp_path, (Q, K, V, dO, O, lse)


def argv(tmp, suffix="", *more, options=OPTIONS, lse=True):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--grad-output", str(tmp / "dO.npy"),
            "--candidate", str(tmp / "O.npy"), *(["--lse", str(tmp / "lse.npy")] if lse else []),
            "--recipe", "cudnn_fp8_per_tensor", *(x for k, v in options.items() for x in ("--recipe-option", f"{k}={v}")),
            *(x for n in ("dq", "dk", "dv") for x in (f"--{n}", str(tmp / f"{n}{suffix}.npy"))), *more]


def test_a_right_fp8_kernel_passes_against_its_recipe_beside_the_truth(files, capsys):
    tmp, (Q, K, V, dO, O, lse) = files
    assert main(argv(tmp, "", "--max-ulp", "1", "--ulp-scale", "entry", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"backward"}                 # O and the LSE are the recipe's inputs, not judged
    b = data["backward"]
    assert b["passed"] and b["format"] == "float32" and b["recipe"]["name"] == "cudnn_fp8_per_tensor"
    assert b["recipe"]["scale_s"] == 256.0 and b["recipe"]["descale_k"] == 1.0
    want, _, _ = recipe_mp(Q, K, V, O, dO, lse, RECIPE)
    for name in ("dQ", "dK", "dV"):
        g = b["gradients"][name]
        assert g["max_ulps"] <= 1.5 and g["worst"]
        for w in g["worst"]:
            assert w["correctly_rounded"] == want[name][tuple(w["index"])], (name, w)
    # beside: the candidates in real units against the true gradients of the descaled inputs
    real = [a.astype(np.float64) * d for a, d in ((Q, 0.5), (K, 1.0), (V, 1.0), (dO, 0.25))]
    true = backward(*real)
    got = [np.load(tmp / f"{n}.npy").astype(np.float64) / c for n, c in (("dq", 2.0), ("dk", 1.0), ("dv", 0.5))]
    for name, t, y in zip(("dQ", "dK", "dV"), true, got):
        err = b["true"]["gradients"][name]["max_abs_error"]
        assert err == pytest.approx(np.abs(y - t).max(), rel=1e-4), name
        assert 1e-4 < err / np.abs(t).max() < 0.2            # e4m3 P: off by its own algorithm, not a bug


def test_the_text_report_names_the_recipe_and_the_truth(files, capsys):
    tmp, _ = files
    assert main(argv(tmp, "", "--max-ulp", "8")) == 0
    out = capsys.readouterr().out
    assert "against the fp8 recipe cudnn_fp8_per_tensor (--recipe) on the kernel's stored Q, K, V, O" in out
    assert "Beside the recipe cudnn_fp8_per_tensor: the candidates / scale_dX against the true gradients" in out
    assert "PASS: no gradient entry is proved more than 8 ulp of scale away" in out
    assert main(argv(tmp, "", "--max-ulp", "8", "--format", "html")) == 0
    page = capsys.readouterr().out
    assert "<table" in page and "Beside the recipe cudnn_fp8_per_tensor" in page


def test_p_not_rescaled_is_rejected_naming_the_worst_dv(files, capsys):
    tmp, (Q, K, V, dO, O, lse) = files
    assert main(argv(tmp, "_bad", "--max-ulp", "8")) == 1
    out = capsys.readouterr().out
    assert "FAIL: entries proved more than 8 ulp of scale away (dV 16)" in out
    bad = np.load(tmp / "dv_bad.npy")
    want, _, _ = recipe_mp(Q, K, V, O, dO, lse, RECIPE)
    rows = [line.split() for line in out.splitlines() if line.startswith("dV[")]
    assert len(rows) == 5
    for entry, got, exact, *_ in rows:           # each named entry: the kernel's value and the recipe's
        at = tuple(int(i) for i in entry[3:-1].split(","))
        assert float(got) == bad[at] and float(exact) == want["dV"][at] and abs(bad[at]) > 100 * abs(want["dV"][at])
    # the right kernel judged with a descale left out (descale_q = 1) is rejected too: the options count
    assert main(argv(tmp, "", "--max-ulp", "8", "--json", options={k: v for k, v in OPTIONS.items()
                                                                  if k != "descale_q"})) == 1
    b = json.loads(capsys.readouterr().out)["backward"]
    assert b["recipe"]["descale_q"] == 1.0 and b["gradients"]["dQ"]["over_max_ulp"] > 0


def test_without_stats_the_exact_lse_is_used(files, capsys):
    tmp, (Q, K, V, dO, O, lse) = files
    assert main(argv(tmp, "", "--json", lse=False)) in (0, 1)
    b = json.loads(capsys.readouterr().out)["backward"]
    want, _, _ = recipe_mp(Q, K, V, O, dO, None, RECIPE)
    w = b["gradients"]["dV"]["worst"][0]
    assert w["correctly_rounded"] == want["dV"][tuple(w["index"])]


def test_the_parser_lists_the_library_recipes():
    from symattn.commands.floatref import RECIPE_NAMES
    from symattn.testing.recipe import RECIPES

    assert RECIPE_NAMES == tuple(RECIPES) and RECIPES["cudnn_fp8_per_tensor"]().name == "cudnn_fp8_per_tensor"


@pytest.mark.parametrize("change, words", [
    (["--recipe", "flash3"], "--recipe 'flash3' is not a known recipe: use cudnn_fp8_per_tensor"),
    (["--recipe-option", "scale_x=2"], "cudnn_fp8_per_tensor has no option 'scale_x'; its options are p_format, "),
    (["--recipe-option", "scale_s=-1"], "--recipe-option: scale_s is -1.0: give a finite positive float"),
    (["--recipe-option", "scale_s=big"], "--recipe-option scale_s=big: give a finite positive number"),
    (["--recipe-option", "p_format=float8"], "--recipe-option: p_format is 'float8'"),
    (["--recipe-option", "scale_s"], "--recipe-option takes FIELD=VALUE (e.g. scale_s=256), got 'scale_s'"),
    (["--conditional"], "--recipe judges against the recipe on the kernel's saved forward already"),
    (["--lse-base", "2"], "--recipe reads the kernel's stored forward"),
    (["--recipe-option", "scale_s=4096"], "overflows its fp8 format"),
    (["--recipe-option", "scale_dp=2", "--recipe-option", "scale_dp=4"],
     "--recipe-option scale_dp is given twice: give each option once"),
])
def test_bad_recipes_and_options_are_one_line_errors(files, capsys, change, words):
    tmp, _ = files
    field = change[1].partition("=")[0] if change[0] == "--recipe-option" else None
    assert main(argv(tmp, "", *change, options={k: v for k, v in OPTIONS.items() if k != field})) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("drop, words", [
    ("--candidate", "--recipe reads the kernel's stored forward: give --candidate O.npy"),
    ("--grad-output", "--recipe judges gradients: give --grad-output dO.npy"),
    ("--recipe", "--recipe-option sets an option of a recipe: give --recipe NAME too"),
])
def test_missing_inputs_are_one_line_errors(files, capsys, drop, words):
    tmp, _ = files
    args = argv(tmp)
    at = args.index(drop)
    del args[at:at + 2]
    if drop == "--grad-output":
        args = [a for a in args if a not in ("--dq", "--dk", "--dv") and not a.endswith(("dq.npy", "dk.npy", "dv.npy"))]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_the_recipes_budget_and_the_readers_caps(files, capsys):
    """The recipe's (query, key) pairs are capped (MAX_RECIPE_PAIRS) before any ball is made, and
    its O input goes through the header-checked reader."""
    from symattn.floatref.fp8_backward import MAX_RECIPE_PAIRS
    from test_hostile_arrays import head, npy

    tmp, _ = files
    n = int(np.sqrt(MAX_RECIPE_PAIRS)) + 1
    big = np.zeros((1, n, 2), dtype=np.float32)
    for name in ("Q", "K", "V", "dO", "O", "dq", "dk", "dv"):
        np.save(tmp / f"{name}.npy", big)
    assert main(argv(tmp, "", lse=False)) == 2
    err = capsys.readouterr().err
    assert "MAX_RECIPE_PAIRS" in err and len(err.strip().splitlines()) == 1
    (tmp / "O.npy").write_bytes(npy(head((1000000, 1000000))))
    assert main(argv(tmp, "", lse=False)) == 2
    assert "MAX_ARRAY_BYTES" in capsys.readouterr().err
