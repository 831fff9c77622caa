"""symattn floatref-run (issue 22): a dump's heads checked against floatref, in process (--serial).

The numbers are checked against mpmath at 60 digits (tests/floatrun_dumps.py), for a kernel
that is right (float64 rounded once to float32: within ½ ulp) and one deliberately wrong
(one head's row scaled by 1 + 2⁻¹⁵).
"""

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest

from floatrun_dumps import BAD_ROW, PERTURBED, exact_output, grads64, make_dump, ulp_errors
from symattn import floatrun
from symattn.cli import main

pytest.importorskip("safetensors")


def run_cli(capsys, *args):
    status = main(["floatref-run", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def summary(folder):
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def test_a_right_kernel_passes_and_its_errors_are_the_exact_ones(tmp_path, capsys):
    made = make_dump(tmp_path / "dump")
    status, out, err = run_cli(capsys, tmp_path / "dump", "--causal", "--max-ulp", 4, "--serial", "--quiet",
                               "-o", tmp_path / "report")
    assert status == 0, err
    assert out.startswith("floatref-run: PASS: 8 shards (8 computed, 0 reused), 0 failing")
    data = summary(tmp_path / "report")
    assert data["verdict"] == "pass" and data["shards"] == {"total": 8, "ok": 8, "failing": 0, "bad": 0}
    for head in data["heads"]:
        a = made[head["shard"]]
        want = ulp_errors(a["out"], exact_output(a["q"], a["k"], a["v"], causal=True))
        t = head["tensors"]["out"]
        assert abs(t["max_ulp"] - np.abs(want).max()) < 1e-6
        assert abs(t["mean_ulp"] - np.abs(want).mean()) < 1e-6
        assert np.abs(want).max() <= 0.5 + 1e-6          # the kernel is right: correctly rounded or nearly
        assert t["entries"] == want.size and t["correctly_rounded"] >= want.size - 2
    assert sorted(p.name for p in (tmp_path / "report" / "shards").iterdir()) == sorted(
        f"{name}.json" for name in made)


def test_a_wrong_kernel_fails_on_its_one_head_with_the_exact_errors(tmp_path, capsys):
    made = make_dump(tmp_path / "dump", wrong=True)
    status, out, _ = run_cli(capsys, tmp_path / "dump", "--causal", "--max-ulp", 4, "--serial", "--quiet",
                             "-o", tmp_path / "report")
    assert status == 1
    data = summary(tmp_path / "report")
    name = f"L{PERTURBED[0]}.H{PERTURBED[1]}"
    assert [h["shard"] for h in data["heads"] if h["exceeds"]] == [name]
    a = made[name]
    want = ulp_errors(a["out"], exact_output(a["q"], a["k"], a["v"], causal=True))
    t = next(h for h in data["heads"] if h["shard"] == name)["tensors"]["out"]
    assert abs(t["max_ulp"] - np.abs(want).max()) < 1e-6 and t["max_ulp"] > 100
    worst = t["worst"][0]
    assert worst["index"][0] == BAD_ROW
    assert [int(x) for x in worst["index"]] == [int(x) for x in np.unravel_index(np.abs(want).argmax(), want.shape)]
    assert abs(float(worst["ulps"]) - want[tuple(worst["index"])]) <= 0.01 * abs(float(worst["ulps"]))
    assert data["worst"] == {"shard": name, "tensor": "out", "max_ulp": t["max_ulp"]}
    assert f"max {t['max_ulp']:.4g} ulp (out of {name})" in out


def test_the_backward_is_judged_against_the_correctly_rounded_gradients(tmp_path, capsys):
    made = make_dump(tmp_path / "dump", layers=1, heads=2, L=4, E=2, backward=True)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--causal", "--max-ulp", 4, "--serial", "--quiet",
                             "-o", tmp_path / "report")
    assert status == 0, err
    for head in summary(tmp_path / "report")["heads"]:
        a = made[head["shard"]]
        exact = grads64(a["q"], a["k"], a["v"], a["do"], True)
        for g in ("dq", "dk", "dv"):
            t = head["tensors"][g]
            rn = exact[g].astype(np.float32).astype(np.float64)   # float64 is far finer than the gap here
            _, e = np.frexp(rn)
            dist = (a[g].astype(np.float64) - rn) / np.ldexp(1.0, np.maximum(e - 1, -126) - 23)
            assert t["max_ulp"] == pytest.approx(np.abs(dist).max(), abs=1e-9)
            assert t["reference"] == "correctly rounded" and t["entries"] == a[g].size
            w = t["worst"][0]
            assert float(w["exact"]) == pytest.approx(exact[g][tuple(w["index"])], rel=1e-7, abs=1e-12)


def test_a_rerun_reuses_every_finished_shard_and_recomputes_a_changed_one(tmp_path, capsys):
    make_dump(tmp_path / "dump")
    args = (tmp_path / "dump", "--causal", "--serial", "--quiet", "-o", tmp_path / "report")
    run_cli(capsys, *args)
    first = summary(tmp_path / "report")
    (tmp_path / "report" / "notes.txt").write_text("mine")
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "(0 computed, 8 reused)" in out
    assert summary(tmp_path / "report")["heads"] == first["heads"]
    assert (tmp_path / "report" / "notes.txt").read_text() == "mine"          # the user's file is kept
    make_dump(tmp_path / "other", layers=1, heads=1, seed=5)
    (tmp_path / "dump" / "L0.H0.npz").write_bytes((tmp_path / "other" / "L0.H0.npz").read_bytes())
    status, out, _ = run_cli(capsys, *args)
    assert "(1 computed, 7 reused)" in out
    status, out, _ = run_cli(capsys, *args[:-2], "--worst", 2, "-o", tmp_path / "report")
    assert "(8 computed, 0 reused)" in out                                      # options are in the hash


def test_a_pickle_and_a_corrupt_file_are_bad_shards_and_the_rest_are_checked(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=4)
    (tmp_path / "dump" / "L0.H4.pt").write_bytes(pickle.dumps({"q": [1.0]}))
    cut = (tmp_path / "dump" / "L0.H1.safetensors").read_bytes()
    (tmp_path / "dump" / "L0.H1.safetensors").write_bytes(cut[:-10])
    status, out, err = run_cli(capsys, tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "report")
    assert status == 2
    data = summary(tmp_path / "report")
    bad = {h["shard"]: h["error"] for h in data["heads"] if h["status"] == "bad"}
    assert set(bad) == {"L0.H1", "L0.H4"}
    assert "torch.save pickle" in bad["L0.H4"] and "safetensors.torch.save_file" in bad["L0.H4"]
    assert "cut or damaged" in bad["L0.H1"]
    assert data["shards"]["ok"] == 3 and data["verdict"] == "bad input"
    lines = [line for line in err.splitlines() if line.startswith("symattn: error:")]
    assert len(lines) == 2 and "Traceback" not in err
    assert "bad" in (tmp_path / "report" / "index.html").read_text()


def test_a_torch_save_zip_is_refused_by_name(tmp_path):
    import zipfile

    from symattn.floatref.errors import FloatRefError
    from symattn.floatrun.files import read_arrays

    path = tmp_path / "L0.H0.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps([1]))
    with pytest.raises(FloatRefError, match="torch.save archive .*safetensors"):
        read_arrays(path, ["q"])


def _safetensors(path, header: dict, data: bytes = b""):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("header, data, message", [
    ({"q": {"dtype": "F32", "shape": [1 << 20, 1 << 20], "data_offsets": [0, 4]}}, b"\0" * 4, "over the cap"),
    ({"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, b"\0" * 8, "cut or damaged"),
    ({"q": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8, "not a real float"),
    ({"q": {"dtype": "F32", "shape": [1, 1, 1, 1, 1], "data_offsets": [0, 4]}}, b"\0" * 4, "MAX_DUMP_DIMS"),
])
def test_safetensors_headers_are_checked_before_loading(tmp_path, header, data, message):
    from symattn.floatref.errors import FloatRefError
    from symattn.floatrun.files import read_arrays

    _safetensors(tmp_path / "a.safetensors", header, data)
    with pytest.raises(FloatRefError, match=message):
        read_arrays(tmp_path / "a.safetensors", ["q"])


def test_the_caps_on_header_size_and_array_count(tmp_path, monkeypatch):
    from symattn.floatref.errors import FloatRefError
    from symattn.floatrun import files

    path = tmp_path / "a.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(FloatRefError, match="MAX_SAFETENSORS_HEADER"):
        files.read_arrays(path, ["q"])
    _safetensors(path, {f"a{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
                        for i in range(5)}, b"\0" * 20)
    assert files.read_arrays(path, ["a4"])["a4"].tolist() == [0.0]
    monkeypatch.setattr(files, "MAX_FILE_ARRAYS", 4)
    with pytest.raises(FloatRefError, match="5 arrays, over the cap of 4"):
        files.read_arrays(path, ["a4"])
    monkeypatch.setattr(files, "MAX_DUMP_FILE_BYTES", 10)
    with pytest.raises(FloatRefError, match="MAX_DUMP_FILE_BYTES"):
        files.read_arrays(path, ["a4"])


def test_a_manifest_describes_a_gqa_layout_in_one_file_per_layer(tmp_path):
    from safetensors.numpy import save_file

    from floatrun_dumps import sdpa64

    dump = tmp_path / "dump"
    dump.mkdir()
    rng = np.random.default_rng(3)
    for layer in range(2):
        arrays = {}
        for g in range(2):
            arrays[f"k.{g}"], arrays[f"v.{g}"] = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(2))
        for h in range(4):
            q = rng.standard_normal((5, 4)).astype(np.float32)
            arrays[f"q.{h}"] = q
            arrays[f"out.{h}"] = sdpa64(q, arrays[f"k.{h // 2}"], arrays[f"v.{h // 2}"], False).astype(np.float32)
        arrays["out.3"][0, 0] = np.nextafter(np.nextafter(arrays["out.3"][0, 0], np.inf), np.inf)
        save_file(arrays, str(dump / f"layer{layer}.safetensors"))
    (dump / "manifest.toml").write_text(
        'dtype = "float32"\ncausal = false\nlayers = 2\nheads = 4\nkv_heads = 2\n[arrays]\n'
        'q = "layer{layer}.safetensors:q.{head}"\nk = "layer{layer}.safetensors:k.{kv_head}"\n'
        'v = "layer{layer}.safetensors:v.{kv_head}"\nout = "layer{layer}.safetensors:out.{head}"\n')
    report = floatrun.run(dump, max_ulp=1)
    assert report.status == 1 and [h["shard"] for h in report.failing] == ["L0.H3", "L1.H3"]
    for h in report.heads:
        assert h["tensors"]["out"]["max_ulp"] < (3 if h["head"] == 3 else 0.51)


@pytest.mark.parametrize("text, message", [
    ("layers = 1\nheads = 1\nbogus = 1\n[arrays]\n", "unknown key 'bogus'"),
    ('layers = 1\nheads = 1\n[arrays]\nq = "a.npz:q"\n', "arrays.k is missing"),
    ('layers = 1\nheads = 2\nkv_heads = 3\n[arrays]\nq="a:q"\nk="a:k"\nv="a:v"\nout="a:o"\n', "does not divide"),
    ('layers = 1\nheads = 1\n[arrays]\nq="../x.npz:q"\nk="a:k"\nv="a:v"\nout="a:o"\n', "inside the dump"),
    ('layers = 1\nheads = 1\n[arrays]\nq="L{layr}.npz:q"\nk="a:k"\nv="a:v"\nout="a:o"\n', "{layr} is not a field"),
    ('dtype = "float128"\nlayers = 1\nheads = 1\n[arrays]\n', "dtype = 'float128'"),
    ("layers = [\n", "not valid TOML"),
])
def test_a_bad_manifest_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "manifest.toml").write_text(text)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--serial", "-o", tmp_path / "report")
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "report").exists()                      # nothing written for a bad dump


def test_a_folder_symattn_did_not_write_is_refused(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=1)
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "thesis.tex").write_text("mine")
    status, _, err = run_cli(capsys, tmp_path / "dump", "--serial", "-o", tmp_path / "theirs")
    assert status == 2 and "did not write" in err
    assert sorted(p.name for p in (tmp_path / "theirs").iterdir()) == ["thesis.tex"]
    status, _, err = run_cli(capsys, tmp_path / "nothing", "--serial", "-o", tmp_path / "r")
    assert status == 2 and "not a folder" in err


