"""What commands write: file modes, bad output paths, worksheet folders that lose
nothing, LaTeX that compiles whatever the names, and the small view defects
(issue 8 items 5, 7, 10, 12; issue 9 items 6 and 7)."""

import errno
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import mpmath
import pytest
import sympy

import symattn as sa
from symattn.output import files
from symattn.cli import main
from test_pdf import need_tex, pdf_text

ROOT = Path(__file__).resolve().parent.parent

# token names and a title with every TeX special character and some non-ASCII
SPECIAL_TOKENS = ["a_b", "c&d", "50%", "$x", "#1"]
SPECIAL_KEYS = ["{k}", "t~i", "x^2", "back\\slash", "café√"]
SPECIAL_TITLE = "Spécial_&%$#{}~^\\ √ names"
SPECIAL_TOML = f"""title = {json.dumps(SPECIAL_TITLE)}
tokens = {json.dumps(SPECIAL_TOKENS)}
key_tokens = {json.dumps(SPECIAL_KEYS, ensure_ascii=False)}
Q = [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]]
K = [[1, 0], [0, 1], [1, 1], [2, 1], [1, 2]]
V = [[1, 2], [3, 4], [5, 6], [7, 8], [9, 0]]
"""


def run(*args: str, cwd=None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "symattn", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300, **kw)


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("symattn: error: "), err
    return lines[0]


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


# -- issue 8 item 10: modes ------------------------------------------------------------

def test_text_output_gets_the_mode_open_gives(tmp_path, umask022, capsys):
    assert main(["explain", "-o", str(tmp_path / "lesson.txt")]) == 0
    assert stat.S_IMODE(os.stat(tmp_path / "lesson.txt").st_mode) == 0o644
    os.umask(0o027)
    assert main(["explain", "--format", "json", "-o", str(tmp_path / "l.json")]) == 0
    assert stat.S_IMODE(os.stat(tmp_path / "l.json").st_mode) == 0o640
    # a file that is replaced keeps its own mode, as when overwritten in place
    os.chmod(tmp_path / "lesson.txt", 0o604)
    assert main(["explain", "--digits", "5", "-o", str(tmp_path / "lesson.txt")]) == 0
    assert stat.S_IMODE(os.stat(tmp_path / "lesson.txt").st_mode) == 0o604
    assert "0.13613" in (tmp_path / "lesson.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.json", "lesson.txt"]  # no temp files


def test_grade_report_and_pdf_get_the_mode_open_gives(tmp_path, umask022):
    ws = tmp_path / "ws"
    assert main(["worksheet", "-o", str(ws)]) == 0
    for path in ws.iterdir():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644, path
    assert stat.S_IMODE(os.stat(ws).st_mode) == 0o755
    csv = tmp_path / "class.csv"
    csv.write_text("student,weights[I]\nann,\"0.136, 0.432, 0.432\"\n")
    report = tmp_path / "report.csv"
    main(["grade", str(ws / "version-A.toml"), str(csv), "-o", str(report)])
    assert stat.S_IMODE(os.stat(report).st_mode) == 0o644
    assert "ann" in report.read_text()
    files.write_atomically(b"%PDF-1.4 bytes", tmp_path / "x.pdf")
    assert stat.S_IMODE(os.stat(tmp_path / "x.pdf").st_mode) == 0o644


def test_new_file_mode_follows_the_umask(umask022):
    assert files.current_umask() == 0o022 and files.new_file_mode() == 0o644
    os.umask(0o077)
    assert files.new_file_mode() == 0o600 and files.new_folder_mode() == 0o700


# -- issue 9 item 7: bad output paths ---------------------------------------------------

@pytest.mark.parametrize("command", [["explain"], ["explain", "--format", "json"], ["heads"],
                                     ["check", "--example", "i-love-cats"]])
def test_bad_output_paths_are_one_line_and_exit_2(tmp_path, capsys, command):
    (tmp_path / "folder").mkdir()
    for target, says in (("", "output file name is empty"),
                         (str(tmp_path / "folder"), "it is a folder"),
                         (str(tmp_path / "folder") + "/", "it is a folder"),
                         (str(tmp_path / "nope" / "x.txt"), "does not exist"),
                         ("/dev/full", "No space left on device")):
        assert main([*command, "-o", target]) == 2, target
        assert says in one_error_line(capsys.readouterr().err), target
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]
    assert list((tmp_path / "folder").iterdir()) == []


