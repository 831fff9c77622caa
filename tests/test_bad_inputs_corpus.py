"""Every command on a corpus of bad inputs: one line, exit 2, no traceback, no signal.

Each case runs in-process through ``symattn.cli.main(argv)`` with a time
budget (an alarm: a case that runs past it fails, it does not hang the
suite); a few run as real subprocesses under a memory limit, where a case
could otherwise eat the test process (``/dev/zero``) or die by a signal.

Inputs that are bad must give exit 2 with exactly one stderr line
``symattn: error: ...``.  Inputs that are merely hostile (within the caps
they may be accepted: a BOM, a deeply nested root) may also give 0 or 1,
but never a traceback, and never run past the budget.
"""

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from symattn.cli import main

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 20          # CPU seconds per in-process case (CPU, not wall: a loaded machine must not fail it)
SUBPROCESS_BUDGET = 60
MEMORY_LIMIT = 2 << 30

GOOD_PROBLEM = 'Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'
GOOD_CSV = 'student,weights[0]\nann,"0.731, 0.269"\n'


def nested_sqrt(depth: int) -> str:
    return "sqrt(" * depth + "2" + ")" * depth


# file contents that are bad for every TOML reader: (name, bytes)
BAD_TOML = {
    "empty": b"",
    "malformed": b"Q = [[1, 2]\nK = \n",
    "binary": bytes(range(256)) * 4,
    "not-utf8": b'title = "caf\xe9"\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n',
    "nul-bytes": b"Q = [[1]]\x00\x00\nK = [[1]]\nV = [[1]]\n",
    "wrong-shapes": b"Q = [[1, 2]]\nK = [[1, 2, 3]]\nV = [[1]]\n",
    "huge-integer": b"Q = [[" + b"9" * 5000 + b"]]\nK = [[1]]\nV = [[1]]\n",
    "tiny-float": b"Q = [[1e-9999]]\nK = [[1]]\nV = [[1]]\n",
    # characters XML 1.0 forbids, refused when the problem is read (issue 24)
    "xml-forbidden-title": b'title = "a\\uFFFEb"\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n',
    "xml-forbidden-token": b'tokens = ["a\\uFFFF"]\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n',
}
# hostile but perhaps acceptable within the caps: 0, 1 or 2, never a traceback
HOSTILE_TOML = {
    "bom": "\ufeff".encode() + GOOD_PROBLEM.encode(),
    "nested-sqrt-64": f'Q = [["{nested_sqrt(64)}", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n'.encode(),
    "nested-sqrt-56": f'Q = [["{nested_sqrt(56)}", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n'.encode(),
    "tower": b'Q = [["(7^(1/4914))^(1/9441)^(1/4806)", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "prime-root": b'Q = [["(1/7244)^(1/9827)", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "power-10": b'Q = [["10^2200", 2]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "large-1e12": b"Q = [[1e12, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n",
    "large-1e30": b"Q = [[1e30, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n",
    "scale-1e12": b'Q = [[1, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\nscale = "1e12"\n',
    "python": b'Q = [["__import__(\'os\').system(\'true\')", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "control-token": b'tokens = ["a\\u001b[31m"]\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n',
    # user text that must not change an export's meaning (issue 24; tests/test_hostile_writers.py)
    "cloze-title": b'title = "{1:SHORTANSWER:=x} ~=#}"\ntokens = ["{2:NM:=1}", "b"]\n'
                   b'Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "html-tokens": b'title = "<script>alert(1)</script>"\ntokens = ["<img src=x onerror=alert(1)>", '
                   b'"<!--<script>"]\nQ = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n',
    "flat-Q": ("Q = [" + ", ".join(["1"] * 100_000) + "]\nK = [[1]]\nV = [[1]]\n").encode(),
}
BAD_CSV = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "header-only": b"student,weights[0]\n",
    "unbalanced-quote": b'student,weights[0]\n"ann,0.1\n',
    "unknown-target": b"student,nonsense[9]\nann,1\n",
}
HOSTILE_CSV = {
    "bom": "\ufeff".encode() + GOOD_CSV.encode(),
    "formula-id": b'student,weights[0]\n=cmd|\' /C calc\'!A0,"0.731, 0.269"\n',
    "nested-sqrt-cell": f'student,weights[0,0]\nann,{nested_sqrt(64)}\nbob,0.731\n'.encode(),
    "zeros-cell": ("student,weights[0,0]\nann,2." + "0" * 450 + "e0\nbob,0.731\n").encode(),
    "prime-root-cell": b"student,weights[0,0]\nann,(1/7244)^(1/9827)\nbob,0.731\n",
    "big-header": b"student,d_k^9999\nann,1\n",
}


class OverBudget(Exception):
    pass


def _alarm(signum, frame):
    raise OverBudget(f"ran past {BUDGET} CPU seconds")


def call(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run main(argv) in-process with the budget; returns (status, stdout, stderr)."""
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, BUDGET)
    try:
        status = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line(status: int, err: str, allowed: set[int], case: str) -> None:
    assert status in allowed, f"{case}: exit {status}, stderr {err!r}"
    assert "Traceback" not in err, f"{case}: {err}"
    if status == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("symattn: error: "), f"{case}: {err!r}"


@pytest.fixture
def corpus(tmp_path):
    """The files of the corpus, by name, plus a good problem and a good CSV."""
    paths = {}
    for name, data in {**{f"toml-{k}": v for k, v in {**BAD_TOML, **HOSTILE_TOML}.items()},
                       **{f"csv-{k}": v for k, v in {**BAD_CSV, **HOSTILE_CSV}.items()}}.items():
        path = tmp_path / (name + (".csv" if name.startswith("csv-") else ".toml"))
        path.write_bytes(data)
        paths[name] = str(path)
    (tmp_path / "good.toml").write_text(GOOD_PROBLEM)
    (tmp_path / "good.csv").write_text(GOOD_CSV)
    paths["good"] = str(tmp_path / "good.toml")
    paths["good-csv"] = str(tmp_path / "good.csv")
    paths["missing"] = str(tmp_path / "no-such-file.toml")
    paths["folder"] = str(tmp_path)
    return paths


def _figures(problem: str) -> str:
    return f'problem = "{problem}"\n[[figure]]\ntarget = "weights[0]"\ntext = "0.731, 0.269"\n'


def _commands(path: str, tmp: Path) -> dict[str, list[str]]:
    """Each command given ``path`` where it reads a problem (or claims/figures) file."""
    return {
        "explain": ["explain", path],
        "explain-json": ["explain", path, "--format", "json"],
        "explain-latex": ["explain", path, "--format", "latex"],
        "worksheet": ["worksheet", path, "-o", str(tmp / "ws-out")],
        "heads": ["heads", path],
        "facts": ["facts", path],
        "facts-claims": ["facts", "--claims", path],
        "check": ["check", path],
        "grade-problem": ["grade", path, str(tmp / "good.csv")],
        "export-moodle": ["export", "--to", "moodle", path, "--questions", "weights", "--force",
                          "-o", str(tmp / "quiz-out.xml")],
        "export-prairielearn": ["export", "--to", "prairielearn", path, "--questions", "weights",
                                "--force", "-o", str(tmp / "pl-out")],
    }


BAD_FILES = ["missing", "folder", *(f"toml-{k}" for k in BAD_TOML)]


@pytest.mark.parametrize("kind", BAD_FILES)
def test_bad_files_are_one_line_and_exit_2(kind, corpus, tmp_path, capsys):
    for command, argv in _commands(corpus[kind], tmp_path).items():
        status, _, err = call(argv, capsys)
        assert_one_line(status, err, {2}, f"{command} on {kind}")
    assert not any((tmp_path / n).exists() for n in ("ws-out", "quiz-out.xml", "pl-out"))


@pytest.mark.parametrize("kind", [f"toml-{k}" for k in HOSTILE_TOML])
def test_hostile_files_give_a_result_or_one_line(kind, corpus, tmp_path, capsys):
    for command, argv in _commands(corpus[kind], tmp_path).items():
        if command == "worksheet":
            argv = ["worksheet", corpus[kind], "-o", str(tmp_path / f"ws-{kind}")]
        status, _, err = call(argv, capsys)
        assert_one_line(status, err, {0, 1, 2}, f"{command} on {kind}")
        if kind in ("toml-cloze-title", "toml-html-tokens") and command.startswith("export"):
            assert status == 0, f"{command} on {kind}: {err}"     # escaped, not refused


@pytest.mark.parametrize("kind", [*(f"csv-{k}" for k in BAD_CSV), "missing", "folder"])
def test_bad_submissions_are_one_line_and_exit_2(kind, corpus, tmp_path, capsys):
    status, _, err = call(["grade", corpus["good"], corpus[kind]], capsys)
    assert_one_line(status, err, {2}, f"grade on {kind}")


@pytest.mark.parametrize("kind", [f"csv-{k}" for k in HOSTILE_CSV])
def test_hostile_submissions_grade_the_good_cells(kind, corpus, tmp_path, capsys):
    report = tmp_path / "report.csv"
    status, _, err = call(["grade", corpus["good"], corpus[kind], "-o", str(report)], capsys)
    assert_one_line(status, err, {0, 1, 2}, f"grade on {kind}")
    if kind.endswith("-cell"):   # bob's good cell is graded although ann's is hostile
        assert status in (0, 1) and "bob" in report.read_text(), err


def test_figures_files_naming_bad_problems(corpus, tmp_path, capsys):
    for kind in BAD_FILES:
        figures = tmp_path / f"fig-{kind}.toml"
        figures.write_text(_figures(corpus[kind]))
        status, _, err = call(["check", str(figures)], capsys)
        assert_one_line(status, err, {2}, f"check on a figures file naming {kind}")


def test_bad_names_and_options(capsys):
    for argv in (["examples", "--show", "no-such-example"], ["explain", "--example", "nope"],
                 ["explain", "--digits", "0"], ["explain", "--rows", "nobody"],
                 ["explain", "--format", "json", "--pdf", "-o", "x.pdf"],
                 ["worksheet", "--versions", "2", "-o", "w"], ["heads", "--json", "--latex"],
                 ["facts", "--fact", "no-such-fact"], ["check"], ["grade"], ["nosuchcommand"],
                 ["explain", "--no-such-flag"]):
        status, _, err = call(argv, capsys)
        assert_one_line(status, err, {2}, " ".join(argv))


OUTPUT_COMMANDS = {
    "explain": ["explain"],
    "explain-json": ["explain", "--format", "json"],
    "explain-pdf": ["explain", "--pdf"],
    "heads": ["heads"],
    "facts": ["facts", "--general"],
    "check": ["check", "--example", "i-love-cats"],
    "grade": ["grade", "GOOD", "GOODCSV"],
}


@pytest.mark.parametrize("command", OUTPUT_COMMANDS)
def test_bad_output_paths(command, corpus, tmp_path, capsys):
    argv = [corpus["good"] if a == "GOOD" else corpus["good-csv"] if a == "GOODCSV" else a
            for a in OUTPUT_COMMANDS[command]]
    (tmp_path / "sub").mkdir()
    for target in ("", str(tmp_path / "sub"), str(tmp_path / "nope" / "x.pdf"), "/dev/full"):
        if command == "explain-pdf" and target == "/dev/full":
            continue  # (a PDF must be named .pdf)
        status, _, err = call([*argv, "-o", target], capsys)
        assert_one_line(status, err, {2}, f"{command} -o {target!r}")
    assert list((tmp_path / "sub").iterdir()) == []


def test_bad_worksheet_folders(corpus, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    for target in ("", str(tmp_path / "a-file"), str(tmp_path / "nope" / "ws")):
        status, _, err = call(["worksheet", "-o", target], capsys)
        assert_one_line(status, err, {2}, f"worksheet -o {target!r}")


# -- real subprocesses: /dev/zero under a memory limit, signals, a missing file ----------

def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run([sys.executable, "-m", "symattn", *args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=SUBPROCESS_BUDGET, preexec_fn=_limited)
    except subprocess.TimeoutExpired:
        pytest.fail(f"symattn {' '.join(args)} ran past {SUBPROCESS_BUDGET} s")


@pytest.mark.parametrize("argv", [
    ["explain", "/dev/zero"],
    ["facts", "--claims", "/dev/zero"],
    ["grade", "GOOD", "/dev/zero"],
    ["check", "FIGURES-DEVZERO"],
], ids=["explain", "facts-claims", "grade", "check-figures-problem"])
def test_dev_zero_is_refused_without_eating_memory(argv, tmp_path):
    (tmp_path / "good.toml").write_text(GOOD_PROBLEM)
    (tmp_path / "fig.toml").write_text(_figures("/dev/zero"))
    argv = [str(tmp_path / "good.toml") if a == "GOOD" else str(tmp_path / "fig.toml")
            if a == "FIGURES-DEVZERO" else a for a in argv]
    done = run_limited(*argv, cwd=tmp_path)
    assert done.returncode >= 0, f"killed by signal {-done.returncode}"
    assert_one_line(done.returncode, done.stderr, {2}, " ".join(argv))


def test_subprocess_missing_file_and_hostile_scale(tmp_path):
    done = run_limited("explain", "no-such.toml", cwd=tmp_path)
    assert_one_line(done.returncode, done.stderr, {2}, "explain no-such.toml")
    (tmp_path / "big.toml").write_bytes(HOSTILE_TOML["scale-1e12"])
    done = run_limited("explain", "big.toml", cwd=tmp_path)
    assert done.returncode >= 0, f"killed by signal {-done.returncode} (issue 9 item 2: SIGFPE)"
    assert_one_line(done.returncode, done.stderr, {0, 2}, "explain big.toml")


def test_interrupt_is_exit_130_without_traceback(monkeypatch, capsys):
    import symattn.commands.examples as examples

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(examples, "run", interrupted)
    status = main(["examples"])
    assert status == 130 and "Traceback" not in capsys.readouterr().err


def test_a_bug_keeps_its_traceback(monkeypatch):
    import symattn.commands.examples as examples

    def buggy(args):
        raise ZeroDivisionError("a bug in symattn")

    monkeypatch.setattr(examples, "run", buggy)
    with pytest.raises(ZeroDivisionError):
        main(["examples"])
