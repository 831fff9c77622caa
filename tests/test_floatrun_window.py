"""Window edges as a risky-row pattern (issue 22, scope item 4: "window edges"): the rows where
a sliding window's first key starts to move are sampled with +risky and named as the pattern
of a failing row in the report.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli import main
from symattn.floatrun.sampling import risky_rows

pytest.importorskip("safetensors")


def window(L: int, W: int) -> np.ndarray:
    return np.array([[i - W < j <= i for j in range(L)] for i in range(L)])


def edges_by_hand(allowed: np.ndarray) -> list[int]:
    """Independently: the rows whose first allowed key is right of the row before's, while the
    row before's was not right of the one before it (where the left edge starts to move)."""
    first = [list(r).index(True) if r.any() else None for r in allowed]
    moved = [i > 0 and first[i] is not None and first[i - 1] is not None and first[i] > first[i - 1]
             for i in range(len(first))]
    return [i for i in range(len(first)) if moved[i] and not (i > 0 and moved[i - 1])]


@pytest.mark.parametrize("allowed", [
    window(12, 4),                                            # slides from row 4 on
    window(12, 1),                                            # the diagonal alone: from row 1
    np.kron(np.eye(3, dtype=bool), np.tril(np.ones((4, 4), dtype=bool))),   # block-local: rows 4, 8
    np.tril(np.ones((12, 12), dtype=bool)),                   # causal: the first key never moves
])
def test_window_edges_are_where_the_first_key_starts_to_move(allowed):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    risky = risky_rows(q, k, {"causal": None, "mask": allowed, "scale": None})
    want = edges_by_hand(allowed)
    assert risky.get("window edge", []) == want
    assert bool(want) == ("window edge" in risky)


def test_a_kernel_wrong_at_the_window_edge_is_caught_by_sampling_and_named(tmp_path, capsys):
    L, W, E = 40, 8, 4
    allowed = window(L, W)
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((L, E)).astype(np.float32) for _ in range(3))
    s = np.where(allowed, (q.astype(np.float64) @ k.T.astype(np.float64)) / np.sqrt(E), -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    out = ((p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)).astype(np.float32)
    out[W] = (out[W].astype(np.float64) * (1 + 2.0 ** -12)).astype(np.float32)   # ~2,000 ulp at row 8
    dump = tmp_path / "dump"
    dump.mkdir()
    np.savez(dump / "L0.H0.npz", q=q, k=k, v=v, out=out)
    np.savez(dump / "mask.npz", mask=allowed)
    (dump / "manifest.toml").write_text(
        'dtype = "float32"\nlayers = 1\nheads = 1\nmask = "mask.npz:mask"\n[arrays]\n'
        'q = "L0.H0.npz:q"\nk = "L0.H0.npz:k"\nv = "L0.H0.npz:v"\nout = "L0.H0.npz:out"\n')
    status = main(["floatref-run", str(dump), "--rows", "sample:2+risky", "--max-ulp", "4", "--serial",
                   "--quiet", "-o", str(tmp_path / "report")])
    capsys.readouterr()
    assert status == 1
    data = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    head = data["heads"][0]
    assert head["rows"]["risky"]["window edge"] == [W] and head["rows"]["count"] < L
    worst = head["tensors"]["out"]["worst"][0]
    assert worst["index"][0] == W and "window edge" in worst["pattern"] and float(worst["ulps"]) > 100
    html = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "window edge" in html
