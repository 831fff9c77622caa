"""``floatref-run --blocks auto`` (issue 22): each head's row blocks from its shape and the cost
model of symattn.floatrun.blocks; the blocks' report against the whole head's and an
independent float64 computation; bad --blocks values refused with one line."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace

import numpy as np
import pytest

from floatrun_dumps import BAD_ROW, PERTURBED, make_dump, sdpa64
from symattn import floatrun
from symattn.cli import main
from symattn.floatrun import blocks, dump
from symattn.floatrun.blocks import HeadShape

pytest.importorskip("safetensors")


def run_cli(capsys, *args):
    status = main(["floatref-run", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def summary(folder):
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("L", [1, 7, 100, 4097])
def test_the_rows_of_a_block_are_the_shards_rows(L):
    shape = HeadShape(L, 50, 8, 8, "float32", False)
    for n in (1, 3, 7):
        spans = [replace(plain_shard(), block=b, blocks=n).row_range(L) for b in range(n)]
        assert [shape.rows(b, n) for b in range(n)] == [end - start for start, end in spans]
        assert sum(shape.rows(b, n) for b in range(n)) == L


def plain_shard():
    return dump.Shard(0, 0, "/", ())


def long_head(L=8192, E=64, **kw):
    return HeadShape(L, kw.get("S", L), E, E, kw.get("format", "float32"), kw.get("backward", False))


@pytest.fixture
def model(monkeypatch):
    """The cost model with round constants (the tests do not depend on the calibration)."""
    for name, value in {"FIXED": 0.05, "CERT": 1e-7, "SCAN": 1e-10, "ROW": 1e-9, "MIN_ROWS": 64,
                        "MIN_SPLIT_SECONDS": 1.0, "TARGET_SECONDS": 3.0,
                        "FORMAT": {"float32": 1.0, "bfloat16": 2.0}}.items():
        monkeypatch.setattr(blocks, name, value)


def test_a_long_head_gets_the_fewest_blocks_within_the_target(model):
    shape = long_head()
    (n,) = blocks.choose({"h": shape}, worst=0).values()
    assert n > 1 and blocks.largest(shape, n, 0) <= blocks.TARGET_SECONDS < blocks.largest(shape, n - 1, 0)
    assert blocks.choose({"h": shape}, worst=0) == blocks.choose({"h": shape}, workers=2, worst=0)
    assert blocks.choose({"h": long_head(format="bfloat16")}, worst=0)["h"] > n     # a slower format


def test_short_heads_backward_heads_and_heads_a_block_cannot_shorten_stay_whole(model):
    short = HeadShape(2 * blocks.MIN_ROWS - 1, 8192, 128, 128, "float32", False)
    quick = HeadShape(512, 512, 64, 64, "float32", False)
    assert blocks.estimate(short) > blocks.MIN_SPLIT_SECONDS > blocks.estimate(quick)
    backward = long_head(backward=True)
    assert blocks.choose({"short": short, "quick": quick, "bwd": backward, "unread": None}, workers=16) == {
        "short": 1, "quick": 1, "bwd": 1, "unread": 1}
    # what every block pays (its own certified worst entries, the whole head's scan) is over
    # half the target: blocks are made only until their rows cost no more than that
    wide = long_head(8192, 128)
    every = blocks.estimate(wide, 0, wide.L, 5)              # one row: (almost) only what every block pays
    assert 2 * every > blocks.TARGET_SECONDS
    (n,) = blocks.choose({"w": wide}, worst=5).values()
    rows = {k: blocks.largest(wide, k, 5) - every for k in (n - 1, n)}
    assert 1 < n and rows[n] <= every < rows[n - 1]
    assert blocks.largest(wide, n, 5) > blocks.TARGET_SECONDS


def test_a_small_dump_gets_a_shard_for_every_worker_the_costliest_heads_split_first(model):
    a, b = long_head(2048, 64, S=6144), long_head(2048, 64, S=4096)
    assert blocks.TARGET_SECONDS >= blocks.estimate(a) > blocks.estimate(b) > blocks.MIN_SPLIT_SECONDS
    assert blocks.choose({"a": a, "b": b}) == {"a": 1, "b": 1}
    got = blocks.choose({"a": a, "b": b}, workers=5)
    assert sum(got.values()) == 5 and got["a"] > got["b"] >= 1


def force_splitting(monkeypatch, rows=16, target=1.0):
    """A model where a small head's rows are all that cost: 1e-5 s per row, key and column."""
    for name, value in {"FIXED": 0.0, "CERT": 0.0, "SCAN": 0.0, "ROW": 1e-5, "MIN_ROWS": rows,
                        "MIN_SPLIT_SECONDS": 0.0, "TARGET_SECONDS": target}.items():
        monkeypatch.setattr(blocks, name, value)


