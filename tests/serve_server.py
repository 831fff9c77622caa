"""A real ``symattn serve`` on 127.0.0.1 for the tests: a subprocess on a free port.

The server is the command a user runs (``python3 -m symattn serve --no-browser``), so the
tests go through uvicorn, the guards and the worker processes as they are; it is stopped
with SIGTERM (uvicorn's graceful shutdown, which also stops the workers) after the tests.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running server: its port, and plain HTTP requests to it."""

    port: int
    process: subprocess.Popen

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, bytes, dict]:
        """(status, body, headers) of one request; Host and Origin are the page's unless given."""
        sent = {"Host": f"127.0.0.1:{self.port}", "Origin": self.origin,
                "Content-Type": "application/json", **(headers or {})}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers={k: v for k, v in sent.items() if v is not None})
            reply = conn.getresponse()
            return reply.status, reply.read(), {k.lower(): v for k, v in reply.getheaders()}
        finally:
            conn.close()

    def derive(self, problem: dict, **headers: str) -> tuple[int, dict]:
        status, body, _ = self.request("POST", "/derive", json.dumps(problem).encode(), headers)
        return status, json.loads(body) if body.startswith(b"{") else {"text": body.decode()}

    def answering(self) -> bool:
        """The page loads and the lesson is derived: the server survived what came before."""
        status, body, _ = self.request("GET", "/")
        if status != 200 or b"I love cats" not in body:
            return False
        status, answer = self.derive(LESSON)
        return status == 200 and "html" in answer


LESSON = {"title": "I love cats", "tokens": ["I", "love", "cats"],
          "X": [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
          "W_q": [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
          "W_k": [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
          "W_v": [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]}


def start_server(*extra: str, env: dict[str, str] | None = None) -> Server:
    """``symattn serve --no-browser`` with ``extra`` arguments (``env``: more variables)."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    process = subprocess.Popen([sys.executable, "-m", "symattn", "serve", "--no-browser",
                                "--port", str(port), *extra], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = Server(port, process)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"symattn serve exited: {process.stderr.read().decode()}")
        try:
            if server.request("GET", "/", timeout=5)[0] == 200:
                return server
        except OSError:
            time.sleep(0.2)
    stop_server(server)
    raise AssertionError("symattn serve did not answer within 90 s")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(5)


def open_page(server: Server, **context_options: object):
    """A fresh Chromium tab on the server's page (a generator for a pytest fixture): every
    request to another origin is refused and recorded, and the tab's console errors, other
    than a refused edit's 422, fail the test when it ends."""
    from browser import need_browser, shared_browser

    need_browser()
    context = shared_browser().browser.new_context(viewport={"width": 1200, "height": 900},
                                                   **context_options)
    foreign: list[str] = []
    errors: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(server.origin + "/"):
            r.continue_()
        else:
            foreign.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    tab = context.new_page()
    tab.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    tab.on("pageerror", lambda err: errors.append(str(err)))
    tab.goto(server.origin + "/", wait_until="load")
    yield tab
    context.close()
    assert foreign == [], f"the page fetched {foreign}"
    refusals = "Failed to load resource: the server responded with a status of 422"
    assert [e for e in errors if not e.startswith(refusals)] == [], errors   # 422: a refused edit