def test_sampled_rows_include_the_risky_ones_and_are_seeded(tmp_path):
    from symattn.floatrun.sampling import choose_rows

    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((100, 4)), rng.standard_normal((80, 4))
    q[40] = 0.0                                    # every score 0: a tie at the row maximum
    s = {"causal": "bottom-right", "mask": None, "scale": None}
    rows, risky = choose_rows("sample:10+risky", 7, q, k, s)
    assert rows == choose_rows("sample:10+risky", 7, q, k, s)[0]
    assert risky["first and last"] == [0, 99] and risky["fully masked"] == list(range(8))
    assert 40 in risky["near-tie at the row maximum"] and set(risky["fully masked"]) <= set(rows)
    assert choose_rows("sample:10", 7, q, k, s)[1] == {} and len(choose_rows("sample:10", 7, q, k, s)[0]) == 10
    assert choose_rows("all", 0, q, k, s) is None


def test_a_sampled_run_judges_only_those_rows(tmp_path, capsys):
    made = make_dump(tmp_path / "dump", layers=1, heads=1, L=40, wrong=False)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--causal", "--rows", "sample:5+risky", "--serial",
                             "--quiet", "-o", tmp_path / "report")
    head = summary(tmp_path / "report")["heads"][0]
    assert status == 0, err
    rows = head["rows"]
    assert rows["rule"] == "sample:5+risky" and rows["of"] == 40 and 5 < rows["count"] < 40
    assert head["tensors"]["out"]["entries"] == rows["count"] * made["L0.H0"]["v"].shape[1]
    text = (tmp_path / "report" / "report.txt").read_text()
    assert f"rows checked in 1 heads: {rows['count']} of 40 (a seeded sample plus the risky rows: " in text
    assert "first and last" in text


