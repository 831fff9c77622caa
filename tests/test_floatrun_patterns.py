"""Every failing row's hard-case pattern in floatref-run's report (issue 22: "which hard-case
pattern each failing row matches"), the progress bar, and a head given twice.

The patterns are checked against a by-hand rule written here with Python loops over the
float64 scores; the failing rows against the rows the test's kernel got wrong on purpose.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from symattn.cli import main
from symattn.commands.floatref_run import progress_printer, start_printer
from symattn.floatrun.patterns import FLOOR, classify, in_ranges, ranges

pytest.importorskip("safetensors")
L, E = 72, 4
BIG, SMALL = (0, 5, 10, 21, 22, 30, 50, 69), (40, 41)   # rows off by ~2^10 ulp and by ~8-16 ulp


def head_mask() -> np.ndarray:
    """A width-10 sliding window; rows 20-23 see keys 64-67 only; rows 70, 71 see nothing."""
    mask = np.array([[i - 10 < j <= i for j in range(L)] for i in range(L)])
    mask[20:24] = False
    mask[20:24, 64:68] = True
    mask[70:] = False
    return mask


def by_hand(q, k, mask) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Each query row's and key row's patterns, one row at a time."""
    n, m = mask.shape
    scores = [[sum(float(q[i, c]) * float(k[j, c]) for c in range(q.shape[1])) / np.sqrt(q.shape[1])
               for j in range(m)] for i in range(n)]
    rows = {"first and last": {0, n - 1}, "fully masked": set(), "first key block masked": set(),
            "window edge": set(), "near-tie at the row maximum": set()}
    first = [list(r).index(True) if r.any() else None for r in mask]
    moved = [i > 0 and first[i] is not None and first[i - 1] is not None and first[i] > first[i - 1]
             for i in range(n)]
    peak = []
    for i in range(n):
        seen = sorted((scores[i][j] for j in range(m) if mask[i, j]), reverse=True)
        peak.append(max((abs(x) for x in seen), default=0.0))
        if not seen:
            rows["fully masked"].add(i)
        elif not mask[i, :64].any():
            rows["first key block masked"].add(i)
        if moved[i] and not moved[i - 1]:
            rows["window edge"].add(i)
        if len(seen) >= 2 and (seen[0] - seen[1]) / max(abs(seen[0]), 1e-300) <= 2.0 ** -10:
            rows["near-tie at the row maximum"].add(i)
    rows["largest |score|"] = {int(np.argmax(peak))}
    key_peak = [max((abs(scores[i][j]) for i in range(n) if mask[i, j]), default=0.0) for j in range(m)]
    keys = {"first and last": {0, m - 1}, "attended by no query": {j for j in range(m) if not mask[:, j].any()},
            "partial last key block": set(range(64, m)) if m > 64 and m % 64 else set(),
            "largest |score|": {int(np.argmax(key_peak))}}
    return ({a: b for a, b in rows.items() if b}, {a: b for a, b in keys.items() if b})


def softmax64(q, k, v, mask):
    s = np.where(mask, (q.astype(np.float64) @ k.T.astype(np.float64)) / np.sqrt(q.shape[1]), -np.inf)
    top = np.max(np.where(mask.any(axis=1, keepdims=True), s, 0.0), axis=1, keepdims=True)
    p = np.where(mask, np.exp(s - top), 0.0)
    z = p.sum(axis=1, keepdims=True)
    return np.divide(p, z, out=np.zeros_like(p), where=z > 0)


def write(dump, arrays, mask) -> None:
    dump.mkdir()
    np.savez(dump / "L0.H0.npz", **arrays)
    np.savez(dump / "mask.npz", mask=mask)
    names = "".join(f'{r} = "L0.H0.npz:{r}"\n' for r in arrays)
    (dump / "manifest.toml").write_text(f'dtype = "float32"\nlayers = 1\nheads = 1\nmask = "mask.npz:mask"\n'
                                        f"[arrays]\n{names}")


def test_the_classification_is_the_by_hand_rule():
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((L, E)), rng.standard_normal((L, E))
    k[3] = k[7] = 3.0                         # two equal large keys: row 8 sees both, a tie at its top
    q[8] = 1.0
    mask = head_mask()
    got = classify(q, k, {"causal": None, "mask": mask, "scale": None})
    rows, keys = by_hand(q, k, mask)
    assert {n: set(np.nonzero(m)[0].tolist()) for n, m in got["query"].items()} == rows
    assert {n: set(np.nonzero(m)[0].tolist()) for n, m in got["key"].items()} == keys
    assert len(rows["near-tie at the row maximum"]) >= 1 and len(rows["window edge"]) >= 2


