"""Reading input files (issue 9 item 4, item 7's BOM): regular files only, a byte cap,
one line for every failure, and nothing read before the checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import symattn as sa
from symattn import limits
from symattn.errors import ProblemError, SymattnError
from symattn.problem.tomlfile import load_toml, parse_toml, read_text

PROBLEM = 'Q = [[1, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'


class OtherError(SymattnError):
    """Stands for a caller's own error class (FiguresError, GradeError)."""


def _one_line(exc: BaseException, *fragments: str) -> str:
    message = str(exc)
    assert "\n" not in message and len(message) < 400
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_regular_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(PROBLEM, encoding="utf-8")
    assert read_text(path, what="a problem TOML file") == PROBLEM
    assert sa.Problem.from_toml(path).V_given[1, 1] == 4


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_before_reading() -> None:
    with pytest.raises(ProblemError) as info:
        read_text("/dev/zero", what="a problem TOML file")
    _one_line(info.value, "/dev/zero", "not a regular file", "a problem TOML file")
    with pytest.raises(ProblemError):
        sa.Problem.from_toml("/dev/zero")


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "innocent.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ProblemError) as info:
        load_toml(link, what="a TOML file with weights = [[...]]")
    _one_line(info.value, "innocent.toml", "not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(OtherError) as info:      # opening it for reading would block forever
        read_text(fifo, what="a figures TOML file", error=OtherError)
    _one_line(info.value, "pipe.toml", "not a regular file", "a figures TOML file")


def test_a_folder_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProblemError) as info:
        read_text(tmp_path, what="a problem TOML file")
    _one_line(info.value, "is a folder", "a problem TOML file")
    with pytest.raises(ProblemError) as info:
        read_text(tmp_path / "nope.toml", what="a problem TOML file")
    _one_line(info.value, "nope.toml", "no such file")


def test_the_byte_cap(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(b"x" * 100)
    assert read_text(path, what="a file", limit=100) == "x" * 100     # exactly at the cap
    with pytest.raises(OtherError) as info:
        read_text(path, what="a submissions CSV file", error=OtherError, limit=99)
    _one_line(info.value, "p.toml", "over 99 bytes", "a submissions CSV file")
    # the default cap: a sparse file one byte over is refused from its size alone
    big = tmp_path / "big.toml"
    with open(big, "wb") as handle:
        handle.truncate(limits.MAX_FILE_BYTES + 1)
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml(big)
    _one_line(info.value, "big.toml", "8.0 MiB", "MAX_FILE_BYTES")


def test_a_bom_is_dropped_and_bad_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + PROBLEM.encode())
    assert read_text(path, what="a file") == PROBLEM
    assert sa.Problem.from_toml(path).Q_given[0, 0] == 1
    path.write_bytes(b"Q = [[1]]\n\xff\xfe")
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml(path)
    _one_line(info.value, "not UTF-8")


@pytest.mark.parametrize(("text", "fragment"), [
    ("Q = [[1" + "0" * 5000 + "]]", "too many digits"),   # Python's int() refuses it
    ("Q = " + "[" * 50_000 + "]" * 50_000, "nest"),        # tomllib recursion
    ("Q = [[1, 2]\n", "not valid TOML"),
])
def test_toml_text_failures_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(OtherError) as info:
        parse_toml(text, source="bad.toml", error=OtherError)
    _one_line(info.value, "bad.toml", fragment)


def test_the_cli_refuses_dev_zero_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "symattn", "explain", "/dev/zero"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "not a regular file" in result.stderr
    assert "Traceback" not in result.stderr
