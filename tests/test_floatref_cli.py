"""``symattn floatref`` in-process: the report, --json, the --max-ulp gate, --write-reference,
and one-line errors (exit 2) for bad files."""

import json

import mpmath
import pytest

from symattn.cli import main

np = pytest.importorskip("numpy")


@pytest.fixture
def arrays(tmp_path):
    rng = np.random.default_rng(8)
    Q, K, V = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    S = (Q @ np.swapaxes(K, 1, 2)) / np.float32(2)
    A = np.exp(S - S.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    np.save(tmp_path / "out.npy", A @ V)
    return tmp_path, Q, K, V, A @ V


def _files(tmp):
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV")]


def test_report_json_and_the_max_ulp_gate(arrays, capsys):
    tmp, Q, K, V, out = arrays
    assert main([*_files(tmp), "--candidate", str(tmp / "out.npy"), "--json", "--max-ulp", "1000"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "float32" and data["entries"] == out.size
    worst = data["max_ulps"]
    assert worst > 0.5                                  # numpy's float32 path is not exact here
    # the certified worst entry agrees with an independent mpmath value
    w = data["worst"][0]
    b, i, c = w["index"]
    with mpmath.workdps(50):
        s = [mpmath.fsum(mpmath.mpf(float(Q[b, i, t])) * mpmath.mpf(float(K[b, j, t])) for t in range(4)) / 2
             for j in range(3)]
        e = [mpmath.exp(x - max(s)) for x in s]
        x = mpmath.fsum(e[j] * mpmath.mpf(float(V[b, j, c])) for j in range(3)) / mpmath.fsum(e)
        ex = int(mpmath.floor(mpmath.log(abs(x), 2)))
        ulps = (mpmath.mpf(float(out[b, i, c])) - x) / mpmath.mpf(2) ** (ex - 23)
    assert abs(float(w["ulps"]) - float(ulps)) < 0.01 * abs(float(ulps)) + 0.01
    assert main([*_files(tmp), "--candidate", str(tmp / "out.npy"), "--max-ulp", str(worst / 2)]) == 1
    assert "FAIL: max |error|" in capsys.readouterr().out
    assert main([*_files(tmp), "--candidate", str(tmp / "out.npy"), "--max-ulp", str(worst + 1)]) == 0
    assert "worst entries (certified)" in capsys.readouterr().out


def test_write_reference(arrays, capsys):
    tmp, Q, K, V, out = arrays
    from symattn import floatref
    ref = floatref.correctly_rounded(Q, K, V, dtype="bfloat16", is_causal=True)
    target = tmp / "ref.npz"
    assert main([*_files(tmp), "--write-reference", str(target), "--dtype", "bfloat16", "--causal"]) == 0
    assert "correctly rounded" in capsys.readouterr().out
    saved = np.load(target)
    assert np.array_equal(saved["output"], ref.output) and np.array_equal(saved["weights"], ref.weights)
    assert saved["weights"][0, 0, 1] == 0                                   # causal


@pytest.mark.parametrize("make, words", [
    (lambda t: t.joinpath("x.npy").write_text("not numpy"), "not a .npy array"),
    (lambda t: t.joinpath("x.npy").mkdir(), "is a folder"),
    (lambda t: np.save(t / "x.npy", np.array([object()], dtype=object)), "object arrays are refused"),
    (lambda t: np.save(t / "x.npy", np.ones((2, 4, 4), dtype=np.float32)), "equal key counts"),
])
def test_bad_files_are_one_line_errors(arrays, capsys, make, words):
    tmp = arrays[0]
    make(tmp)
    assert main(["floatref", str(tmp / "Q.npy"), str(tmp / "K.npy"), str(tmp / "x.npy"), "--candidate", str(tmp / "out.npy")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_max_ulp_needs_candidate(arrays, capsys):
    assert main([*_files(arrays[0]), "--max-ulp", "2"]) == 2
    assert "--candidate" in capsys.readouterr().err
