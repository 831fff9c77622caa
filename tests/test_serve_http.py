"""symattn serve over plain HTTP: the guards, the caps and the budget, against a real server.

Each refusal is followed by a check that the server still answers (the page loads and the
lesson is derived), so a request that broke a worker or the event loop would fail here.
"""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from serve_server import LESSON, start_server, stop_server

pytest.importorskip("starlette")


@pytest.fixture(scope="module")
def server():
    running = start_server("--budget", "3")
    yield running
    stop_server(running)


def test_the_page_and_its_policy(server):
    status, body, headers = server.request("GET", "/")
    assert status == 200
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert b"<script>" not in body and b'<script src="/static/serve.js"></script>' in body
    status, script, headers = server.request("GET", "/static/serve.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert b"/derive" in script
    assert server.request("GET", "/static/../app.py")[0] == 404


def test_the_lesson_is_derived_as_explain_prints_it(server):
    import os
    import subprocess
    import sys

    from serve_server import ROOT

    page = subprocess.run([sys.executable, "-m", "symattn", "explain", "--format", "html"], cwd=ROOT,
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    status, answer = server.derive(LESSON)
    assert status == 200
    main = page[page.index("<main>\n") + 7:page.rindex("</main>")]
    assert answer["html"] == main


def test_a_foreign_host_is_refused(server):
    for host in ("evil.example:%d" % server.port, "127.0.0.1.nip.io:%d" % server.port, "127.0.0.1:1"):
        status, body, _ = server.request("GET", "/", headers={"Host": host})
        assert status == 400, host
        assert b"unknown host" in body
        status, _ = server.derive(LESSON, Host=host)
        assert status == 400
    assert server.request("GET", "/", headers={"Host": f"localhost:{server.port}"})[0] == 200
    assert server.answering()


def test_a_foreign_origin_is_refused(server):
    for origin in ("http://evil.example", f"http://localhost:{server.port + 1}", "null"):
        status, answer = server.derive(LESSON, Origin=origin)
        assert status == 403, origin
        assert "another site" in answer["text"]
    status, body, _ = server.request("POST", "/derive", json.dumps(LESSON).encode(), {"Origin": None})
    assert status == 403                      # no Origin at all: not the page's own
    assert server.answering()


def test_a_10_mb_body_is_refused(server):
    status, body, _ = server.request("POST", "/derive", b"[" * 10_000_000)
    assert status == 413 and b"256 KiB" in body
    assert server.answering()


def test_a_chunked_body_past_the_cap_is_refused(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall((f"POST /derive HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                   f"Origin: {server.origin}\r\nTransfer-Encoding: chunked\r\n\r\n").encode())
        chunk = b"x" * 65536
        for _ in range(5):                     # 320 KiB, no Content-Length
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        reply = http.client.HTTPResponse(s)
        reply.begin()
        assert reply.status == 413
    assert server.answering()


def test_a_2000_by_2000_matrix_is_refused(server):
    big = {"tokens": [f"t{i}" for i in range(2000)], "Q": [[1] * 2000] * 2000,
           "K": [[1] * 2000] * 2000, "V": [[1] * 2000] * 2000}
    status, body, _ = server.request("POST", "/derive", json.dumps(big).encode())
    assert status == 413
    assert server.answering()


def test_a_matrix_past_max_side_meets_the_cli_cap(server):
    rows = [[1]] * 1025
    status, answer = server.derive({"tokens": [f"t{i}" for i in range(1025)], "Q": rows, "K": rows, "V": rows})
    assert status == 422
    assert "1,024 rows or columns (MAX_SIDE)" in answer["error"] and answer["field"] == "Q"
    assert server.answering()


def test_a_huge_power_is_refused_with_the_cli_message(server):
    problem = {**LESSON, "W_q": [[1, 0, "2^(10^9)"], [1, 0, 0], [0, 0, 1], [0, 1, 1]]}
    status, answer = server.derive(problem)
    assert status == 422
    assert answer["error"] == ("problem: cannot read '2^(10^9)' in W_q[0][2]: the exponent is over the "
                               "cap of 10,000 (MAX_POWER_EXPONENT) at column 2; use a smaller exponent")
    assert answer["field"] == "W_q"
    assert server.answering()


@pytest.mark.parametrize("body, words", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "must be a table"),
    (b'{"tokens": ["a"], "Q": [[NaN]], "K": [[1]], "V": [[1]]}', "NaN is not a number"),
    (b'{"Q": [[' + b"9" * 5000 + b']]}', "too many digits"),
    (b'{"eval": "__import__(\'os\')"}', "unknown key 'eval'"),
    (b"[" * 100_000, "nest too deeply"),
])
def test_bad_json_gets_one_line(server, body, words):
    status, raw, _ = server.request("POST", "/derive", body)
    assert status == 422, raw[:200]
    answer = json.loads(raw)
    assert words in answer["error"] and "\n" not in answer["error"]
    assert server.answering()


def test_a_problem_over_the_budget_is_too_large_and_the_worker_is_replaced(server):
    d = 16                                  # 34 s of surds when worked whole (measured); budget 3 s
    heavy = {"tokens": [f"t{i}" for i in range(d)],
             "X": [[f"{(i * 7 + j * 3) % 11 - 5}/{(i + j) % 7 + 1}+sqrt({[2, 3, 5][(i + j) % 3]})"
                    for j in range(d)] for i in range(d)],
             "W_q": [[(i * 5 + j) % 9 - 4 for j in range(d)] for i in range(d)],
             "W_k": [[(i * 3 + j * 2) % 7 - 3 for j in range(d)] for i in range(d)],
             "W_v": [[(i + j) % 5 - 2 for j in range(d)] for i in range(d)]}
    status, answer = server.derive(heavy)
    assert status == 422
    assert answer["error"].startswith("too large for the page: use the CLI")
    assert server.answering()
    assert server.answering()               # both workers (one of them new) answer


def test_exact_decimals_from_json_floats(server):
    problem = {**LESSON, "W_q": [[0.1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]}
    status, answer = server.derive(problem)
    assert status == 200
    assert "<mfrac><mn>1</mn><mn>10</mn></mfrac>" in answer["html"]    # 0.1 read as 1/10, not a float


def test_the_toml_download_reads_back_and_refuses_what_would_not(server):
    import tomllib

    problem = {**LESSON, "W_q": [[0.25, 0, "sqrt(2)"], [1, 0, 0], [0, 0, 1], [0, 1, 1]], "mask": "causal"}
    status, body, headers = server.request("POST", "/toml", json.dumps(problem).encode())
    assert status == 200 and headers["content-disposition"] == 'attachment; filename="problem.toml"'
    assert tomllib.loads(body.decode()) == {**problem, "W_q": [["0.25", 0, "sqrt(2)"], *problem["W_q"][1:]]}
    for bad, words in (({**LESSON, "Q": [[None]]}, "cannot write NoneType"),
                       ({**LESSON, "rope": {"a = 1\nQ": 2}}, "would not read back"),
                       ({"__class__": 1}, "unknown key '__class__'")):
        status, body, _ = server.request("POST", "/toml", json.dumps(bad).encode())
        assert status == 422 and words in json.loads(body)["error"], body
    status, _, _ = server.request("POST", "/toml", json.dumps(LESSON).encode(), {"Origin": "http://evil.example"})
    assert status == 403
    assert server.answering()


def test_the_digits_of_the_page_are_capped(server):
    for digits in ("0", "31", "abc", "1e3", "%C2%B2", "%D9%A3", "9" * 5000):   # ², Arabic-Indic 3
        status, body, _ = server.request("POST", f"/derive?digits={digits}", json.dumps(LESSON).encode())
        assert status == 422 and "digits must be a whole number from 1 to 30" in json.loads(body)["error"]
    status, body, _ = server.request("POST", "/derive?digits=5", json.dumps(LESSON).encode())
    html = json.loads(body)["html"]
    assert status == 200 and "<mn>0.00089045</mn>" in html and "<mn>0.000890</mn>" not in html
    assert server.answering()


def test_checking_figures_over_http(server):
    figures = [{"target": "sqrt(d_k)", "text": "1.73"}, {"target": "bogus", "text": "1"}]
    status, body, _ = server.request("POST", "/check", json.dumps({"problem": LESSON, "figures": figures}).encode())
    html = json.loads(body)["html"]
    assert status == 200 and "✓ rounded" in html and "unknown name" in html and "bogus" in html
    for bad in ({"problem": LESSON}, {"problem": [], "figures": figures}, {"problem": LESSON, "figures": "x"},
                {"problem": LESSON, "figures": [{"target": "Q", "text": "1"}] * 51}):
        status, body, _ = server.request("POST", "/check", json.dumps(bad).encode())
        assert status == 422, bad
    status, _, _ = server.request("POST", "/check", json.dumps({"problem": LESSON, "figures": figures}).encode(),
                                  {"Origin": "http://evil.example"})
    assert status == 403
    assert server.answering()
