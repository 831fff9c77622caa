"""floatref-run on workers that cannot see the dump (issue 22): the client reads each head's
arrays and sends them (``--ship-inputs``, or automatically when a worker cannot list the dump
folder), on a real LocalCluster of 2 workers made blind to the dump's path by an audit hook.
The report equals the serial one, and a run resumes the same whichever way the shards went."""

from __future__ import annotations

import json

import pytest

from floatrun_dumps import BAD_ROW, PERTURBED, blind_to, make_dump
from symattn import floatrun
from symattn.cli import main
from symattn.floatrun.dump import plan
from symattn.floatrun.shard import check_shard

pytest.importorskip("dask.distributed")
pytest.importorskip("safetensors")

SENT = "read by the client and sent to the workers"
MANIFEST = ('dtype = "float32"\nlayers = 1\nheads = 2\nkv_heads = 1\nmask = "mask.npz:mask"\n[arrays]\n'
            'q = "layer{layer}.safetensors:q.{head}"\nk = "layer{layer}.safetensors:k.{kv_head}"\n'
            'v = "layer{layer}.safetensors:v.{kv_head}"\nout = "layer{layer}.safetensors:out.{head}"\n')


@pytest.fixture
def blind_client(tmp_path):
    """A LocalCluster of 2 workers (floatrun.runner.local_cluster) that cannot open or list
    anything under tmp_path/dump."""
    from dask.distributed import Client

    from symattn.floatrun.runner import local_cluster

    (tmp_path / "dump").mkdir()
    with local_cluster(2, dashboard_address=":0") as cluster, Client(cluster) as client:
        client.run(blind_to, str((tmp_path / "dump").resolve()))
        yield client


def test_blind_workers_get_the_arrays_from_the_client_and_the_report_is_the_serial_one(tmp_path, blind_client):
    make_dump(tmp_path / "dump", layers=2, heads=4, L=20, E=4, wrong=True, backward=True)
    options = floatrun.Options(causal="top-left")
    shard = plan(tmp_path / "dump").shards[0]                   # the workers really cannot read the dump
    alone = blind_client.submit(check_shard, shard, options, pure=False).result()
    assert alone["status"] == "bad" and "cannot read the file (this worker cannot see the dump)" in alone["error"]
    report = floatrun.run(tmp_path / "dump", options, engine="dask", client=blind_client, max_ulp=4)
    assert report.run["inputs"] == SENT and report.bad == [] and report.run["computed"] == 8
    serial = floatrun.run(tmp_path / "dump", options, max_ulp=4)
    assert "inputs" not in serial.run
    assert report.heads == serial.heads and len(report.heads) == 8
    assert [h["shard"] for h in report.heads if h["exceeds"]] == [f"L{PERTURBED[0]}.H{PERTURBED[1]}"]
    assert {"out", "dq", "dk", "dv"} == set(report.heads[0]["tensors"])
    bad = next(h for h in report.heads if h["exceeds"])
    assert bad["tensors"]["out"]["worst"][0]["index"][0] == BAD_ROW


def test_row_blocks_and_a_manifests_mask_travel_too_and_resume_reuses_the_serial_shards(tmp_path, blind_client):
    import numpy as np
    from safetensors.numpy import save_file

    from floatrun_dumps import sdpa64

    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 40, 4)).astype(np.float32)
    k, v = (rng.standard_normal((1, 40, 4)).astype(np.float32) for _ in range(2))
    mask = np.tril(np.ones((40, 40), dtype=bool)) & ~np.tril(np.ones((40, 40), dtype=bool), -8)   # a window of 8
    arrays = {"k.0": k[0], "v.0": v[0]}
    for h in range(2):
        s = q[h].astype(np.float64) @ k[0].astype(np.float64).T / 2
        p = np.exp(np.where(mask, s, -np.inf) - np.where(mask, s, -np.inf).max(axis=1, keepdims=True))
        arrays[f"q.{h}"], arrays[f"out.{h}"] = q[h], ((p / p.sum(axis=1, keepdims=True)) @ v[0]).astype(np.float32)
    assert np.abs(sdpa64(q[0], k[0], v[0], True) - (arrays["out.0"])).max() > 1e-3     # the window matters
    save_file(arrays, str(tmp_path / "dump" / "layer0.safetensors"))
    np.savez(tmp_path / "dump" / "mask.npz", mask=mask)
    (tmp_path / "dump" / "manifest.toml").write_text(MANIFEST)
    options = floatrun.Options(blocks=3)
    cache = tmp_path / "shards"
    cache.mkdir()
    serial = floatrun.run(tmp_path / "dump", options, cache=cache)
    assert serial.bad == [] and serial.heads[0]["tensors"]["out"]["max_ulp"] <= 0.5
    for name in ("L0.H0.b1of3.json", "L0.H1.b2of3.json"):
        (cache / name).unlink()
    report = floatrun.run(tmp_path / "dump", options, cache=cache, engine="dask", client=blind_client)
    assert (report.run["computed"], report.run["reused"], report.run["inputs"]) == (2, 4, SENT)
    assert report.heads == serial.heads


