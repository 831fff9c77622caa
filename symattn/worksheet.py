"""Worksheets: a problem sheet and an answer key for each version, and a folder of them.

A sheet gives the inputs and asks for the chosen steps (Q, K, V, scores,
scaled scores, weights, output) with empty answer boxes; its key fills the
same boxes with the engine's certified decimals and adds the worked
derivation (render/latex.py).  Nothing is computed here: every number in a
key comes from the Trace.  Each version is marked with its id and seed and
saved as a problem TOML beside its sheet, so a key can be made again and a
version can be graded.  The folder is written whole or not at all.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from symattn.certify import Rounding
from symattn.errors import SymattnError
from symattn.problem import Problem
from symattn.render.latex import LatexOptions, LatexRenderer, display, document
from symattn.render.texutil import matrix_latex, tex_escape
from symattn.trace import Trace
from symattn.worksheet_random import WorksheetError, problem_toml, random_versions

#: The questions a sheet can ask, in the order of the computation.
QUESTIONS = ("Q", "K", "V", "scores", "scaled", "weights", "output")
_ASK = {
    "Q": "the queries", "K": "the keys", "V": "the values", "scores": "the scores",
    "scaled": "the scaled scores", "weights": "the attention weights (softmax of each row)",
    "output": "the output",
}
_SYMBOL = {"Q": "Q", "K": "K", "V": "V", "scores": "S", "weights": "A", "output": "O"}
MANIFEST = "worksheet.txt"


@dataclass(frozen=True)
class Version:
    """One version of a worksheet: its id, its seed, its problem file and its trace."""

    vid: str
    seed: int | None
    toml: str
    trace: Trace

    @property
    def stem(self) -> str:
        return f"version-{self.vid}"


@dataclass(frozen=True)
class WorksheetOptions:
    """What the sheets ask and how the key rounds."""

    questions: tuple[str, ...] = QUESTIONS
    rounding: Rounding = field(default_factory=lambda: Rounding(digits=3))
    derivation: bool = True           # the key ends with the worked derivation


def version_id(k: int) -> str:
    """A, B, …, Z, AA, AB, …: the names teachers give versions."""
    name = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        name = chr(ord("A") + r) + name
    return name


def parse_questions(text: str) -> tuple[str, ...]:
    """``Q,scores,weights`` → the questions in computation order."""
    asked = [q.strip() for q in text.split(",") if q.strip()]
    for q in asked:
        if q not in QUESTIONS:
            raise WorksheetError(f"--questions: no question {q!r}; choose from {', '.join(QUESTIONS)}")
    if not asked:
        raise WorksheetError(f"--questions is empty; choose from {', '.join(QUESTIONS)}")
    return tuple(q for q in QUESTIONS if q in asked)


_MARK = re.compile(r"^# symattn worksheet: version ([A-Z]+) of seed (-?\d+)$", re.MULTILINE)


def single_version(problem: Problem, toml: str) -> list[Version]:
    """The worksheet of one given problem: version A with no seed, or, for a
    version's own problem file, that version again (its id and seed are in
    its first line), so its key can be made again byte for byte."""
    mark = _MARK.search(toml.split("\n", 1)[0])
    if mark:
        return [Version(mark.group(1), int(mark.group(2)), toml, Trace(problem))]
    return [Version("A", None, toml, Trace(problem))]


def seeded_versions(spec, seed: int, count: int) -> list[Version]:
    """``count`` random hand-friendly versions; the same seed gives the same bytes."""
    versions = []
    for k, data in enumerate(random_versions(spec, seed, count)):
        vid = version_id(k)
        data = {**data, "title": f"{data.get('title', 'Attention')}, version {vid}"}
        toml = problem_toml(data, f"symattn worksheet: version {vid} of seed {seed}")
        versions.append(Version(vid, seed, toml, Trace(Problem.from_toml_text(toml, source=vid))))
    return versions


# -- the documents ---------------------------------------------------------------------

def _asked(version: Version, options: WorksheetOptions) -> list[str]:
    projected = version.trace.problem.projected
    return [q for q in options.questions if projected or q not in ("Q", "K", "V")]


def _banner(version: Version, kind: str) -> list[str]:
    p = version.trace.problem
    seed = f"seed {version.seed}" if version.seed is not None else "no seed (a given problem)"
    title = tex_escape((p.title or "Scaled dot-product attention").split(", version ")[0])
    return [f"\\section*{{{title} --- {kind}}}",
            f"\\textbf{{Version {version.vid}}} \\hfill {seed} \\hfill problem file "
            f"\\texttt{{{version.stem}.toml}}", ""]


def _given(version: Version) -> list[str]:
    t, p = version.trace, version.trace.problem
    names = [n for n in ("X", "X_kv", "W_q", "W_k", "W_v") if n in t.step_names] or ["Q", "K", "V"]
    lines = ["\\subsection*{Given}"]
    mats = []
    for name in names:
        step = t.step(name)
        rows = step.row_labels if name in ("X", "X_kv", "Q", "K", "V") else None
        cells = [[_exact(v) for v in row] for row in step.rows()]
        mats.append(f"{step.info.latex.split('=')[0].strip()} = {matrix_latex(cells, rows, None)}")
    lines.append(display(" \\qquad ".join(mats[:2])))
    if len(mats) > 2:
        lines.append(display(" \\qquad ".join(mats[2:])))
    scale = (f"the scores are divided by $\\sqrt{{d_k}} = \\sqrt{{{p.d_k}}}$" if p.default_scale
             else f"the scores are multiplied by the scale ${_exact(p.scale)}$")
    lines.append(f"Here $d_k = {p.d_k}$ and {scale}.")
    if p.mask is not None:
        lines.append(f" Mask: {p.mask_kind} (1 = may attend); a blocked position gets weight 0.")
    return lines


def _exact(value) -> str:
    from symattn.render.forms import latex_text

    return latex_text(value)


def _boxes(rows: int, cols: int, row_labels, col_labels) -> str:
    """An empty answer grid with token labels."""
    width = "1.5cm" if cols <= 6 else "1.0cm"
    spec = "r|" + f"p{{{width}}}|" * cols
    head = " & " + " & ".join(f"\\textbf{{{tex_escape(c)}}}" for c in col_labels) + r" \\ \hline" \
        if col_labels else r"\hline"
    body = [f"\\textbf{{{tex_escape(label)}}} & " + " & ".join(["\\rule{0pt}{1.6em}"] * cols) + r" \\ \hline"
            for label in row_labels]
    return "\n".join(["\\begin{center}", f"\\begin{{tabular}}{{{spec}}}", head, *body, "\\end{tabular}",
                      "\\end{center}"])


def sheet_body(version: Version, options: WorksheetOptions) -> str:
    """The problem sheet of one version: the inputs, the questions, empty boxes."""
    t = version.trace
    lines = [*_banner(version, "worksheet"), "Name: \\rule{7cm}{0.4pt}", "", *_given(version), "",
             f"Give every decimal answer correctly rounded to {_rounding_words(options.rounding)}.", "",
             "\\subsection*{Questions}"]
    for k, q in enumerate(_asked(version, options), start=1):
        step = t.step(q)
        what, formula = _ASK[q], step.info.latex
        cols = step.col_labels if q in ("scores", "scaled", "weights") else None
        lines += [f"\\textbf{{{k}.}} Compute {what}, ${formula}$ "
                  f"(${step.shape[0]} \\times {step.shape[1]}$).",
                  _boxes(step.shape[0], step.shape[1], step.row_labels, cols), ""]
    return "\n".join(lines) + "\n"


def key_body(version: Version, options: WorksheetOptions) -> str:
    """The answer key of one version: every answer certified, then the worked derivation."""
    renderer = LatexRenderer(version.trace, LatexOptions(rounding=options.rounding))
    t = version.trace
    lines = [*_banner(version, "answer key"),
             f"Every decimal is correctly rounded to {_rounding_words(options.rounding)} "
             "and certified with ball arithmetic.", "", "\\subsection*{Answers}"]
    for k, q in enumerate(_asked(version, options), start=1):
        step = t.step(q)
        what, formula = _ASK[q], step.info.latex
        cols = step.col_labels if q in ("scores", "scaled", "weights") else None
        answer = matrix_latex(renderer.dec(q), step.row_labels, cols)
        symbol = step.info.latex if q == "scaled" else _SYMBOL[q]
        relation = "\\approx" if q in ("scaled", "weights", "output") else "="
        lines += [f"\\textbf{{{k}.}} {what.capitalize()}, ${formula}$:",
                  display(f"{symbol} {relation} {answer}")]
    if options.derivation:
        lines += ["\\subsection*{Worked derivation}", renderer.body(header=False)]
    return "\n".join(lines) + "\n"


def _rounding_words(rounding: Rounding) -> str:
    if rounding.digits is not None:
        return f"{rounding.digits} significant digit{'s' if rounding.digits != 1 else ''}"
    return f"{rounding.places} decimal place{'s' if rounding.places != 1 else ''}"


def worksheet_files(versions: list[Version], options: WorksheetOptions) -> dict[str, str]:
    """Every file of a worksheet folder, by name (LaTeX sources, problem files, manifest)."""
    files: dict[str, str] = {}
    sheets, keys = [], []
    for v in versions:
        sheet, key = sheet_body(v, options), key_body(v, options)
        sheets.append(sheet)
        keys.append(key)
        files[f"{v.stem}.toml"] = v.toml
        files[f"{v.stem}-sheet.tex"] = document(sheet)
        files[f"{v.stem}-key.tex"] = document(key)
    files["all-sheets.tex"] = document("\\clearpage\n".join(sheets))
    files["all-keys.tex"] = document("\\clearpage\n".join(keys))
    seed = versions[0].seed if versions and versions[0].seed is not None else "none (a given problem)"
    files[MANIFEST] = "".join(
        [f"symattn worksheet: {len(versions)} version(s), seed {seed}\n",
         f"questions: {', '.join(options.questions)}; rounding: {_rounding_words(options.rounding)}\n"]
        + [f"version {v.vid}: {v.stem}.toml {v.stem}-sheet.tex {v.stem}-key.tex\n" for v in versions])
    return files


def write_worksheet(files: dict[str, str], out_dir: str | Path, pdf: bool = False) -> list[str]:
    """Write the folder whole (compiling PDFs first when asked); returns the file names.

    Files go to a temporary folder beside the target that is renamed into
    place, so an error (a TeX failure, a full disk) leaves no partial set.
    An existing target is replaced only if it is a symattn worksheet folder.
    """
    target = Path(out_dir)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise WorksheetError(f"-o {out_dir}: the folder {parent} does not exist")
    if target.exists() and (not target.is_dir() or (any(target.iterdir())
                                                     and not (target / MANIFEST).exists())):
        raise WorksheetError(f"-o {out_dir} exists and is not a symattn worksheet folder: "
                             "give a new folder name")
    building = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        for name, text in files.items():
            (building / name).write_text(text, encoding="utf-8")
        names = list(files)
        if pdf:
            from symattn.pdf import Job, compile_many

            jobs = [Job(text, building / (name[:-4] + ".pdf")) for name, text in files.items()
                    if name.endswith(".tex")]
            compile_many(jobs)
            names += [job.pdf.name for job in jobs]
        old = None
        if target.exists():
            old = parent / f".{target.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
        building.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return sorted(names)
    except OSError as exc:  # a full disk, a permission: one line, nothing left behind
        shutil.rmtree(building, ignore_errors=True)
        raise SymattnError(f"-o {out_dir}: {exc}") from None
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
