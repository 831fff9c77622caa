"""The command line in-process, returning what a subprocess would have shown.

Why: a fresh ``python3 -m symattn`` costs about a second on 2 shared cores (sympy's
import), and the tests had ~90 such calls.  ``symattn.cli.main(argv)`` is what
``__main__`` calls, so exit status, stdout and stderr are the same; the few tests that
are about the process itself (tests/test_cli.py, a missing TeX engine on PATH, signals,
a killed run) keep a real subprocess.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

from symattn.cli import main

__all__ = ["cli"]


def _stream(data: str = "") -> io.TextIOWrapper:
    """A text stream with a ``.buffer`` (a command may write bytes, as to a real stdout)."""
    return io.TextIOWrapper(io.BytesIO(data.encode("utf-8")), encoding="utf-8", write_through=True)


def cli(*args: str, cwd=None, input: str = "") -> subprocess.CompletedProcess:
    """Run ``symattn ARGS`` in this process (in ``cwd``, reading ``input`` as stdin)."""
    out, err, stdin = _stream(), _stream(), _stream(input)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, out, err
    try:
        with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
            try:
                code = main(list(args))
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    text = [s.buffer.getvalue().decode("utf-8") for s in (out, err)]
    return subprocess.CompletedProcess(["symattn", *args], code, text[0], text[1])
