"""PDFs compiled by a real TeX engine and read back with pdftotext.

Outside CI these tests skip (saying why) when TeX is absent; in CI
(CI=true) a missing TeX is a failure, because .ci/run installs it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import cli

ROOT = Path(__file__).resolve().parent.parent

CROSS_TOML = """title = "Cross-attention: le chat"
tokens = ["le", "chat"]
key_tokens = ["the", "cat", "sat"]
X = [[1, 0, 1], [0, 1, -1]]
X_kv = [[1, 1, 0], [0, 1, 1], [1, 0, 0]]
W_q = [[1, 0], [0, 1], [1, 1]]
W_k = [[1, 0], [0, 1], [0, 0]]
W_v = [[1, 2], [0, -1], [3, 0]]
"""


def need_tex() -> None:
    """Skip (outside CI) or fail (in CI) when the TeX tools are missing."""
    missing = [p for p in ("pdflatex", "pdftotext") if shutil.which(p) is None]
    if not missing:
        return
    reason = (f"{' and '.join(missing)} not on PATH: PDF tests need TeX Live and poppler-utils "
              "(apt-get install texlive-latex-base texlive-latex-recommended texlive-latex-extra "
              "latexmk poppler-utils)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}; .ci/run must install them")
    pytest.skip(reason)


def run(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    """In-process (tests/clirun.py); a changed environment needs a real process."""
    if env is None:
        return cli(*args, cwd=cwd)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "symattn", *args], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=300)


def pdf_text(path: Path) -> str:
    done = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True)
    return done.stdout


def test_lesson_derivation_compiles_and_reads_back(tmp_path):
    need_tex()
    result = run("explain", "--pdf", "-o", "lesson.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "lesson.pdf")
    assert "I love cats" in text
    for figure in ("0.136", "0.432", "1.86", "6.32", "1.70", "0.00744", "0.755", "0.238", "1.15", "6.93"):
        assert figure in text, figure
    assert "Checks, proved for this instance" in text
    assert list(tmp_path.iterdir()) == [tmp_path / "lesson.pdf"]  # no aux/log files left behind


def test_masked_problem_compiles(tmp_path):
    need_tex()
    result = run("explain", "--example", "i-love-cats-causal", "--pdf", "-o", "causal.pdf",
                 "--digits", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "causal.pdf")
    assert "Masking" in text and "weight exactly 0" in text
    # row 'love' sees I and love only: 0.000979 and 0.999; row 'cats' sees all three
    for figure in ("0.000979", "0.999", "0.00744", "0.755", "7.99", "0.00294"):
        assert figure in text, figure


def test_cross_attention_compiles(tmp_path):
    need_tex()
    (tmp_path / "cross.toml").write_text(CROSS_TOML)
    result = run("explain", "cross.toml", "--pdf", "-o", "cross.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "cross.pdf")
    assert "Cross-attention" in text
    for figure in ("0.576", "0.140", "0.284", "0.503", "1.28", "2.01", "0.241"):
        assert figure in text, figure


def test_places_and_tiny_weights_compile(tmp_path):
    need_tex()
    result = run("explain", "--pdf", "-o", "places.pdf", "--places", "2", "--rows", "love", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "places.pdf")
    assert "8.90 × 10" in text          # weights[love, I] = 0.000890 rounds to 0.00 at 2 places
    assert "0.91" in text and "1.86" in text


def test_missing_tex_is_one_line_naming_the_programs(tmp_path):
    result = run("explain", "--pdf", "-o", "x.pdf", cwd=tmp_path, env={"PATH": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "latexmk or pdflatex" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.pdf").exists()


def test_pdf_without_output_file_is_refused(tmp_path):
    result = run("explain", "--pdf", cwd=tmp_path)
    assert result.returncode == 2
    assert "--pdf needs -o FILE.pdf" in result.stderr


def test_compile_error_names_the_document_and_the_tex_error():
    need_tex()
    from symattn.document.pdf import PdfError, compile_tex

    with pytest.raises(PdfError, match=r"broken.tex did not compile .*Undefined control sequence"):
        compile_tex("\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}", "broken")


def test_compile_many_is_all_or_nothing(tmp_path):
    need_tex()
    from symattn.document.pdf import Job, PdfError, compile_many

    good = "\\documentclass{article}\\begin{document}Version A\\end{document}"
    compile_many([Job(good, tmp_path / "a.pdf"), Job(good.replace("A", "B"), tmp_path / "b.pdf")], workers=2)
    assert "Version B" in pdf_text(tmp_path / "b.pdf") and "Version A" in pdf_text(tmp_path / "a.pdf")
    broken = "\\documentclass{article}\\begin{document}\\oops\\end{document}"
    with pytest.raises(PdfError, match="bad.tex did not compile"):
        compile_many([Job(good, tmp_path / "c.pdf"), Job(broken, tmp_path / "bad.pdf")], workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "b.pdf"]