def test_ranges_and_membership():
    assert ranges([5, 1, 2, 3, 9, 10]) == [[1, 3], [5, 5], [9, 10]]
    assert ranges(np.array([True, False, True, True])) == [[0, 0], [2, 3]] and ranges([]) == []
    assert in_ranges([0, 1, 4, 5, 9, 11], [[1, 3], [5, 5], [9, 10]]).tolist() == [False, True, False, True, True,
                                                                                  False]


def test_every_failing_row_is_listed_with_its_patterns_at_any_gate(tmp_path, capsys):
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((L, E)).astype(np.float32) for _ in range(3))
    mask = head_mask()
    out = (softmax64(q, k, v, mask) @ v.astype(np.float64)).astype(np.float32)
    for rows, factor in ((BIG, 2.0 ** -13), (SMALL, 2.0 ** -20)):
        out[list(rows)] = (out[list(rows)].astype(np.float64) * (1 + factor)).astype(np.float32)
    write(tmp_path / "dump", {"q": q, "k": k, "v": v, "out": out}, mask)
    args = ["floatref-run", str(tmp_path / "dump"), "--serial", "--worst", "1", "--quiet", "-o", str(tmp_path / "r")]
    assert main(args + ["--max-ulp", "4"]) == 1
    t = json.loads((tmp_path / "r" / "summary.json").read_text())["heads"][0]["tensors"]["out"]
    failing = t["failing_rows"]
    assert failing["count"] == len(BIG + SMALL) and failing["complete"] and failing["axis"] == "query"
    assert sorted(r for a, b in failing["rows"] for r in range(a, b + 1)) == sorted(BIG + SMALL)
    patterns, _ = by_hand(q, k, mask)
    want: dict[str, set[int]] = {}
    for row in BIG + SMALL:
        mine = [name for name, at in patterns.items() if row in at] or ["no pattern"]
        for name in mine:
            want.setdefault(name, set()).add(row)
    got = {name: {r for a, b in g["rows"] for r in range(a, b + 1)} for name, g in failing["patterns"].items()}
    assert got == want and len(want) >= 3
    for name, g in failing["patterns"].items():
        assert g["count"] == len(want[name])
        if name != "no pattern":
            assert g["of"] == len(patterns[name])
    assert failing["patterns"]["no pattern"]["of"] == L - len(set().union(*patterns.values()))
    assert "rows_over" not in t and len(t["worst"]) == 1          # one worst entry; every failing row listed
    html = (tmp_path / "r" / "index.html").read_text()
    assert "Failing rows by hard-case pattern" in html and "window edge" in html
    capsys.readouterr()
    assert main(args + ["--max-ulp", "64"]) == 1                    # the same shards, a looser gate
    assert "(0 computed, 1 reused)" in capsys.readouterr().out
    failing = json.loads((tmp_path / "r" / "summary.json").read_text())["heads"][0]["tensors"]["out"]["failing_rows"]
    assert sorted(r for a, b in failing["rows"] for r in range(a, b + 1)) == sorted(BIG)
    assert main(args + ["--max-ulp", "0.25"]) == 1                  # below the kept floor: said so
    failing = json.loads((tmp_path / "r" / "summary.json").read_text())["heads"][0]["tensors"]["out"]["failing_rows"]
    assert not failing["complete"] and FLOOR == 0.5 and failing["count"] == len(BIG + SMALL)


