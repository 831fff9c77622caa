"""Worksheets: a problem sheet and an answer key for each version, and a folder of them.

A sheet gives the inputs and asks for the chosen steps (Q, K, V, scores,
scaled scores, weights, output) with empty answer boxes; its key fills the
same boxes with the engine's certified decimals and adds the worked
derivation (render/latex.py).  Nothing is computed here: every number in a
key comes from the Trace.  Each version is marked with its id and seed and
saved as a problem TOML beside its sheet, so a key can be made again and a
version can be graded.  The folder is written whole or not at all, and only
files symattn wrote (its manifest, worksheet.txt, lists them) are ever
replaced or removed.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from symattn import files as files_mod
from symattn.certify import Rounding
from symattn.problem import Problem
from symattn.render.latex import LatexOptions, LatexRenderer, display, document
from symattn.render.texutil import tex_escape
from symattn.rope import rope_statement
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
        lines.append(f" Mask: {tex_escape(p.mask_description)} (1 = may attend); "
                     "a blocked position gets weight 0.")
    if p.sink is not None:
        lines.append(f" Sink logit $s = {_exact(p.sink)}$: each row's softmax denominator also "
                     "adds $e^{s - \\max}$ (a column that is then dropped), so the weights sum to "
                     "less than 1.")
    if p.rope is not None:
        lines.append(rope_statement(p))
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


#: The names of the files symattn writes into a worksheet folder; a manifest
#: never makes symattn replace or remove a file of any other name.
OWN_NAME = re.compile(r"^(version-[A-Z]+(\.toml|-sheet\.(tex|pdf)|-key\.(tex|pdf))"
                      r"|all-(sheets|keys)\.(tex|pdf)|worksheet\.txt)$")
_FILES_HEADING = "files written by symattn (a later run replaces or removes only these):"
_UNFINISHED = ("unfinished: symattn was stopped while replacing these files; "
               "run the same symattn worksheet command again\n")


def read_manifest(folder: Path) -> set[str] | None:
    """The files symattn wrote into ``folder`` by its manifest; None if it has no manifest.

    A manifest written before the list of files existed names them in its
    version lines (the PDFs beside the .tex files).
    """
    path = folder / MANIFEST
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("symattn worksheet:"):
        return None
    if _FILES_HEADING in lines:
        names = lines[lines.index(_FILES_HEADING) + 1:]
    else:  # an older manifest: its version lines and the combined files
        names = ["all-sheets.tex", "all-keys.tex"] + [
            n for line in lines if line.startswith("version ") for n in line.split(":", 1)[-1].split()]
        names += [n[:-4] + ".pdf" for n in names if n.endswith(".tex")]
    return {n.strip() for n in names if OWN_NAME.match(n.strip())} | {MANIFEST}


def _manifest(head: str, names: list[str], unfinished: bool = False) -> str:
    return head + (_UNFINISHED if unfinished else "") + _FILES_HEADING + "\n" + \
        "".join(f"{n}\n" for n in sorted(names))


def _legacy_leftovers(target: Path) -> None:
    """Remove the build folders older symattn versions left when killed
    (``.NAME.XXXXXXXX.tmp``, ``.NAME.old``) when they hold only worksheet files."""
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.([a-z0-9_]{{8}}\.tmp|old)$")
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        if pattern.match(entry.name) and entry.is_dir() and not entry.is_symlink():
            try:
                inside = [e.name for e in entry.iterdir()]
            except OSError:
                continue
            if all(OWN_NAME.match(n) for n in inside):
                shutil.rmtree(entry, ignore_errors=True)


def _out_folder(out_dir: str | Path) -> Path:
    """The folder ``-o`` names, checked; a link to a folder is followed."""
    text = str(out_dir)
    if text == "":
        raise WorksheetError('-o "": the folder name is empty; give a folder such as -o worksheet')
    target = Path(text)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if target.exists() and not target.is_dir():
        raise WorksheetError(f"-o {text} is a file, not a folder: give a folder name")
    parent = target.parent
    if not parent.is_dir():
        raise WorksheetError(f"-o {text}: the folder {parent} does not exist")
    return target


def write_worksheet(files: dict[str, str], out_dir: str | Path, pdf: bool = False,
                    force: bool = False) -> list[str]:
    """Write a worksheet folder (compiling PDFs first when asked); returns the file names.

    Nothing is lost and nothing is left half-made:

    - everything is built in a staging folder beside the target, TeX's
      temporary folders included, so an error or a kill leaves the target as
      it was; a later run removes the leftovers (they carry the process id);
    - the folder's manifest (worksheet.txt) lists every file symattn wrote;
      a later run replaces or removes only those;
    - a folder holding only symattn's files (or nothing) is swapped for the
      new one at once (atomically on Linux);
    - a folder that also holds other files (a thesis.tex, photos/) keeps
      them: symattn's files are replaced one by one;
    - a non-empty folder without a manifest is refused unless ``force``, and
      even then no existing file is replaced or removed: a name clash is refused.
    """
    target = _out_folder(out_dir)
    shown = str(out_dir)
    try:
        files_mod.recover_folder(target)
        _legacy_leftovers(target)
        entries = {e.name for e in target.iterdir()} if target.exists() else set()
    except OSError as exc:
        raise WorksheetError(f"-o {shown}: {files_mod.describe_os_error(exc)}") from None
    owned = read_manifest(target) if entries else set()
    if owned is None:
        if not force:
            raise WorksheetError(
                f"-o {shown} is a folder symattn did not write (no symattn {MANIFEST} in it) and it "
                "is not empty: give a new folder name, or --force to add the worksheet to it "
                "(nothing already there is replaced or removed)")
        owned = set()
    foreign = entries - owned
    tex_names = [n for n in files if n.endswith(".tex")]
    names = sorted(set(files) | ({n[:-4] + ".pdf" for n in tex_names} if pdf else set()))
    clash = sorted(set(names) & foreign)
    if clash:
        raise WorksheetError(f"-o {shown}: {clash[0]} is there and symattn did not write it; "
                             "move it away or choose another folder (symattn never replaces it)")
    head = files[MANIFEST]
    try:
        building = files_mod.staging_folder(target)
    except OSError as exc:
        raise WorksheetError(f"-o {shown}: {files_mod.describe_os_error(exc)}") from None
    try:
        for name, text in files.items():
            if name != MANIFEST:
                (building / name).write_text(text, encoding="utf-8")
        (building / MANIFEST).write_text(_manifest(head, names), encoding="utf-8")
        if pdf:
            from symattn.pdf import Job, compile_many

            compile_many([Job(files[n], building / (n[:-4] + ".pdf")) for n in tex_names],
                         workdir=building)
        if not foreign:
            mode = (os.stat(target).st_mode & 0o7777) if target.exists() else files_mod.new_folder_mode()
            os.chmod(building, mode)
            files_mod.swap_in(building, target)
        else:
            _update_in_place(building, target, names, owned, head)
        return names
    except OSError as exc:  # a full disk, a permission: one line, nothing left behind
        shutil.rmtree(building, ignore_errors=True)
        raise WorksheetError(f"-o {shown}: {files_mod.describe_os_error(exc)}") from None
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _update_in_place(building: Path, target: Path, names: list[str], owned: set[str],
                     head: str) -> None:
    """Replace symattn's files in a folder that also holds the user's, one file at a time.

    The manifest is first rewritten to list the old and the new files (marked
    unfinished), so a run killed half-way leaves every file whole and every
    file of symattn's listed for the next run to replace.
    """
    obsolete = sorted(owned - set(names))
    files_mod.write_atomically(_manifest(head, sorted(owned | set(names)), unfinished=True),
                               target / MANIFEST, error=WorksheetError)
    for name in names:
        if name != MANIFEST:
            os.replace(building / name, target / name)
    for name in obsolete:
        path = target / name
        if path.is_symlink() or path.is_file():
            path.unlink()
    os.replace(building / MANIFEST, target / MANIFEST)
    shutil.rmtree(building, ignore_errors=True)