def test_auto_blocks_report_the_whole_heads_values_and_reuse_the_same_blocks_shards(tmp_path, capsys, monkeypatch):
    force_splitting(monkeypatch)
    L, E = 160, 8
    made = make_dump(tmp_path / "dump", layers=2, heads=3, L=L, E=E, wrong=True, seed=3)
    want = next(n for n in range(1, L + 1) if -(-L // n) * L * 2 * E * 1e-5 <= 1.0)   # the largest block's rows
    assert want == 5
    status, out, err = run_cli(capsys, tmp_path / "dump", "--causal", "--blocks", "auto", "--max-ulp", 4, "--serial",
                               "--quiet", "-o", tmp_path / "report")
    assert status == 1, err
    assert f"6 heads in {6 * want} shards ({6 * want} computed, 0 reused)" in out
    data = summary(tmp_path / "report")
    assert data["options"]["blocks"] == "auto"
    chosen = data["run"]["blocks"]
    assert chosen["split"] == {f"L{la}.H{h}": want for la in range(2) for h in range(3)} and chosen["shards"] == 6 * want
    whole = floatrun.run(tmp_path / "dump", floatrun.Options(causal="top-left"), max_ulp=4)
    for a, b in zip(whole.heads, data["heads"]):
        ta, tb = a["tensors"]["out"], b["tensors"]["out"]
        for key in ("entries", "max_ulp", "histogram", "correctly_rounded", "exceeds"):
            assert ta[key] == tb[key], key
        assert abs(float(ta["worst"][0]["ulps"])) == abs(float(tb["worst"][0]["ulps"]))   # (ties: any order)
        assert b["rows"] == {"rule": f"{want} row blocks", "count": L, "of": L}
        arrays = made[b["shard"]]                   # float64 SDPA, the error in ulps of float32
        ref = sdpa64(arrays["q"], arrays["k"], arrays["v"], True)
        _, e = np.frexp(ref)
        ulps = np.abs(arrays["out"].astype(np.float64) - ref) / np.ldexp(1.0, e - 24)
        assert tb["max_ulp"] == pytest.approx(ulps.max(), abs=0.01)
    bad = data["heads"][3 * PERTURBED[0] + PERTURBED[1]]
    assert bad["exceeds"] and {w["index"][0] for w in bad["tensors"]["out"]["worst"]} == {BAD_ROW}
    assert bad["tensors"]["out"]["worst"] == whole.heads[3 * PERTURBED[0] + PERTURBED[1]]["tensors"]["out"]["worst"]
    assert [h["shard"] for h in data["heads"] if h["exceeds"]] == [bad["shard"]]
    status, out, _ = run_cli(capsys, tmp_path / "dump", "--causal", "--blocks", want, "--max-ulp", 4, "--serial",
                             "--quiet", "-o", tmp_path / "report")
    assert status == 1 and f"(0 computed, {6 * want} reused)" in out      # the same shards, however chosen


def test_a_head_whose_backward_is_checked_stays_whole_under_auto(tmp_path, capsys, monkeypatch):
    force_splitting(monkeypatch, rows=4, target=1e-9)
    make_dump(tmp_path / "dump", layers=1, heads=2, L=24, E=3, backward=True)
    (tmp_path / "dump" / "L0.H1.safetensors").unlink()
    make_dump(tmp_path / "fwd", layers=1, heads=2, L=24, E=3)
    (tmp_path / "dump" / "L0.H1.npz").write_bytes((tmp_path / "fwd" / "L0.H0.npz").read_bytes())
    status, out, err = run_cli(capsys, tmp_path / "dump", "--causal", "--blocks", "auto", "--serial", "--quiet",
                               "-o", tmp_path / "report")
    assert status == 0, err
    data = summary(tmp_path / "report")
    assert data["run"]["blocks"]["whole_for_backward"] == ["L0.H0"]
    assert data["run"]["blocks"]["split"] == {"L0.H1": 6}              # 24 rows, blocks of at least 4
    h0, h1 = data["heads"]
    assert set(h0["tensors"]) == {"out", "dq", "dk", "dv"} and h0.get("rows") is None
    assert set(h1["tensors"]) == {"out"} and h1["rows"]["rule"] == "6 row blocks"


@pytest.mark.parametrize("value, says", [("0", "at least 1"), ("-2", "at least 1"), ("abc", "whole number"),
                                         ("1.5", "whole number"), ("auto2", "whole number"), ("", "whole number")])
def test_a_bad_blocks_value_is_one_line_and_exit_2(tmp_path, capsys, value, says):
    make_dump(tmp_path / "dump", layers=1, heads=1)
    status, out, err = run_cli(capsys, tmp_path / "dump", "--blocks", value, "--serial", "-o", tmp_path / "report")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--blocks" in err and says in err
    assert "Traceback" not in err and not (tmp_path / "report").exists()
    status, _, err = run_cli(capsys, tmp_path / "dump", "--blocks", "AUTO", "--rows", "sample:3", "--serial",
                             "-o", tmp_path / "report")
    assert status == 2 and "give one of them" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(floatrun.shard.FloatRefError, match="or \"auto\""):
        floatrun.Options(blocks="many")


def test_auto_blocks_meet_the_shard_cap_before_anything_is_written(tmp_path, capsys, monkeypatch):
    force_splitting(monkeypatch)
    make_dump(tmp_path / "dump", layers=1, heads=2, L=160, E=8)
    monkeypatch.setattr(dump, "MAX_SHARDS", 5)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--causal", "--blocks", "auto", "--serial", "--quiet",
                             "-o", tmp_path / "report")
    assert status == 2 and len(err.strip().splitlines()) == 1 and "(--blocks auto), over the cap of 5" in err
    assert not (tmp_path / "report").exists()


def test_a_safetensors_header_whose_length_starts_with_the_pickle_byte_is_read(tmp_path, capsys):
    """A safetensors file starts with its header's length: one of 128 + 256·n bytes starts with
    0x80, a pickle's first byte. It is a safetensors file (its JSON header follows); a pickle
    named .safetensors is still refused."""
    from safetensors.numpy import save_file

    make_dump(tmp_path / "dump", layers=1, heads=2)
    path = tmp_path / "dump" / "L0.H1.safetensors"
    from safetensors.numpy import load_file

    arrays = load_file(str(path))
    for pad in range(300):
        save_file(arrays, str(path), metadata={"pad": "x" * pad})
        if path.read_bytes()[0] == 0x80:
            break
    assert path.read_bytes()[0] == 0x80 and path.read_bytes()[8:9] == b"{"
    status, out, err = run_cli(capsys, tmp_path / "dump", "--causal", "--serial", "--quiet", "-o", tmp_path / "r1")
    assert status == 0 and "2 shards (2 computed" in out, err
    path.write_bytes(pickle.dumps({"q": 1}, protocol=4))
    status, _, err = run_cli(capsys, tmp_path / "dump", "--causal", "--serial", "--quiet", "-o", tmp_path / "r2")
    assert status == 2 and "a pickle (torch.save's format)" in err