def test_ctrl_c_stops_with_the_finished_shards_kept_and_a_rerun_resumes(tmp_path, capsys, monkeypatch):
    from symattn.floatrun import runner

    make_dump(tmp_path / "dump")
    real, calls = runner.check_shard, []

    def interrupted(shard, options):
        calls.append(shard.name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(shard, options)

    monkeypatch.setattr(runner, "check_shard", interrupted)
    args = (tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "report")
    status, _, err = run_cli(capsys, *args)
    assert status == 130 and "2 finished shards kept" in err and "Traceback" not in err
    assert len(list((tmp_path / "report" / "shards").glob("*.json"))) == 2
    monkeypatch.setattr(runner, "check_shard", real)
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "(6 computed, 2 reused)" in out


def test_shards_a_killed_swap_left_in_its_staging_folder_are_taken_back(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=2)
    args = (tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "report")
    run_cli(capsys, *args)
    staging = tmp_path / ".report.symattn-new-999999999-x"          # no such process: a killed run's
    (staging / "shards").mkdir(parents=True)
    (tmp_path / "report" / "shards" / "L0.H1.json").rename(staging / "shards" / "L0.H1.json")
    (staging / ".symattn-staging").write_bytes(
        b"symattn: a folder being built; it is removed when the folder is swapped in\n")
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "(0 computed, 2 reused)" in out and not staging.exists()


def test_row_blocks_give_each_head_the_summary_of_the_whole_head(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=3, L=10, wrong=True, seed=4)
    whole = floatrun.run(tmp_path / "dump", floatrun.Options(causal="top-left"), max_ulp=4)
    status, out, _ = run_cli(capsys, tmp_path / "dump", "--causal", "--blocks", 4, "--max-ulp", 4, "--serial",
                             "--quiet", "-o", tmp_path / "report")
    assert "12 computed" in out
    assert sorted(p.name for p in (tmp_path / "report" / "shards").iterdir())[:2] == [
        "L0.H0.b0of4.json", "L0.H0.b1of4.json"]
    blocked = summary(tmp_path / "report")["heads"]
    assert [h["shard"] for h in blocked] == ["L0.H0", "L0.H1", "L0.H2"]
    for a, b in zip(whole.heads, blocked):
        ta, tb = a["tensors"]["out"], b["tensors"]["out"]
        for key in ("entries", "max_ulp", "histogram", "correctly_rounded", "exceeds"):
            assert ta[key] == tb[key], key
        assert tb["mean_ulp"] == pytest.approx(ta["mean_ulp"], rel=1e-12)
        assert [w["index"] for w in ta["worst"]] == [w["index"] for w in tb["worst"]]
        assert b["rows"] == {"rule": "4 row blocks", "count": 10, "of": 10}
    status, _, err = run_cli(capsys, tmp_path / "dump", "--blocks", 2, "--rows", "sample:3", "--serial",
                             "-o", tmp_path / "report")
    assert status == 2 and "give one of them" in err