def test_the_command_ships_when_asked_and_auto_blocks_give_each_worker_a_shard(tmp_path, capsys, monkeypatch):
    """--ship-inputs on local workers that can see the dump (asked for, not needed); one head
    under --blocks auto and 2 workers: 2 shards, the report the serial --blocks 2 one."""
    from symattn.floatrun import blocks

    monkeypatch.setattr(blocks, "MIN_SPLIT_SECONDS", 0.0)
    monkeypatch.setattr(blocks, "MIN_ROWS", 8)
    make_dump(tmp_path / "dump", layers=1, heads=1, L=24, E=4)
    args = ["floatref-run", str(tmp_path / "dump"), "--causal", "--quiet"]
    assert main(args + ["--workers", "2", "--blocks", "auto", "--ship-inputs", "-o", str(tmp_path / "dask")]) == 0
    assert main(args + ["--serial", "--blocks", "2", "-o", str(tmp_path / "serial")]) == 0
    assert "1 heads in 2 shards (2 computed, 0 reused)" in capsys.readouterr().out
    dask = json.loads((tmp_path / "dask" / "summary.json").read_text())
    serial = json.loads((tmp_path / "serial" / "summary.json").read_text())
    assert dask["heads"] == serial["heads"]
    assert dask["run"]["inputs"] == SENT and dask["run"]["blocks"]["split"] == {"L0.H0": 2}
    assert dask["run"]["blocks"]["workers"] == 2


def test_a_file_the_client_cannot_read_is_one_line_and_the_rest_complete(tmp_path, blind_client):
    make_dump(tmp_path / "dump", layers=1, heads=4, L=8, E=3)
    cut = (tmp_path / "dump" / "L0.H1.safetensors").read_bytes()
    (tmp_path / "dump" / "L0.H1.safetensors").write_bytes(cut[:-10])
    report = floatrun.run(tmp_path / "dump", floatrun.Options(causal="top-left", blocks=2), engine="dask",
                          client=blind_client)
    assert [h["shard"] for h in report.bad] == ["L0.H1"] and report.run["inputs"] == SENT
    assert "cut or damaged" in report.bad[0]["error"] and "\n" not in report.bad[0]["error"]
    assert report.heads == floatrun.run(tmp_path / "dump", floatrun.Options(causal="top-left", blocks=2)).heads


def test_auto_blocks_on_a_scheduler_count_its_workers_and_leave_it_running(tmp_path, capsys, monkeypatch):
    from symattn.floatrun import blocks
    from symattn.floatrun.runner import local_cluster

    monkeypatch.setattr(blocks, "MIN_SPLIT_SECONDS", 0.0)
    monkeypatch.setattr(blocks, "MIN_ROWS", 8)
    make_dump(tmp_path / "dump", layers=1, heads=1, L=24, E=4)
    with local_cluster(2, dashboard_address=":0") as cluster:
        status = main(["floatref-run", str(tmp_path / "dump"), "--causal", "--blocks", "auto", "--quiet",
                       "--scheduler", cluster.scheduler_address, "-o", str(tmp_path / "report")])
        assert len(cluster.workers) == 2                   # the cluster is the caller's: still there
    assert status == 0, capsys.readouterr().err
    run = json.loads((tmp_path / "report" / "summary.json").read_text())["run"]
    assert run["engine"] == f"dask ({cluster.scheduler_address})" and "inputs" not in run
    assert run["blocks"]["workers"] == 2 and run["blocks"]["split"] == {"L0.H0": 2} and run["computed"] == 2