def test_a_key_no_query_attends_fails_in_dk_and_dv_under_its_pattern(tmp_path, capsys):
    n = 8
    rng = np.random.default_rng(8)
    q, k, v, do = (rng.standard_normal((n, E)).astype(np.float32) for _ in range(4))
    mask = np.ones((n, n), dtype=bool)
    mask[:, 3] = False                                         # key 3 is seen by no query
    p = softmax64(q, k, v, mask)
    q64, k64, v64, do64 = (x.astype(np.float64) for x in (q, k, v, do))
    dp = do64 @ v64.T
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
    grads = {"dq": ds @ k64 / 2, "dk": ds.T @ q64 / 2, "dv": p.T @ do64}
    grads = {g: x.astype(np.float32) for g, x in grads.items()}
    grads["dk"][3] = grads["dv"][3] = 1e-3                    # exactly 0 in truth
    out = (p @ v64).astype(np.float32)
    write(tmp_path / "dump", {"q": q, "k": k, "v": v, "out": out, "do": do, **grads}, mask)
    assert main(["floatref-run", str(tmp_path / "dump"), "--serial", "--quiet", "--max-ulp", "4",
                 "-o", str(tmp_path / "r")]) == 1
    capsys.readouterr()
    tensors = json.loads((tmp_path / "r" / "summary.json").read_text())["heads"][0]["tensors"]
    assert not tensors["out"]["exceeds"] and not tensors["dq"]["exceeds"]
    for g in ("dk", "dv"):
        f = tensors[g]["failing_rows"]
        assert f["axis"] == "key" and f["rows"] == [[3, 3]]
        assert f["patterns"]["attended by no query"] == {"count": 1, "of": 1, "rows": [[3, 3]],
                                                         "max_ulp": f["patterns"]["attended by no query"]["max_ulp"]}
        assert tensors[g]["worst"][0]["index"][0] == 3 and "attended by no query" in tensors[g]["worst"][0]["pattern"]


def test_row_blocks_list_the_same_failing_rows_as_one_shard(tmp_path, capsys):
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((L, E)).astype(np.float32) for _ in range(3))
    mask = head_mask()
    out = (softmax64(q, k, v, mask) @ v.astype(np.float64)).astype(np.float32)
    out[list(BIG)] = (out[list(BIG)].astype(np.float64) * (1 + 2.0 ** -13)).astype(np.float32)
    write(tmp_path / "dump", {"q": q, "k": k, "v": v, "out": out}, mask)
    got = []
    for blocks in ("1", "5"):
        assert main(["floatref-run", str(tmp_path / "dump"), "--serial", "--quiet", "--max-ulp", "4",
                     "--blocks", blocks, "-o", str(tmp_path / f"r{blocks}")]) == 1
        got.append(json.loads((tmp_path / f"r{blocks}" / "summary.json").read_text())["heads"][0]["tensors"]["out"])
    capsys.readouterr()
    assert got[0]["failing_rows"] == got[1]["failing_rows"] and got[0]["failing_rows"]["count"] == len(BIG)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_lines_on_request_and_nothing_in_a_pipe():
    tty = Terminal()
    show = progress_printer(tty)
    assert show is not None
    for done in range(1, 5):
        show(done, 4, f"L0.H{done - 1}", done * 1.0)
    text = tty.getvalue()
    assert text.count("\r") == 4 and text.endswith("in 4 s (L0.H3)\n")
    assert "[######..................] 1/4 shards, 1/s, ~3 s left (L0.H0)" in text
    assert progress_printer(io.StringIO()) is None and progress_printer(tty, quiet=True) is None
    log = io.StringIO()
    lines = progress_printer(log, lines=True)
    assert lines is not None
    for done, at in ((1, 0.5), (2, 3.0), (3, 11.0), (4, 4000.0)):  # every 10 s, and the last
        lines(done, 5 if done < 4 else 4, "x", at)
    assert log.getvalue().splitlines() == ["floatref-run: 1/5 shards, 2/s, ~2 s left (x)",
                                           "floatref-run: 3/5 shards, 0.273/s, ~7 s left (x)",
                                           "floatref-run: 4/4 shards, 0.001/s, in 1 h 06 min (x)"]
    start = start_printer(tty, 10)
    assert start is not None and start_printer(io.StringIO(), 10) is None


def test_a_pipe_gets_no_progress_and_a_head_given_twice_is_a_bad_shard(tmp_path, capsys):
    from floatrun_dumps import make_dump

    make_dump(tmp_path / "dump", layers=1, heads=2)
    (tmp_path / "dump" / "L0.H0.safetensors").write_bytes((tmp_path / "dump" / "L0.H1.safetensors").read_bytes())
    status = main(["floatref-run", str(tmp_path / "dump"), "--serial", "-o", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.splitlines() == ["symattn: error: L0.H0: L0.H0.npz and L0.H0.safetensors are both in "
                                         "the dump; keep one file per head"]
    assert "(1 computed, 0 reused)" in captured.out
