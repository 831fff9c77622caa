"""``symattn floatref`` with issue 21's flags: --causal top-left|bottom-right, --lse with
--lse-base, --mask-value, the fp8 dtypes; the LSE against mpmath; one-line errors (exit 2)."""

import json
import math

import mpmath
import pytest

from symattn import floatref
from symattn.cli import main

np = pytest.importorskip("numpy")


@pytest.fixture
def files(tmp_path):
    """L = 3 queries, S = 5 keys: top-left and bottom-right causal masks differ on every row."""
    rng = np.random.default_rng(21)
    Q = rng.standard_normal((2, 3, 4)).astype(np.float32)
    K = rng.standard_normal((2, 5, 4)).astype(np.float32)
    V = rng.standard_normal((2, 5, 2)).astype(np.float32)
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    ref = floatref.correctly_rounded(Q, K, V, is_causal=True, causal_align="bottom_right", return_lse=True)
    top = floatref.correctly_rounded(Q, K, V, is_causal=True, return_lse=True)
    np.save(tmp_path / "out.npy", ref.output)
    np.save(tmp_path / "top.npy", top.output)
    np.save(tmp_path / "lse.npy", ref.lse)
    np.save(tmp_path / "lse2.npy", ref.lse2)
    return tmp_path, Q, K, V, ref


def _cmd(tmp, *more):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), *more]


def test_lse_files_are_the_mpmath_values(files):
    tmp, Q, K, V, ref = files
    with mpmath.workdps(50):
        for b in range(2):
            for i in range(3):
                keys = range(i + 2 + 1)                       # bottom-right: j ≤ i + S − L
                t = [mpmath.fsum(mpmath.mpf(float(Q[b, i, a])) * mpmath.mpf(float(K[b, j, a]))
                                 for a in range(4)) / 2 for j in keys]
                lse = mpmath.log(mpmath.fsum(mpmath.exp(x) for x in t))
                assert abs(float(ref.lse[b, i]) - float(lse)) <= 2.0 ** -24 * abs(float(lse))
                assert abs(float(ref.lse2[b, i]) - float(lse / mpmath.log(2))) <= 2.0 ** -23 * abs(float(lse))


def test_causal_bottom_right_and_lse_base_two(files, capsys):
    tmp = files[0]
    args = _cmd(tmp, "--candidate", str(tmp / "out.npy"), "--lse", str(tmp / "lse2.npy"), "--lse-base", "2",
                "--causal", "bottom-right", "--max-ulp", "1")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "LSE (base 2, float32)" in text and "PASS: 0 rows" in text
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lse"]["base"] == "2" and data["lse"]["rows_over_max_ulp"] == 0 and data["max_ulps"] <= 0.5


def test_the_wrong_alignment_and_the_wrong_base_fail(files, capsys):
    tmp = files[0]
    assert main(_cmd(tmp, "--candidate", str(tmp / "top.npy"), "--causal", "bottom-right",
                     "--max-ulp", "4")) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(_cmd(tmp, "--candidate", str(tmp / "top.npy"), "--causal", "--max-ulp", "1")) == 0   # top-left
    capsys.readouterr()
    assert main(_cmd(tmp, "--lse", str(tmp / "lse2.npy"), "--causal", "bottom-right", "--max-ulp", "4")) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "matches base 2 instead" in text


def test_write_reference_holds_the_lse_and_fp8(files, capsys):
    tmp, Q, K, V, ref = files
    target = tmp / "ref.npz"
    assert main(_cmd(tmp, "--write-reference", str(target), "--causal=bottom-right", "--dtype",
                     "float8_e4m3fn")) == 0
    capsys.readouterr()
    saved = np.load(target)
    want = floatref.correctly_rounded(Q, K, V, dtype="float8_e4m3fn", is_causal=True,
                                      causal_align="bottom_right", return_lse=True)
    assert np.array_equal(saved["output"], want.output) and np.array_equal(saved["lse2"], want.lse2)


def test_mask_value_sentinel(files, capsys):
    tmp, Q, K, V, _ = files
    want = floatref.correctly_rounded(Q, K, V, is_causal=True, mask_value=-5e4, return_lse=True)
    np.save(tmp / "sent.npy", want.output)
    np.save(tmp / "sent_lse.npy", want.lse)
    assert main(_cmd(tmp, "--candidate", str(tmp / "sent.npy"), "--lse", str(tmp / "sent_lse.npy"),
                     "--causal", "--mask-value=-5e4", "--max-ulp", "0.5")) == 0
    capsys.readouterr()


@pytest.mark.parametrize("more, words", [
    (["--lse", "{tmp}/lse.npy", "--candidate", "{tmp}/out.npy", "--causal", "bottom-right", "--lse-base", "10"],
     "invalid choice: '10'"),
    (["--candidate", "{tmp}/out.npy", "--causal", "sideways"], "--causal takes top-left or bottom-right"),
    (["--candidate", "{tmp}/out.npy", "--mask-value=-inf"], "--mask-value must be finite"),
    (["--lse", "{tmp}/Q.npy"], "--lse {tmp}/Q.npy has shape (2, 3, 4), but one value per query row is (2, 3)"),
    (["--lse", "{tmp}/lse.npy", "--format", "html"], "--lse is reported as text or JSON"),
    (["--max-ulp", "2"], "give --candidate OUT.npy or --lse LSE.npy"),
])
def test_bad_input_is_one_line(files, capsys, more, words):
    tmp = files[0]
    status = main(_cmd(tmp, *(m.format(tmp=tmp) for m in more)))
    err = capsys.readouterr().err
    assert status == 2 and words.format(tmp=tmp) in err, err
    assert "Traceback" not in err and err.strip().count("\n") <= 1 + ("usage" in err) * 2
    assert math.isfinite(status)