def test_unwritable_folder_and_full_disk_are_one_line(tmp_path, capsys, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    with monkeypatch.context() as m:   # (the tests may run as root, who may write anywhere)
        m.setattr(files.tempfile, "mkstemp", denied)
        assert main(["explain", "-o", str(tmp_path / "out.txt")]) == 2
    assert "Permission denied" in one_error_line(capsys.readouterr().err)

    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.handle, name)

    monkeypatch.setattr(files.os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    (tmp_path / "out.txt").write_text("the old file")
    assert main(["explain", "-o", str(tmp_path / "out.txt")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "No space left on device" in line and "out.txt" in line
    assert (tmp_path / "out.txt").read_text() == "the old file"   # untouched, no temp file left
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_full_stdout_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "symattn", "explain"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert "No space left on device" in one_error_line(done.stderr)


def test_output_onto_a_symlink_writes_the_file_it_points_to(tmp_path, capsys):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert main(["explain", "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)   # the link is kept
    assert "I love cats" in real.read_text()
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "made.txt")
    assert main(["explain", "-o", str(dangling)]) == 0
    assert dangling.is_symlink() and "I love cats" in (tmp_path / "made.txt").read_text()


def test_devices_are_written_in_place_not_replaced(capsys):
    assert main(["explain", "-o", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_pdf_named_tex_is_refused(tmp_path, capsys):
    assert main(["explain", "--pdf", "-o", str(tmp_path / "lesson.tex")]) == 2
    assert "-o lesson.pdf" in one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_text_named_pdf_is_refused(tmp_path, capsys):
    """The mirror case: -o FILE.pdf without --pdf would write text into a .pdf file."""
    assert main(["explain", "-o", str(tmp_path / "lesson.pdf")]) == 2
    assert "add --pdf" in one_error_line(capsys.readouterr().err)
    assert main(["heads", "--example", "alibi-heads", "-o", str(tmp_path / "heads.PDF")]) == 2
    assert "add --pdf" in one_error_line(capsys.readouterr().err)    # every command writing LaTeX has --pdf
    assert list(tmp_path.iterdir()) == []
    assert main(["explain", "-o", str(tmp_path / "lesson.txt")]) == 0
    assert (tmp_path / "lesson.txt").read_text().startswith("I love cats")


def test_tex_runs_without_shell_escape(monkeypatch):
    from symattn.document import pdf

    monkeypatch.setattr(pdf.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert "-no-shell-escape" in pdf.find_engine()
    monkeypatch.setattr(pdf.shutil, "which", lambda name: None if name == "pdflatex" else "/x")
    assert "-latexoption=-no-shell-escape" in pdf.find_engine()


def test_shell_escape_in_a_name_runs_nothing(tmp_path):
    need_tex()
    from symattn.document.pdf import compile_tex, find_engine
    from symattn.document.trace_latex import render_latex

    marker = tmp_path / "ran"
    problem = sa.Problem(Q=[[1]], K=[[1]], V=[[1]], tokens=[f"\\immediate\\write18{{touch {marker}}}"])
    compile_tex(render_latex(sa.attend(problem)), "escape")
    assert not marker.exists()
    # TeX's log says "restricted \write18 enabled." unless -no-shell-escape turned it off
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\\begin{document}x\\end{document}")
    subprocess.run([*find_engine(), "doc.tex"], cwd=tmp_path, capture_output=True, timeout=120)
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert "write18 enabled" not in log, log[:500]


# -- issue 8 item 12 ------------------------------------------------------------------

def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"symattn {sa.__version__}"
    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"symattn {sa.__version__}"


def test_step_heading_says_the_formula_once_and_print_trace_is_the_derivation():
    trace = sa.attend(sa.load_example("i-love-cats"))

    class Printer:
        def __init__(self):
            self.out = ""

        def text(self, s):
            self.out += s

    p = Printer()
    trace.weights._repr_pretty_(p, False)
    assert p.out.splitlines()[0] == "weights = exp / row_sum  (3×3)"
    p = Printer()
    trace.Q._repr_pretty_(p, False)
    assert p.out.splitlines()[0] == "Q = X·W_q  (3×3)"
    text = str(trace)
    assert "row maximum: 12/√3 ≈ 6.93" in text and "≈ [1.86, 6.32, 1.70]" in text
    assert not text.startswith("<Trace")


def test_a_step_name_typo_lists_the_steps():
    trace = sa.attend(sa.load_example("i-love-cats"))
    with pytest.raises(AttributeError, match="did you mean 'weights'.*the steps are X, W_q, .*output"):
        trace.weight
    with pytest.raises(sa.SymattnError, match="the steps are"):
        trace.weight
    with pytest.raises(sa.SymattnError, match="no step named 'nope'; the steps are"):
        trace.step("nope")
    # a notebook probing for display hooks gets the real hook or a plain AttributeError
    assert "symattn-doc" in trace._repr_html_()
    assert not hasattr(trace, "_repr_javascript_")


HULL_TOML = """tokens = ["a"]
key_tokens = ["x", "y"]
Q = [[10, 0]]
K = [[1, 0], [0, 1]]
V = [["7/6", "-1/6"], [0, 2]]
scale = 1
"""


def test_convex_hull_check_reads_right_with_fractional_bounds(tmp_path, capsys):
    (tmp_path / "hull.toml").write_text(HULL_TOML)
    # output[a, 0] = (7/6)·e^10/(e^10 + 1) = 1.16661... < 7/6 = 1.1666...; both read 1.17
    exact = mpmath.mpf(7) / 6 * mpmath.e ** 10 / (mpmath.e ** 10 + 1)
    assert f"{float(exact):.2f}" == "1.17" and exact < mpmath.mpf(7) / 6
    assert main(["explain", str(tmp_path / "hull.toml")]) == 0
    text = capsys.readouterr().out
    assert "column 0: 0 ≤ 1.17 ≤ 7/6 ≈ 1.17" in text
    assert "column 1: −1/6 ≈ −0.167 ≤" in text and "≤ 2\n" in text
    assert main(["explain", str(tmp_path / "hull.toml"), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert "1.17 \\le \\frac{7}{6} \\approx 1.17" in tex
    assert "- \\frac{1}{6} \\approx -0.167 &\\le" in tex


# -- issue 8 item 7: JSON of a symbolic problem -----------------------------------------

def test_json_of_a_symbolic_problem(tmp_path, capsys):
    (tmp_path / "sym.toml").write_text('symbols = ["b", "a"]\nQ = [["a", 1], [1, 1]]\n'
                                       'K = [[1, 0], [0, "b"]]\nV = [[1], [2]]\nmask = "causal"\n')
    assert main(["explain", str(tmp_path / "sym.toml"), "--format", "json", "--digits", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["symbols"] == ["a", "b"]
    steps = data["steps"]
    assert steps["Q"]["decimal"] == [[None, "1"], ["1", "1"]]
    assert sympy.sympify(steps["Q"]["exact"][0][0]) == sympy.Symbol("a")
    # row 0 is causal: only key 0, so its weight is exactly 1 whatever a is
    assert steps["weights"]["decimal"][0] == ["1", "0"]
    assert steps["masked"]["decimal"][0] == [None, "-inf"]
    # row 1 depends on b: its weights are formulas with no decimal
    assert steps["weights"]["decimal"][1] == [None, None]
    a, b = sympy.symbols("a b")
    w10 = sympy.sympify(steps["weights"]["exact"][1][0])
    expected = sympy.exp(1 / sympy.sqrt(2)) / (sympy.exp(1 / sympy.sqrt(2)) + sympy.exp(b / sympy.sqrt(2)))
    assert sympy.simplify(w10.subs(b, 3) - expected.subs(b, 3)) == 0
    # a numeric problem lists no symbols
    assert main(["explain", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["symbols"] == []


def test_json_symbolic_numbers_match_the_numeric_problem(capsys):
    problem = sa.Problem.from_toml_text('symbols = ["a"]\nQ = [["a", 1], [1, 0]]\nK = [[1, 0], [0, 1]]\n'
                                        'V = [[1], [2]]\nmask = "causal"\n')
    from symattn.document.trace_json import trace_to_json

    data = trace_to_json(sa.attend(problem), 6)
    # row 1: e^(1/√2) / (e^(1/√2) + 1), checked with mpmath at 30 digits
    mpmath.mp.dps = 30
    w = mpmath.e ** (1 / mpmath.sqrt(2)) / (mpmath.e ** (1 / mpmath.sqrt(2)) + 1)
    assert data["steps"]["weights"]["decimal"][1][0] == mpmath.nstr(w, 6)
    assert data["steps"]["output"]["decimal"][1] == [mpmath.nstr(w + 2 * (1 - w), 6)]
    mpmath.mp.dps = 15


# -- issue 8 item 5: every LaTeX output compiles, whatever the names --------------------

def _pdf_of(tex: str, tmp_path: Path, name: str) -> str:
    from symattn.document.pdf import compile_tex

    pdf = tmp_path / f"{name}.pdf"
    pdf.write_bytes(compile_tex(tex, name))
    return pdf_text(pdf)


def _assert_names(text: str, names: list[str]) -> None:
    """Each name is in the PDF's text.  (pdftotext puts the math font's √ on a line of
    its own, so √ is looked for on its own.)"""
    flat = re.sub(r"\s+", "", text)
    for name in names:
        for part in name.split("√"):
            assert re.sub(r"\s+", "", part) in flat, (name, text[:2000])
        if "√" in name:
            assert "√" in flat


def test_explain_latex_with_special_names_compiles(tmp_path, capsys):
    need_tex()
    (tmp_path / "sp.toml").write_text(SPECIAL_TOML, encoding="utf-8")
    assert main(["explain", str(tmp_path / "sp.toml"), "--format", "latex"]) == 0
    text = _pdf_of(capsys.readouterr().out, tmp_path, "explain")
    _assert_names(text, SPECIAL_TOKENS + SPECIAL_KEYS + [SPECIAL_TITLE])
    assert "Checks, proved for this instance" in text


def test_worksheet_with_special_names_compiles(tmp_path, capsys):
    need_tex()
    (tmp_path / "sp.toml").write_text(SPECIAL_TOML, encoding="utf-8")
    assert main(["worksheet", str(tmp_path / "sp.toml"), "-o", str(tmp_path / "ws"), "--pdf"]) == 0
    sheet = pdf_text(tmp_path / "ws" / "version-A-sheet.pdf")
    key = pdf_text(tmp_path / "ws" / "version-A-key.pdf")
    _assert_names(sheet, SPECIAL_TOKENS + ["{k}", "t~i", "x^2", "back\\slash", "café"])
    _assert_names(key, SPECIAL_TOKENS + SPECIAL_KEYS + [SPECIAL_TITLE.split(",")[0]])


def test_heads_latex_with_special_names_compiles(tmp_path, capsys):
    need_tex()
    from symattn.heads.heads import DEMO_TOML
    from symattn.document.trace_latex import document

    toml = DEMO_TOML.replace('tokens = ["I", "love", "cats"]', 'tokens = ["a_b", "c&d", "é√%"]')
    toml = re.sub(r'^title = .*$', 'title = "Heads: $#{}~^\\\\\\\\ é"', toml, flags=re.M)
    assert 'tokens = ["a_b"' in toml
    (tmp_path / "heads.toml").write_text(toml, encoding="utf-8")
    assert main(["heads", str(tmp_path / "heads.toml"), "--latex"]) == 0
    text = _pdf_of(document(capsys.readouterr().out), tmp_path, "heads")
    _assert_names(text, ["a_b", "c&d", "é√%", "Heads: $#{}~^\\ é", "0.136"])


def test_names_latex_has_no_glyph_for_still_compile(tmp_path):
    need_tex()
    from symattn.document.trace_latex import document
    from symattn.document.support.texutil import tex_escape

    names = ["esc\x1b[31mred", "中文", "α-β Ω", "tab\there", "€5 ½ ±"]
    text = _pdf_of(document(" \\par ".join(tex_escape(n) for n in names)), tmp_path, "glyphs")
    _assert_names(text, ["esc\\x1b[31mred", "[U+4E2D][U+6587]", "α-β", "€5", "tab\\x09here"])


def test_look_at_special_names_png(tmp_path):
    """The compiled page is also rendered (pdftoppm) so a person can look at it."""
    need_tex()
    import shutil

    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm not on PATH")
    (tmp_path / "sp.toml").write_text(SPECIAL_TOML, encoding="utf-8")
    done = run("explain", "sp.toml", "--pdf", "-o", "sp.pdf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    subprocess.run(["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1", "sp.pdf", "page"],
                   cwd=tmp_path, check=True)
    assert (tmp_path / "page-1.png").stat().st_size > 1000


# -- issue 9 item 6: worksheet folders lose nothing --------------------------------------

def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_worksheet_never_deletes_files_it_did_not_write(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["worksheet", "--versions", "2", "--seed", "1", "-o", str(ws)]) == 0
    (ws / "thesis.tex").write_text("my thesis")
    (ws / "photos").mkdir()
    (ws / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 a cat")
    assert main(["worksheet", "--versions", "1", "--seed", "2", "-o", str(ws)]) == 0
    assert (ws / "thesis.tex").read_text() == "my thesis"
    assert (ws / "photos" / "cat.jpg").read_bytes() == b"\xff\xd8 a cat"
    assert not (ws / "version-B.toml").exists()                   # symattn's old file removed
    assert "seed 2" in (ws / "version-A.toml").read_text()
    assert "version-B" not in (ws / "worksheet.txt").read_text()
    assert _names(tmp_path) == ["ws"]                             # no staging folder left


def test_a_folder_symattn_did_not_make_is_refused_and_force_replaces_nothing(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "worksheet.txt").write_text("my own notes, not a symattn manifest\nthesis.tex\n")
    (mine / "thesis.tex").write_text("keep")
    assert main(["worksheet", "-o", str(mine)]) == 2
    assert "symattn did not write" in one_error_line(capsys.readouterr().err)
    assert _names(mine) == ["thesis.tex", "worksheet.txt"]
    # --force: a name clash (its own worksheet.txt) is refused, nothing changes
    assert main(["worksheet", "-o", str(mine), "--force"]) == 2
    assert "worksheet.txt is there and symattn did not write it" in one_error_line(capsys.readouterr().err)
    (mine / "worksheet.txt").unlink()
    assert main(["worksheet", "-o", str(mine), "--force"]) == 0
    assert (mine / "thesis.tex").read_text() == "keep" and (mine / "version-A-key.tex").exists()
    # and from now on the folder is symattn's too: a rerun replaces only its own files
    assert main(["worksheet", "--versions", "1", "--seed", "3", "-o", str(mine)]) == 0
    assert (mine / "thesis.tex").read_text() == "keep"


def test_a_forged_manifest_cannot_name_other_files(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["worksheet", "-o", str(ws)]) == 0
    (ws / "thesis.tex").write_text("keep")
    manifest = (ws / "worksheet.txt").read_text()
    (ws / "worksheet.txt").write_text(manifest + "thesis.tex\n../outside.txt\n")
    (tmp_path / "outside.txt").write_text("keep too")
    assert main(["worksheet", "--versions", "1", "--seed", "5", "-o", str(ws)]) == 0
    assert (ws / "thesis.tex").read_text() == "keep"
    assert (tmp_path / "outside.txt").read_text() == "keep too"


def test_an_empty_folder_and_a_link_to_a_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["worksheet", "-o", str(tmp_path / "empty")]) == 0
    assert "version-A.toml" in _names(tmp_path / "empty")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main(["worksheet", "-o", str(tmp_path / "link")]) == 0
    assert (tmp_path / "link").is_symlink() and "version-A.toml" in _names(tmp_path / "real")
    (tmp_path / "file").write_text("x")
    for target, says in ((tmp_path / "file", "is a file, not a folder"), ("", "folder name is empty"),
                         (tmp_path / "no" / "ws", "does not exist")):
        assert main(["worksheet", "-o", str(target)]) == 2
        assert says in one_error_line(capsys.readouterr().err)


def test_legacy_manifest_names_its_files(tmp_path):
    from symattn.classroom.worksheets.sheets import read_manifest

    (tmp_path / "worksheet.txt").write_text(
        "symattn worksheet: 1 version(s), seed 4\nquestions: Q; rounding: 3 significant digits\n"
        "version A: version-A.toml version-A-sheet.tex version-A-key.tex\n")
    assert read_manifest(tmp_path) == {
        "worksheet.txt", "version-A.toml", "version-A-sheet.tex", "version-A-key.tex",
        "version-A-sheet.pdf", "version-A-key.pdf", "all-sheets.tex", "all-keys.tex",
        "all-sheets.pdf", "all-keys.pdf"}


DIE_AFTER_FIRST_RENAME = """
import os, sys
import symattn.output.files as f
f.USE_EXCHANGE = False
real = os.rename
calls = []
def rename(a, b):
    real(a, b)
    if ".symattn-old-" in str(b):
        os._exit(9)          # killed between the two renames
f.os.rename = rename
from symattn.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_kill_between_the_two_renames_is_repaired_by_the_next_run(tmp_path):
    assert main(["worksheet", "--versions", "2", "--seed", "1", "-o", str(tmp_path / "ws")]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "ws").iterdir()}
    done = subprocess.run([sys.executable, "-c", DIE_AFTER_FIRST_RENAME, "worksheet", "--versions", "1",
                           "--seed", "2", "-o", "ws"], cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 9
    left = _names(tmp_path)
    assert "ws" not in left and any(".symattn-old-" in n for n in left)
    # the next run puts the old folder back before doing anything else, then replaces it
    from symattn.output.files import recover_folder

    recover_folder(tmp_path / "ws")
    assert _names(tmp_path) == ["ws"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "ws").iterdir()} == before
    assert main(["worksheet", "--versions", "1", "--seed", "2", "-o", str(tmp_path / "ws")]) == 0
    assert _names(tmp_path) == ["ws"] and not (tmp_path / "ws" / "version-B.toml").exists()


def test_the_swap_is_atomic_where_the_system_allows(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "new").write_text("new")
    (b / "old").write_text("old")
    (b / "mine").write_text("the user's")
    files.swap_in(a, b, owned=lambda folder: {"old"})      # "old" is symattn's, unchanged
    assert _names(tmp_path) == ["b"] and _names(b) == ["mine", "new"]   # the user's file is kept


def test_kill_during_a_pdf_build_leaves_nothing_the_next_run_keeps(tmp_path):
    need_tex()
    assert main(["worksheet", "-o", str(tmp_path / "ws")]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "ws").iterdir()}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "symattn", "worksheet", "--versions", "3", "--seed", "1",
                             "--pdf", "-o", "ws"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:   # wait until TeX is at work inside the staging folder
            staging = [p for p in tmp_path.iterdir() if ".symattn-new-" in p.name]
            if staging and any(p.name.startswith("tex-") for p in staging[0].iterdir()):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the build never started TeX")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the process and its TeX children
        proc.wait()
    assert any(".symattn-new-" in n for n in _names(tmp_path))           # what a kill leaves
    assert {p.name: p.read_bytes() for p in (tmp_path / "ws").iterdir()} == before   # target intact
    assert main(["worksheet", "-o", str(tmp_path / "ws")]) == 0
    assert _names(tmp_path) == ["tmp", "ws"]                               # the leftovers are gone


def test_stale_tex_folders_are_removed_live_ones_kept(tmp_path, monkeypatch):
    from symattn.document import pdf

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    (tmp_path / f"tex-{dead_pid}-abc123xy").mkdir()
    (tmp_path / f"tex-{os.getppid()}-livelive").mkdir()
    (tmp_path / "not-ours").mkdir()
    pdf.clean_stale_tex_dirs(tmp_path)
    assert _names(tmp_path) == ["not-ours", f"tex-{os.getppid()}-livelive"]
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(pdf.tempfile, "tempdir", None)
    root = pdf.tex_root()
    assert root == tmp_path / f"symattn-{os.getuid()}" and stat.S_IMODE(os.stat(root).st_mode) == 0o700


# -- issue 10 scope 2: every result command takes --format, -o and --fragment ------------------

@pytest.mark.parametrize("command", [["explain"], ["heads"], ["facts", "--fact", "rows-sum-to-one"],
                                     ["check", "--example", "i-love-cats"]])
def test_every_result_command_takes_format_output_and_fragment(tmp_path, capsys, command):
    for fmt, starts in (("text", None), ("json", ("{", "[")), ("latex", ("\\documentclass",)),
                        ("html", ("<!DOCTYPE html>", "<!doctype html>"))):
        out = tmp_path / f"r.{fmt}"
        assert main([*command, "--format", fmt, "-o", str(out)]) in (0, 1), fmt
        text = out.read_text(encoding="utf-8")
        assert text.strip(), fmt
        if starts:
            assert text.lstrip().startswith(starts), (fmt, text[:80])
    assert capsys.readouterr().out == ""                     # -o: nothing on stdout
    main([*command, "--format", "latex", "--fragment"])
    body = capsys.readouterr().out
    assert "\\documentclass" not in body and "\\subsection*{" in body
    assert body in (tmp_path / "r.latex").read_text(encoding="utf-8")   # the fragment is the document's body
    assert main([*command, "--format", "json", "--fragment"]) == 2
    assert "--fragment applies to --format latex" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("command", [["heads"], ["facts", "--fact", "rows-sum-to-one"]])
def test_old_latex_flag_is_format_latex_fragment_with_or_without_format(capsys, command):
    main([*command, "--format", "latex", "--fragment"])
    fragment = capsys.readouterr().out
    for extra in ([], ["--format", "latex"]):
        main([*command, "--latex", *extra])
        assert capsys.readouterr().out == fragment, extra
    assert main([*command, "--latex", "--format", "html"]) == 2
    assert "--latex is --format latex" in one_error_line(capsys.readouterr().err)
