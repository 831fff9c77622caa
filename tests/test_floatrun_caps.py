"""The caps of floatref-run (symattn.limits, docs/limits.md) at their edges: the input at the cap
is accepted and one past it is refused with one line (exit 2 for the run's own inputs; a bad
shard, with the others checked, for one file of the dump).
"""

from __future__ import annotations

import json
import struct

import pytest

from floatrun_dumps import make_dump
from symattn import limits
from symattn.cli import main
from symattn.floatref.errors import FloatRefError
from symattn.floatrun import dump, files, runner

pytest.importorskip("safetensors")


def run_cli(capsys, *args):
    status = main(["floatref-run", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refused(status, err, out_dir, name):
    assert status == 2 and name in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not out_dir.exists()


MANIFEST = ('dtype = "float32"\ncausal = true\nlayers = 1\nheads = 1\n[arrays]\nq = "L{layer}.H{head}.npz:q"\n'
            'k = "L{layer}.H{head}.npz:k"\nv = "L{layer}.H{head}.npz:v"\nout = "L{layer}.H{head}.npz:out"\n')


def test_a_manifest_at_the_byte_cap_runs_and_one_byte_more_is_refused(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=1)
    path = tmp_path / "dump" / "manifest.toml"
    pad = limits.MAX_MANIFEST_BYTES - len(MANIFEST.encode()) - 2
    path.write_text(MANIFEST + "#" + "x" * pad + "\n")
    assert path.stat().st_size == limits.MAX_MANIFEST_BYTES
    status, out, err = run_cli(capsys, tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "r1")
    assert status == 0 and "1 shards (1 computed" in out, err
    path.write_text(MANIFEST + "#" + "x" * (pad + 1) + "\n")
    status, _, err = run_cli(capsys, tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "r2")
    refused(status, err, tmp_path / "r2", "MAX_MANIFEST_BYTES")


def test_the_sample_size_cap(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=1, heads=1)
    status, out, err = run_cli(capsys, tmp_path / "dump", "--causal", "--rows", f"sample:{limits.MAX_SAMPLE}",
                               "--serial", "--quiet", "-o", tmp_path / "r1")
    assert status == 0, err
    status, _, err = run_cli(capsys, tmp_path / "dump", "--rows", f"sample:{limits.MAX_SAMPLE + 1}",
                             "--serial", "--quiet", "-o", tmp_path / "r2")
    refused(status, err, tmp_path / "r2", f"1 ≤ N ≤ {limits.MAX_SAMPLE:,}")


def test_the_shard_cap_counts_heads_times_blocks(tmp_path, capsys, monkeypatch):
    make_dump(tmp_path / "dump", layers=1, heads=2)
    monkeypatch.setattr(dump, "MAX_SHARDS", 4)
    status, out, err = run_cli(capsys, tmp_path / "dump", "--blocks", 2, "--serial", "--quiet", "-o", tmp_path / "r1")
    assert status == 0 and "PASS: 2 heads in 4 shards (4 computed, 0 reused)" in out, err
    status, _, err = run_cli(capsys, tmp_path / "dump", "--blocks", 3, "--serial", "--quiet", "-o", tmp_path / "r2")
    refused(status, err, tmp_path / "r2", "2 heads × 3 blocks, over the cap of 4 shards (MAX_SHARDS)")
    monkeypatch.setattr(dump, "MAX_SHARDS", 1)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "r3")
    refused(status, err, tmp_path / "r3", "2 shards, over the cap of 1 shards (MAX_SHARDS)")
    from symattn import floatrun
    with pytest.raises(FloatRefError, match="MAX_SHARDS"):           # the library call meets it too
        monkeypatch.setattr(dump, "MAX_SHARDS", 3)
        floatrun.run(tmp_path / "dump", floatrun.Options(blocks=2))


def test_the_dump_folder_entry_cap(tmp_path, capsys, monkeypatch):
    make_dump(tmp_path / "dump", layers=1, heads=2)
    (tmp_path / "dump" / "README").write_text("the kernel's dump")
    monkeypatch.setattr(dump, "MAX_DUMP_ENTRIES", 3)
    status, _, err = run_cli(capsys, tmp_path / "dump", "--causal", "--serial", "--quiet", "-o", tmp_path / "r1")
    assert status == 0, err
    (tmp_path / "dump" / "NOTES").write_text("more")
    status, _, err = run_cli(capsys, tmp_path / "dump", "--serial", "--quiet", "-o", tmp_path / "r2")
    refused(status, err, tmp_path / "r2", "over 3 entries (MAX_DUMP_ENTRIES)")


def _safetensors(path, header: dict, data: bytes = b"", pad: int = 0):
    raw = json.dumps(header).encode() + b" " * pad
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return len(raw)


def test_the_array_byte_cap_is_met_from_the_header(tmp_path):
    path = tmp_path / "a.safetensors"
    rows = limits.MAX_DUMP_ARRAY_BYTES // (4 * 128)              # F32 rows of 128 at exactly the cap
    _safetensors(path, {"q": {"dtype": "F32", "shape": [1, 1, rows, 128], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(FloatRefError, match="cut or damaged") as at:   # past the cap check, then the range
        files.read_arrays(path, ["q"])
    assert "MAX_DUMP_ARRAY_BYTES" not in str(at.value)
    _safetensors(path, {"q": {"dtype": "F32", "shape": [1, 1, rows + 1, 128], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(FloatRefError, match=f"{limits.MAX_DUMP_ARRAY_BYTES + 512:,} bytes, over the cap"):
        files.read_arrays(path, ["q"])


def test_the_header_cap_the_array_count_cap_and_the_file_cap_at_their_edges(tmp_path, monkeypatch):
    path = tmp_path / "a.safetensors"
    header = {"q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    size = len(json.dumps(header).encode())
    _safetensors(path, header, struct.pack("<f", 1.5), pad=limits.MAX_SAFETENSORS_HEADER - size)
    assert files.read_arrays(path, ["q"])["q"].tolist() == [1.5]
    _safetensors(path, header, struct.pack("<f", 1.5), pad=limits.MAX_SAFETENSORS_HEADER - size + 1)
    with pytest.raises(FloatRefError, match="MAX_SAFETENSORS_HEADER"):
        files.read_arrays(path, ["q"])
    _safetensors(path, {f"a{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
                        for i in range(5)}, b"\0" * 20)
    monkeypatch.setattr(files, "MAX_FILE_ARRAYS", 5)
    assert files.read_arrays(path, ["a4"])["a4"].tolist() == [0.0]
    monkeypatch.setattr(files, "MAX_FILE_ARRAYS", 4)
    with pytest.raises(FloatRefError, match="5 arrays, over the cap of 4"):
        files.read_arrays(path, ["a4"])
    monkeypatch.setattr(files, "MAX_FILE_ARRAYS", 5)
    monkeypatch.setattr(files, "MAX_DUMP_FILE_BYTES", path.stat().st_size)
    assert files.read_arrays(path, ["a4"])["a4"].tolist() == [0.0]
    monkeypatch.setattr(files, "MAX_DUMP_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(FloatRefError, match="MAX_DUMP_FILE_BYTES"):
        files.read_arrays(path, ["a4"])


def test_a_result_file_over_its_cap_is_computed_again(tmp_path, capsys, monkeypatch):
    make_dump(tmp_path / "dump", layers=1, heads=2)
    args = (tmp_path / "dump", "--causal", "--serial", "--quiet", "-o", tmp_path / "report")
    run_cli(capsys, *args)
    sizes = sorted(p.stat().st_size for p in (tmp_path / "report" / "shards").glob("*.json"))
    monkeypatch.setattr(runner, "MAX_RESULT_BYTES", sizes[-1])
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "(0 computed, 2 reused)" in out
    monkeypatch.setattr(runner, "MAX_RESULT_BYTES", sizes[0] - 1)
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "(2 computed, 0 reused)" in out


def test_worst_and_workers_are_capped(tmp_path, capsys):
    from symattn import floatrun

    make_dump(tmp_path / "dump", layers=1, heads=1, L=40, E=4)
    report = floatrun.run(tmp_path / "dump", floatrun.Options(worst=limits.MAX_WORST, causal="top-left"))
    assert len(report.heads[0]["tensors"]["out"]["worst"]) == 40 * 4          # all 160, under the cap
    status, _, err = run_cli(capsys, tmp_path / "dump", "--worst", limits.MAX_WORST, "--serial", "--quiet",
                             "-o", tmp_path / "r0")
    assert status == 0, err
    for flag, cap in (("--worst", limits.MAX_WORST), ("--workers", limits.MAX_WORKERS)):
        status, _, err = run_cli(capsys, tmp_path / "dump", flag, cap + 1, "-o", tmp_path / "r")
        refused(status, err, tmp_path / "r", f"{flag} must be at most {cap:,}")
    with pytest.raises(FloatRefError, match="MAX_WORST"):
        floatrun.Options(worst=limits.MAX_WORST + 1)
    with pytest.raises(FloatRefError, match="MAX_WORKERS"):
        floatrun.run(tmp_path / "dump", workers=limits.MAX_WORKERS + 1, engine="dask")
