"""PDF output: find a TeX engine on PATH and compile LaTeX, several at once.

TeX is optional: only ``--pdf`` needs it, so a missing engine is a one-line
error naming the programs looked for and the Debian packages that provide
them.  Each document compiles in its own temporary folder (TeX writes
aux/log files beside its input), so compiles never collide and run in
parallel over the cores; a PDF is moved into place only when it is whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from symattn.errors import SymattnError
from symattn.files import write_atomically

TEX_PACKAGES = "texlive-latex-base texlive-latex-recommended texlive-latex-extra latexmk"
COMPILE_TIMEOUT = 120  # seconds per document; TeX waiting for input would hang forever otherwise


class PdfError(SymattnError):
    """No TeX engine, or a document TeX could not compile."""


@dataclass(frozen=True)
class Job:
    """One document to compile: its LaTeX source and where its PDF goes."""

    tex: str
    pdf: Path


def find_engine() -> list[str]:
    """The command that turns ``doc.tex`` into ``doc.pdf``.

    pdflatex first: symattn's documents have no cross-references, so one
    pass is enough, and latexmk (a Perl wrapper that checks and reruns)
    costs three times as long per document.  latexmk is the fallback.
    """
    if shutil.which("pdflatex"):
        return ["pdflatex", "-interaction=nonstopmode", "-halt-on-error"]
    if shutil.which("latexmk"):
        return ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-quiet"]
    raise PdfError("--pdf needs latexmk or pdflatex on PATH and neither was found: install TeX Live "
                   f"(Debian/Ubuntu: apt-get install {TEX_PACKAGES}) or leave out --pdf")


def _first_error(log: str) -> str:
    """The first TeX error line of a log ('! Undefined control sequence.')."""
    for line in log.splitlines():
        if line.startswith("!"):
            return line[1:].strip()
    lines = [x.strip() for x in log.splitlines() if x.strip()]
    return lines[-1] if lines else "TeX gave no reason"


def compile_tex(tex: str, name: str = "document") -> bytes:
    """Compile one LaTeX document and return the PDF's bytes."""
    engine = find_engine()
    with tempfile.TemporaryDirectory(prefix="symattn-tex-") as folder:
        source = Path(folder) / f"{name}.tex"
        source.write_text(tex, encoding="utf-8")
        # one pass is enough: no references to settle (latexmk reruns by itself if it must)
        try:
            done = subprocess.run([*engine, source.name], cwd=folder, capture_output=True,
                                  text=True, errors="replace", timeout=COMPILE_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise PdfError(f"{name}.tex: {engine[0]} took longer than {COMPILE_TIMEOUT} s") from None
        pdf = Path(folder) / f"{name}.pdf"
        if done.returncode != 0 or not pdf.exists():
            log_path = Path(folder) / f"{name}.log"
            log = (log_path.read_text(errors="replace") if log_path.exists()
                   else done.stdout + done.stderr)
            raise PdfError(f"{name}.tex did not compile with {engine[0]}: {_first_error(log)}")
        return pdf.read_bytes()


def compile_many(jobs: list[Job], workers: int | None = None) -> None:
    """Compile documents in parallel (one TeX process per core); write each PDF whole.

    Every document is compiled before any PDF is written, so a failure leaves
    no partial set behind.
    """
    find_engine()  # fail before starting anything
    workers = workers or os.cpu_count() or 1
    # the longest documents first, so a combined PDF does not start last on an idle pool
    order = sorted(jobs, key=lambda job: -len(job.tex))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pdfs = list(pool.map(lambda job: compile_tex(job.tex, job.pdf.stem), order))
    for job, data in zip(order, pdfs):
        write_atomically(data, job.pdf, error=PdfError)


