"""floatref-run on a real dask.distributed LocalCluster (2 worker processes), a client killed with
SIGKILL and resumed, and the report opened in Chromium (issue 22)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floatrun_dumps import make_dump
from symattn.cli import main

pytest.importorskip("dask.distributed")
pytest.importorskip("safetensors")
ROOT = Path(__file__).resolve().parents[1]


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)   # multiprocessing's own tracker stays
            if "resource_tracker" not in " ".join(p.cmdline())}


def test_a_local_cluster_of_two_workers_gives_the_serial_summary(tmp_path, capsys):
    make_dump(tmp_path / "dump", wrong=True, backward=True, L=4, E=2)
    args = ["floatref-run", str(tmp_path / "dump"), "--causal", "--max-ulp", "4", "--quiet"]
    before = _children()
    start = time.monotonic()
    assert main(args + ["--workers", "2", "-o", str(tmp_path / "dask")]) == 1
    assert time.monotonic() - start < 300
    assert main(args + ["--serial", "-o", str(tmp_path / "serial")]) == 1
    out = capsys.readouterr().out
    assert "(8 computed, 0 reused)" in out
    dask = json.loads((tmp_path / "dask" / "summary.json").read_text())
    serial = json.loads((tmp_path / "serial" / "summary.json").read_text())
    assert dask["heads"] == serial["heads"] and len(dask["heads"]) == 8
    assert dask["run"]["engine"] == "dask (2 local workers)" and serial["run"]["engine"] == "serial"
    assert {h["shard"] for h in dask["heads"] if h["exceeds"]} == {"L1.H2"}
    assert {"dq", "dk", "dv", "out"} <= set(dask["heads"][0]["tensors"])
    deadline = time.monotonic() + 30                 # the cluster's processes are gone
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _children() - before == set()


def test_a_client_killed_with_sigkill_resumes_without_recomputing_a_finished_shard(tmp_path):
    make_dump(tmp_path / "dump", layers=4, heads=4, L=48, E=8)
    command = [sys.executable, "-m", "symattn", "floatref-run", str(tmp_path / "dump"), "--causal", "--serial",
               "--quiet", "-o", str(tmp_path / "report")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shards = tmp_path / "report" / "shards"
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if shards.is_dir() and len(list(shards.glob("*.json"))) >= 3:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    finished = len(list(shards.glob("*.json")))
    assert finished >= 3
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode in (0, 1), rerun.stderr
    assert f"({16 - finished} computed, {finished} reused)" in rerun.stdout
    assert len(list(shards.glob("*.json"))) == 16
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["shards"]["total"] == 16


def test_the_report_page_renders_offline_in_chromium(tmp_path, capsys):
    from browser import shared_browser

    make_dump(tmp_path / "dump", wrong=True)
    (tmp_path / "dump" / "L0.H9.pt").write_bytes(b"\x80\x04K\x01.")
    main(["floatref-run", str(tmp_path / "dump"), "--causal", "--max-ulp", "4", "--serial", "--quiet",
          "-o", str(tmp_path / "report")])
    capsys.readouterr()
    shown = shared_browser().open(tmp_path / "report" / "index.html")
    try:
        shown.assert_clean()
        page = shown.page
        heat = page.locator("table.heat").first
        assert heat.locator("tbody tr").count() == 2
        assert "✗" in heat.locator("tbody tr").nth(1).inner_text()
        assert page.locator("td.ink-light").count() >= 1
        assert "torch.save pickle" in page.inner_text("body")
        grouped = page.locator("section:has(h2:has-text('Failing rows by hard-case pattern')) table")
        assert grouped.count() == 2                                 # over the dump, then head by head
        assert grouped.nth(1).locator("tbody tr").first.inner_text().split("\t")[:2] == ["L1.H2", "output"]
        shot = os.environ.get("SYMATTN_SCREENSHOTS")
        page.screenshot(path=str(Path(shot) / "floatref-run.png") if shot else str(tmp_path / "page.png"),
                        full_page=True)
    finally:
        shown.close()


def test_a_worker_killed_mid_run_has_its_shards_retried_elsewhere(tmp_path):
    from dask.distributed import Client, LocalCluster

    from symattn import floatrun

    make_dump(tmp_path / "dump", layers=2, heads=4, L=48, E=8)
    options = floatrun.Options(causal="top-left")
    killed: list[int] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pids = client.run(os.getpid)

        def progress(done, total, name, seconds):
            if not killed:                                  # after the first shard: one worker dies
                killed.append(sorted(pids.values())[0])
                os.kill(killed[0], signal.SIGKILL)

        report = floatrun.run(tmp_path / "dump", options, engine="dask", client=client, progress=progress)
        assert client.status == "running"                   # the caller's client is left open
    assert killed and report.bad == [] and len(report.heads) == 8
    assert report.run["engine"] == "dask (the caller's client)" and report.run["computed"] == 8
    assert report.heads == floatrun.run(tmp_path / "dump", options).heads


def test_an_existing_scheduler_is_used_from_dask_scheduler_address(tmp_path, capsys, monkeypatch):
    from dask.distributed import LocalCluster

    make_dump(tmp_path / "dump", layers=1, heads=2)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler_address)
        status = main(["floatref-run", str(tmp_path / "dump"), "--quiet", "-o", str(tmp_path / "report")])
        assert len(cluster.workers) == 1                   # the cluster is the caller's: still there
    assert status == 0
    run = json.loads((tmp_path / "report" / "summary.json").read_text())["run"]
    assert run.pop("dashboard", "http://").startswith("http://")     # the scheduler's, when it says it has one
    assert run == {"engine": f"dask ({cluster.scheduler_address})", "computed": 2, "reused": 0}
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    monkeypatch.setattr("symattn.floatrun.runner.CONNECT_SECONDS", 2)
    status = main(["floatref-run", str(tmp_path / "dump"), "--quiet", "--worst", "1", "-o", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert status == 2 and "cannot connect" in err and len(err.strip().splitlines()) == 1


def test_a_bfloat16_dump_runs_in_a_fresh_process_as_the_issue_writes_it(tmp_path):
    """The headline command, in a subprocess (ml_dtypes not imported beforehand): bfloat16
    safetensors with the backward; one head's row 2 scaled by 1.03 (about 4 ulp of bfloat16)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import numpy as np
    from safetensors.numpy import save_file

    from floatrun_dumps import grads64, sdpa64

    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng(2)
    (tmp_path / "dump").mkdir()
    for h in range(2):
        q, k, v, do = (rng.standard_normal((6, 4)).astype(bf) for _ in range(4))
        wide = [x.astype(np.float32) for x in (q, k, v, do)]
        out = sdpa64(*wide[:3], True).astype(bf)
        if h == 1:
            out[2] = (out[2].astype(np.float32) * 1.03).astype(bf)
        grads = {g: x.astype(bf) for g, x in grads64(*wide, True).items()}
        save_file(dict(q=q, k=k, v=v, out=out, do=do, **grads), str(tmp_path / "dump" / f"L0.H{h}.safetensors"))
    done = subprocess.run([sys.executable, "-m", "symattn", "floatref-run", str(tmp_path / "dump"), "--dtype",
                           "bfloat16", "--causal", "--max-ulp", "4", "--serial", "-o", str(tmp_path / "report")],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "FAIL: 2 shards (2 computed, 0 reused), 1 failing" in done.stdout
    heads = json.loads((tmp_path / "report" / "summary.json").read_text())["heads"]
    assert [h["shard"] for h in heads if h["exceeds"]] == ["L0.H1"]
    assert heads[0]["dtype"] == "bfloat16" and set(heads[0]["tensors"]) == {"out", "dq", "dk", "dv"}
    assert heads[1]["tensors"]["out"]["worst"][0]["index"][0] == 2
    assert all(heads[0]["tensors"][g]["max_ulp"] <= 1 for g in ("dq", "dk", "dv"))


def test_a_client_of_two_local_workers_killed_with_sigkill_resumes_without_recomputing(tmp_path):
    """The Done means' kill, on a LocalCluster of 2 workers: the shards the client had stored
    are reused (counted, and their files untouched), only the rest computed."""
    import psutil

    make_dump(tmp_path / "dump", layers=4, heads=4, L=96, E=16)
    command = [sys.executable, "-m", "symattn", "floatref-run", str(tmp_path / "dump"), "--causal", "--workers",
               "2", "--quiet", "-o", str(tmp_path / "report")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shards = tmp_path / "report" / "shards"
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and child.poll() is None:
        if shards.is_dir() and len(list(shards.glob("*.json"))) >= 3:
            break
        time.sleep(0.01)
    workers = psutil.Process(child.pid).children(recursive=True)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    for p in workers:                        # the killed client's own worker processes, by pid
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    finished = {p.name: p.stat().st_mtime_ns for p in shards.glob("*.json")}
    assert 3 <= len(finished) < 16
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"({16 - len(finished)} computed, {len(finished)} reused)" in rerun.stdout
    assert {p.name: p.stat().st_mtime_ns for p in shards.glob("*.json") if p.name in finished} == finished
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["shards"] == {
        "total": 16, "ok": 16, "failing": 0, "bad": 0}


def test_a_corrupt_and_a_pickled_file_on_two_workers_are_one_line_each_and_the_rest_complete(tmp_path, capsys):
    make_dump(tmp_path / "dump", layers=2, heads=4, L=8, E=3, wrong=True)
    cut = (tmp_path / "dump" / "L0.H1.safetensors").read_bytes()
    (tmp_path / "dump" / "L0.H1.safetensors").write_bytes(cut[:-10])           # read by a worker: bad there
    (tmp_path / "dump" / "L0.H3.safetensors").unlink()
    (tmp_path / "dump" / "L0.H3.pth").write_bytes(b"\x80\x04K\x01.")           # refused before any worker
    status = main(["floatref-run", str(tmp_path / "dump"), "--causal", "--max-ulp", "4", "--workers", "2",
                   "--quiet", "-o", str(tmp_path / "report")])
    captured = capsys.readouterr()
    assert status == 2
    errors = captured.err.splitlines()
    assert len(errors) == 2 and all(e.startswith("symattn: error: ") for e in errors) and "Traceback" not in captured.err
    assert "cut or damaged" in errors[0] and "L0.H3.pth: a .pth file is a torch.save pickle" in errors[1]
    data = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert data["shards"] == {"total": 8, "ok": 6, "failing": 1, "bad": 2}
    assert data["run"]["engine"] == "dask (2 local workers)"
    assert [h["shard"] for h in data["heads"] if h["exceeds"]] == ["L1.H2"]
    assert data["heads"][6]["tensors"]["out"]["failing_rows"]["rows"] == [[3, 3]]


def test_ctrl_c_on_two_local_workers_stops_cleanly_keeps_the_shards_and_ends_the_workers(tmp_path):
    """SIGINT (Ctrl-C) to a --workers 2 run's process group, as a terminal sends it to the client
    and its workers alike: exit 130, two lines and no traceback, the stored shards kept, the
    cluster's processes gone; the same command again resumes."""
    import psutil

    make_dump(tmp_path / "dump", layers=4, heads=4, L=96, E=16)
    command = [sys.executable, "-m", "symattn", "floatref-run", str(tmp_path / "dump"), "--causal", "--workers",
               "2", "--quiet", "-o", str(tmp_path / "report")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shards = tmp_path / "report" / "shards"
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and child.poll() is None:
        if shards.is_dir() and len(list(shards.glob("*.json"))) >= 2:
            break
        time.sleep(0.01)
    workers = [p for p in psutil.Process(child.pid).children(recursive=True)
               if "resource_tracker" not in " ".join(p.cmdline())]
    assert len(workers) >= 2
    if Path("/proc/self/status").exists():      # the workers ignore SIGINT (a traceback each otherwise,
        for p in workers:                       # not every time: 2 runs of 3 here)
            ignored = next(line for line in Path(f"/proc/{p.pid}/status").read_text().splitlines()
                           if line.startswith("SigIgn:"))
            assert int(ignored.split()[1], 16) >> (signal.SIGINT - 1) & 1, p.cmdline()
    os.killpg(child.pid, signal.SIGINT)
    out, err = child.communicate(timeout=120)
    kept = len(list(shards.glob("*.json")))
    assert child.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert f"floatref-run: stopped; {kept} finished shards kept" in err and "symattn: interrupted" in err
    gone = time.monotonic() + 30
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers) and time.monotonic() < gone:
        time.sleep(0.2)
    alive = [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in alive:                                    # (ended here so a failure leaves none behind)
        p.kill()
    assert alive == []
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and f"({16 - kept} computed, {kept} reused)" in rerun.stdout, rerun.stderr


def _worker_environ() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in ("MALLOC_TRIM_THRESHOLD_", "OPENBLAS_NUM_THREADS")}


def test_local_workers_run_without_dasks_malloc_trim_threshold():
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536, which made every shard about a quarter
    slower (glibc's mmap threshold then stays at 128 KiB): floatref-run's workers go without it,
    and keep BLAS to one thread."""
    from dask.distributed import Client

    from symattn.floatrun.runner import local_cluster

    with local_cluster(1, dashboard_address=None) as cluster, Client(cluster) as client:
        (environ,) = client.run(_worker_environ).values()
    assert environ == {"MALLOC_TRIM_THRESHOLD_": None, "OPENBLAS_NUM_THREADS": "1"}


def test_local_workers_go_without_it_after_a_default_cluster_left_it_in_this_process(monkeypatch):
    """Dask's nanny leaves its pre-spawn variables in the starting process's environment (found
    when the test above ran after another LocalCluster): floatref-run's workers still go
    without it, and the process's environment is as it was."""
    from dask.distributed import Client

    from symattn.floatrun.runner import local_cluster

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")      # what a default LocalCluster leaves
    with local_cluster(1, dashboard_address=None) as cluster, Client(cluster) as client:
        (environ,) = client.run(_worker_environ).values()
    assert environ["MALLOC_TRIM_THRESHOLD_"] is None
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"
