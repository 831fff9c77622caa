"""``symattn serve`` as a command, and its worker pool, without a browser.

The refusals come before anything is bound or spawned, one line and exit 2 as every
command's do; the pool's queue bound and budget are checked on the pool itself.
"""

from __future__ import annotations

import asyncio

import pytest

from symattn.cli import main

pytest.importorskip("starlette")


def refused(capsys, *argv: str) -> str:
    assert main(["serve", "--no-browser", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symattn: error: ")
    return err


def test_bad_arguments_are_one_line(capsys, tmp_path):
    assert "--port must be between 1 and 65535" in refused(capsys, "--port", "70000")
    assert "--budget must be between" in refused(capsys, "--budget", "0")
    assert "no such file" in refused(capsys, str(tmp_path / "missing.toml"))
    assert "no example named 'nope'" in refused(capsys, "--example", "nope")
    bad = tmp_path / "bad.toml"
    bad.write_text('tokens = ["a"]\nQ = [["2^(10^9)"]]\nK = [[1]]\nV = [[1]]\n', encoding="utf-8")
    assert "MAX_POWER_EXPONENT" in refused(capsys, str(bad))


def test_another_host_is_served_with_a_warning(capsys, monkeypatch):
    import uvicorn

    bound = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: bound.update(host=self.config.host,
                                                                         port=self.config.port))
    assert main(["serve", "--no-browser", "--host", "0.0.0.0", "--port", "9123"]) == 0
    err = capsys.readouterr().err
    assert "warning: --host 0.0.0.0" in err and bound == {"host": "0.0.0.0", "port": 9123}
    assert "until --allow-host NAME" in err
    assert main(["serve", "--no-browser", "--example", "rope", "--port", "9124"]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err and "serving http://127.0.0.1:9124/" in err
    assert bound == {"host": "127.0.0.1", "port": 9124}


def test_the_hosts_the_page_answers():
    from symattn.commands.serve import allowed_hosts

    assert allowed_hosts("127.0.0.1", 8765) == {"127.0.0.1:8765", "localhost:8765"}
    assert allowed_hosts("::1", 80) == {"127.0.0.1:80", "localhost:80", "[::1]:80"}
    assert allowed_hosts("0.0.0.0", 80, ("box.lan", "10.0.0.5")) == {
        "127.0.0.1:80", "localhost:80", "box.lan:80", "10.0.0.5:80"}   # never "0.0.0.0:80"


def test_allow_host_needs_host(capsys):
    assert "it needs --host" in refused(capsys, "--allow-host", "box.lan")


def test_a_full_queue_is_busy_and_a_slow_job_too_large():
    from serve_server import LESSON
    from symattn.serve.workers import Busy, TooLarge, WorkerPool

    d = 16                       # surds: about 34 s whole, cut at the budget
    heavy = {"tokens": [f"t{i}" for i in range(d)],
             "X": [[f"{(i * 7 + j * 3) % 11 - 5}/{(i + j) % 7 + 1}+sqrt({[2, 3, 5][(i + j) % 3]})"
                    for j in range(d)] for i in range(d)],
             "W_q": [[(i * 5 + j) % 9 - 4 for j in range(d)] for i in range(d)],
             "W_k": [[(i * 3 + j * 2) % 7 - 3 for j in range(d)] for i in range(d)],
             "W_v": [[(i + j) % 5 - 2 for j in range(d)] for i in range(d)]}
    pool = WorkerPool(workers=1, queue=0, budget=2.0)

    async def both():
        slow = asyncio.ensure_future(pool.derive(heavy))
        await asyncio.sleep(0.1)
        with pytest.raises(Busy):
            await pool.derive(LESSON)
        with pytest.raises(TooLarge):
            await slow
        return await pool.derive(LESSON)      # the replaced worker answers

    from concurrent.futures import ThreadPoolExecutor

    try:                          # a thread of its own: a sync Playwright may hold this one's loop
        with ThreadPoolExecutor(1) as thread:
            result = thread.submit(asyncio.run, both()).result()
    finally:
        pool.close()
    assert result.error is None and "I love cats" in (result.html or "")


@pytest.mark.parametrize("message, field", [
    ("problem: cannot read '2^(10^9)' in W_q[0][2]: the exponent is over the cap", "W_q"),
    ("problem: W_k has 3 columns but W_q has 2 (d_k = 2): queries and keys need the same width", "W_k"),
    ("problem: mask is 2×2 but the scores are 3×3 (queries × keys)", "mask"),
    ("problem: unknown key 'eval'; the keys are title, about, X, W_q", None),
    ("too large for the page: use the CLI (symattn explain)", None),
])
def test_the_field_an_error_is_shown_beside(message, field):
    from symattn.serve.derive import field_of

    assert field_of(message) == field
