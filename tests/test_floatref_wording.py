"""The floatref summary says what its 0.5 ulp means (issue 25): the reference is the exact
value (correctly rounded is within 0.5 ulp of it), and the resolution is how well each
error figure is known, never a bound that a 9,454-ulp maximum seems to contradict."""

import pytest

from symattn.cli import main

np = pytest.importorskip("numpy")


def test_summary_words_the_half_ulp_and_the_resolution(tmp_path, capsys):
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((1, 3, 4)).astype(np.float32) for _ in range(3))
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    bad = np.zeros((1, 3, 4), dtype=np.float32) + np.float32(0.5)   # far off: thousands of ulps
    np.save(tmp_path / "bad.npy", bad[..., :4])
    files = [str(tmp_path / f"{n}.npy") for n in "QKV"]
    assert main(["floatref", *files, "--candidate", str(tmp_path / "bad.npy"), "--max-ulp", "1e12"]) == 0
    out = capsys.readouterr().out
    assert "errors within" not in out and "each error within" not in out
    assert "a correctly rounded result is within 0.5 ulp of it" in out
    assert "each error figure certified to ±" in out
    line = next(x for x in out.splitlines() if "max |error|" in x)
    assert float(line.split("max |error| ")[1].split(" ulp")[0]) > 1000
