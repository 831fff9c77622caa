"""PDF output: find a TeX engine on PATH and compile LaTeX, several at once.

TeX is optional: only ``--pdf`` needs it, so a missing engine is a one-line
error naming the programs looked for and the Debian packages that provide
them.  Each document compiles in its own temporary folder (TeX writes
aux/log files beside its input), so compiles never collide and run in
parallel over the cores; a PDF is moved into place only when it is whole.

TeX runs with ``-no-shell-escape`` (the documents need no external
programs, whatever a texmf.cnf allows).  Its folders are named
``tex-PID-XXXXXXXX`` inside a folder of symattn's own (``symattn-UID`` in
the system temporary folder, or the worksheet's build folder), so folders
left by a process that was killed are recognised and removed by the next
compile.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from symattn.errors import SymattnError
from symattn.output.files import pid_alive, write_atomically

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
    pass is enough (a second only where a long table asks), and latexmk (a Perl wrapper that checks and reruns)
    costs three times as long per document.  latexmk is the fallback.
    """
    if shutil.which("pdflatex"):
        return ["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error"]
    if shutil.which("latexmk"):
        return ["latexmk", "-pdf", "-latexoption=-no-shell-escape", "-interaction=nonstopmode",
                "-halt-on-error", "-quiet"]
    raise PdfError("--pdf needs latexmk or pdflatex on PATH and neither was found: install TeX Live "
                   f"(Debian/Ubuntu: apt-get install {TEX_PACKAGES}) or leave out --pdf")


def _first_error(log: str) -> str:
    """The first TeX error line of a log ('! Undefined control sequence.')."""
    for line in log.splitlines():
        if line.startswith("!"):
            return line[1:].strip()
    lines = [x.strip() for x in log.splitlines() if x.strip()]
    return lines[-1] if lines else "TeX gave no reason"


_TEX_DIR = re.compile(r"^tex-(\d+)-[A-Za-z0-9_]+$")


def tex_root() -> Path | None:
    """symattn's own folder for TeX's temporary folders (``$TMPDIR/symattn-UID``, mode 0700).

    None when it cannot be made safely (another user owns the name, or it is a
    link): then TeX's folders go to the system temporary folder unnamed.
    """
    root = Path(tempfile.gettempdir()) / f"symattn-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return root


def clean_stale_tex_dirs(root: Path) -> None:
    """Remove TeX folders in ``root`` whose process is gone (killed mid-compile)."""
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        match = _TEX_DIR.match(entry.name)
        if match and int(match.group(1)) != os.getpid() and not pid_alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def compile_tex(tex: str, name: str = "document", workdir: Path | None = None) -> bytes:
    """Compile one LaTeX document and return the PDF's bytes.

    TeX's files go to a folder ``tex-PID-XXXX`` inside ``workdir`` (default:
    :func:`tex_root`), removed when the compile ends.
    """
    engine = find_engine()
    root = workdir if workdir is not None else tex_root()
    if root is not None and workdir is None:
        clean_stale_tex_dirs(root)
    with tempfile.TemporaryDirectory(prefix=f"tex-{os.getpid()}-", dir=root) as folder:
        source = Path(folder) / f"{name}.tex"
        source.write_text(tex, encoding="utf-8")
        # latexmk reruns by itself when it must; plain pdflatex is rerun here while the log asks
        # (a longtable's column widths settle on the second pass)
        for _ in range(3):
            try:
                done = subprocess.run([*engine, source.name], cwd=folder, capture_output=True,
                                      text=True, errors="replace", timeout=COMPILE_TIMEOUT,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise PdfError(f"{name}.tex: {engine[0]} took longer than {COMPILE_TIMEOUT} s") from None
            log_path = Path(folder) / f"{name}.log"
            if done.returncode != 0 or "latexmk" in engine[0] or not log_path.exists() \
                    or "Rerun LaTeX" not in log_path.read_text(errors="replace"):
                break
        pdf = Path(folder) / f"{name}.pdf"
        if done.returncode != 0 or not pdf.exists():
            log_path = Path(folder) / f"{name}.log"
            log = (log_path.read_text(errors="replace") if log_path.exists()
                   else done.stdout + done.stderr)
            raise PdfError(f"{name}.tex did not compile with {engine[0]}: {_first_error(log)}")
        return pdf.read_bytes()


def compile_many(jobs: list[Job], workers: int | None = None, workdir: Path | None = None) -> None:
    """Compile documents in parallel (one TeX process per core); write each PDF whole.

    Every document is compiled before any PDF is written, so a failure leaves
    no partial set behind.  ``workdir``: where TeX's folders go (see compile_tex).
    """
    find_engine()  # fail before starting anything
    workers = workers or os.cpu_count() or 1
    # the longest documents first, so a combined PDF does not start last on an idle pool
    order = sorted(jobs, key=lambda job: -len(job.tex))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pdfs = list(pool.map(lambda job: compile_tex(job.tex, job.pdf.stem, workdir), order))
    for job, data in zip(order, pdfs):
        write_atomically(data, job.pdf, error=PdfError)


