"""Worksheets: a problem sheet and an answer key for each version, and a folder of them.

A sheet gives the inputs and asks for the chosen steps (Q, K, V, scores,
scaled scores, weights, output) with working space and answer boxes; its key
answers the same numbered questions with the engine's certified decimals,
lists what each modelled mistake gives, and adds the worked derivation.  Both
are documents (``classroom.worksheets.document``) printed as LaTeX or HTML.
Nothing is computed here: every number in a key comes from the Trace.

The student's sheet shows only an opaque *version code* (a hash of the
version's problem, never the seed or the file name); the teacher's folder
keeps the seed, the problem files, the keys and ``worksheet.json``, which maps
each code to its version (``grade`` and :func:`find_version` read it).  The
folder is written whole or not at all, and only files symattn wrote (its
manifest, worksheet.txt, lists them) are ever replaced or removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symattn.output import files as files_mod
from symattn.numbers.certify import Rounding
from symattn.problem.problem import Problem
from symattn.document.support.latexdoc import document
from symattn.trace.trace import Trace
from symattn.classroom.worksheets.questions import (
    QUESTIONS, SheetQuestion, question_order, rounding_words, sheet_questions,
)
from symattn.classroom.worksheets.versions import WorksheetError, problem_toml, random_versions
from symattn.classroom.worksheets.layouts import layout

__all__ = ["QUESTIONS", "Version", "WorksheetOptions", "version_id", "version_code", "parse_questions",
           "single_version", "seeded_versions", "questions_of", "sheet_document", "key_document",
           "sheet_body", "key_body", "worksheet_files", "write_worksheet", "find_version",
           "read_versions", "manifest_text", "MANIFEST", "METADATA"]

MANIFEST = "worksheet.txt"
METADATA = "worksheet.json"
_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"    # no 0/O, 1/I: read off paper without doubt

Progress = Callable[[int, int, str], None]


def version_code(vid: str, toml: str) -> str:
    """The opaque code a sheet shows (``K7Q-F2M``): a hash of the version's problem and id.

    It tells versions apart and cannot be turned back into the seed; the same
    problem gives the same code on every machine."""
    body = "\n".join(line for line in toml.splitlines() if not line.startswith("#"))
    digest = hashlib.sha256(f"symattn worksheet version {vid}\n{body}".encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    chars = []
    for _ in range(6):
        number, r = divmod(number, len(_CODE_ALPHABET))
        chars.append(_CODE_ALPHABET[r])
    return "".join(chars[:3]) + "-" + "".join(chars[3:])


def normal_code(text: str) -> str:
    """A code as a student may write it (``k7qf2m``, ``K7Q F2M``) in its printed form."""
    plain = re.sub(r"[\s\-_]", "", text.upper())
    return f"{plain[:3]}-{plain[3:]}" if len(plain) == 6 else text.strip()


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

    @property
    def code(self) -> str:
        return version_code(self.vid, self.toml)


@dataclass(frozen=True)
class WorksheetOptions:
    """What the sheets ask, how the key rounds, the points, and the output format."""

    questions: tuple[str, ...] = QUESTIONS
    rounding: Rounding = field(default_factory=lambda: Rounding(digits=3))
    derivation: bool = True           # the key ends with the worked derivation
    points: dict[str, Fraction] | None = None
    mistakes: bool = True             # the key lists the common wrong answers
    format: str = "latex"             # or "html"
    paper: str = "letter"             # or "a4": the LaTeX paper size
    layout: str = "standard"          # or "compact" (classroom.worksheets.layouts.LAYOUTS)


def version_id(k: int) -> str:
    """A, B, …, Z, AA, AB, …: the names teachers give versions."""
    name = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        name = chr(ord("A") + r) + name
    return name


def parse_questions(text: str, available: tuple[str, ...] = QUESTIONS) -> tuple[str, ...]:
    """``Q,scores,weights`` → the questions in computation order; ``available`` are the steps
    the problem lets a sheet ask (``worksheet_questions.askable_steps``)."""
    asked = [q.strip() for q in text.split(",") if q.strip()]
    for q in asked:
        if q not in available:
            raise WorksheetError(f"--questions: no question {q!r} for this problem; choose from "
                                 f"{', '.join(available)}")
    if not asked:
        raise WorksheetError(f"--questions is empty; choose from {', '.join(available)}")
    return tuple(sorted(set(asked), key=question_order))


_MARK = re.compile(r"^# symattn worksheet: version ([A-Z]+)(?: \(code [A-Z0-9-]+\))? of seed (-?\d+)$",
                   re.MULTILINE)


def single_version(problem: Problem, toml: str) -> list[Version]:
    """The worksheet of one given problem: version A with no seed, or, for a
    version's own problem file, that version again (its id and seed are in
    its first line), so its key can be made again byte for byte."""
    mark = _MARK.search(toml.split("\n", 1)[0])
    if mark:
        return [Version(mark.group(1), int(mark.group(2)), toml, Trace(problem))]
    return [Version("A", None, toml, Trace(problem))]


def seeded_versions(spec, seed: int, count: int, progress: Progress | None = None,
                    separate: tuple[tuple[str, ...], Rounding] | None = None) -> list[Version]:
    """``count`` random hand-friendly versions; the same seed gives the same bytes.

    ``separate``: (questions, rounding) -- keep only versions whose modelled mistakes all give
    different answers to those questions (see ``worksheet_mistakes.separates``)."""
    versions = []
    datas = random_versions(spec, seed, count, separate=separate,
                            progress=(lambda k, n: progress(k, n, "drawn")) if progress else None)
    for k, data in enumerate(datas):
        vid = version_id(k)
        data = {**data, "title": f"{data.get('title', 'Attention')}, version {vid}"}
        body = problem_toml(data)
        code = version_code(vid, body)
        toml = problem_toml(data, f"symattn worksheet: version {vid} (code {code}) of seed {seed}")
        versions.append(Version(vid, seed, toml, Trace(Problem.from_toml_text(toml, source=vid))))
    return versions


# -- the documents ---------------------------------------------------------------------

def questions_of(version: Version, options: WorksheetOptions) -> list[SheetQuestion]:
    """The questions of a version's sheet, numbered as printed: each with its ``check`` target and
    per-entry targets (``weights[I, love]``), shape, rounding and points (for grade and self-check)."""
    return sheet_questions(version.trace, options.questions, options.rounding, options.points)


def sheet_document(version: Version, options: WorksheetOptions):
    """The student's sheet of one version as a document (no seed, no file name)."""
    from symattn.classroom.worksheets.document import build_sheet

    return build_sheet(version, questions_of(version, options), layout=layout(options.layout))


def key_document(version: Version, options: WorksheetOptions):
    """The teacher's key of one version as a document."""
    from symattn.classroom.worksheets.document import build_key

    return build_key(version, questions_of(version, options), derivation=options.derivation,
                     mistakes=options.mistakes, layout=layout(options.layout))


def sheet_body(version: Version, options: WorksheetOptions) -> str:
    """The problem sheet of one version as a LaTeX body."""
    from symattn.document.printers.worksheet import sheet_latex

    return sheet_latex(sheet_document(version, options))


def key_body(version: Version, options: WorksheetOptions) -> str:
    """The answer key of one version as a LaTeX body."""
    from symattn.document.printers.worksheet import sheet_latex

    return sheet_latex(key_document(version, options))


def _rounding_words(rounding: Rounding) -> str:
    return rounding_words(rounding)


def metadata(versions: list[Version], options: WorksheetOptions) -> dict:
    """``worksheet.json``: what grade and a self-check page need, per version (teacher's side)."""
    r = options.rounding
    return {"format": "symattn worksheet 1",
            "seed": versions[0].seed if versions else None,
            "rounding": {"digits": r.digits} if r.digits is not None else {"places": r.places},
            "questions": list(options.questions),
            "versions": [{"id": v.vid, "code": v.code, "problem": f"{v.stem}.toml",
                          "questions": [q.as_json() for q in questions_of(v, options)]}
                         for v in versions]}


def worksheet_files(versions: list[Version], options: WorksheetOptions,
                    progress: Progress | None = None) -> dict[str, str]:
    """Every file of a worksheet folder, by name (sheets and keys, problem files, metadata, manifest)."""
    from symattn.document.printers.worksheet import combined_latex, sheet_html, sheet_latex

    tex_layout = layout(options.layout).preamble()

    files: dict[str, str] = {}
    sheets, keys = [], []
    for k, v in enumerate(versions, start=1):
        if progress:
            progress(k, len(versions), v.vid)
        sheet, key = sheet_document(v, options), key_document(v, options)
        files[f"{v.stem}.toml"] = v.toml
        if options.format == "html":
            files[f"{v.stem}-sheet.html"] = sheet_html(sheet)
            files[f"{v.stem}-key.html"] = sheet_html(key)
            continue
        sheet_tex, key_tex = sheet_latex(sheet), sheet_latex(key)
        sheets.append(sheet_tex)
        keys.append(key_tex)
        files[f"{v.stem}-sheet.tex"] = document(sheet_tex, paper=options.paper, **tex_layout)
        files[f"{v.stem}-key.tex"] = document(key_tex, paper=options.paper, **tex_layout)
    if options.format != "html":
        files["all-sheets.tex"] = document(combined_latex(sheets), paper=options.paper, **tex_layout)
        files["all-keys.tex"] = document(combined_latex(keys), paper=options.paper, **tex_layout)
    files[METADATA] = json.dumps(metadata(versions, options), indent=1, ensure_ascii=False) + "\n"
    seed = versions[0].seed if versions and versions[0].seed is not None else "none (a given problem)"
    ext = "html" if options.format == "html" else "tex"
    files[MANIFEST] = "".join(
        [f"symattn worksheet: {len(versions)} version(s), seed {seed}\n",
         f"questions: {', '.join(options.questions)}; rounding: {_rounding_words(options.rounding)}\n"]
        + [f"version {v.vid}: {v.stem}.toml {v.stem}-sheet.{ext} {v.stem}-key.{ext} code {v.code}\n"
           for v in versions])
    return files


# -- finding a version from its code (the teacher's folder) -------------------------------

def read_versions(folder: str | Path) -> dict[str, Path]:
    """Version id *and* version code → its problem file, from a worksheet folder's
    ``worksheet.json`` (codes are listed as printed, ``K7Q-F2M``)."""
    folder = Path(folder)
    path = folder / METADATA
    found: dict[str, Path] = {}
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 16 << 20:
            return found
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return found
    for entry in data.get("versions", []) if isinstance(data, dict) else []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("problem", ""))
        if not OWN_NAME.match(name) or not name.endswith(".toml"):
            continue
        for key in (entry.get("id"), entry.get("code")):
            if isinstance(key, str) and key:
                found.setdefault(key, folder / name)
    return found


def find_version(folder: str | Path, key: str) -> Path | None:
    """The problem file of the version named ``key`` (its id ``B`` or its code ``K7Q-F2M``,
    written in any case, with or without the dash)."""
    versions = read_versions(folder)
    for candidate in (key.strip(), normal_code(key)):
        if candidate in versions:
            return versions[candidate]
    return None


#: The names of the files symattn writes into a worksheet folder; a manifest
#: never makes symattn replace or remove a file of any other name.
OWN_NAME = re.compile(r"^(version-[A-Z]+(\.toml|-sheet\.(tex|pdf|html)|-key\.(tex|pdf|html))"
                      r"|all-(sheets|keys)\.(tex|pdf)|worksheet\.(txt|json))$")
_FILES_HEADING = "files written by symattn (a later run replaces or removes only these):"


def _manifest_lines(folder: Path) -> list[str] | None:
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
    return lines


def read_listing(folder: Path) -> dict[str, str | None] | None:
    """The files symattn wrote into ``folder`` by its manifest, with their content hashes
    (None for a file an older manifest lists without one); None if it has no manifest.

    A manifest written before the list of files existed names them in its
    version lines (the PDFs beside the .tex files).
    """
    lines = _manifest_lines(folder)
    if lines is None:
        return None
    if _FILES_HEADING in lines:
        listed = files_mod.read_listing(lines[lines.index(_FILES_HEADING) + 1:])
    else:  # an older manifest: its version lines and the combined files
        names = ["all-sheets.tex", "all-keys.tex"] + [
            n for line in lines if line.startswith("version ") for n in line.split(":", 1)[-1].split()]
        names += [n[:-4] + ".pdf" for n in names if n.endswith(".tex")]
        listed = dict.fromkeys(names)
    return {n: h for n, h in listed.items() if OWN_NAME.match(n) and n != MANIFEST}


def read_manifest(folder: Path) -> set[str] | None:
    """The names of the files symattn wrote into ``folder`` by its manifest; None if it has none."""
    listed = read_listing(folder)
    return None if listed is None else set(listed) | {MANIFEST}


def owned_files(folder: Path) -> set[str]:
    """The files of ``folder`` a later run may replace or remove: those its manifest lists
    with their content hash, still unchanged, and the manifest itself."""
    listed = read_listing(folder)
    return set() if listed is None else files_mod.unchanged(folder, listed) | {MANIFEST}


def _manifest(head: str, listing: str) -> str:
    return head + _FILES_HEADING + "\n" + listing


def manifest_text(head: str, files: dict[str, bytes]) -> str:
    """worksheet.txt for a folder held in memory (the zip ``symattn serve`` hands out): the
    head :func:`worksheet_files` made and each file's content hash, as a written folder's."""
    listing = "".join(f"{name} sha256:{hashlib.sha256(files[name]).hexdigest()}\n"
                      for name in sorted(files) if name != MANIFEST)
    return _manifest(head, listing)


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
    - the folder's manifest (worksheet.txt) lists every file symattn wrote
      with its content hash; a later run removes only those still unchanged;
    - the new folder is swapped in whole (atomically on Linux,
      :func:`symattn.output.files.replace_folder`); every other file of the old
      folder (a thesis.tex, photos/, a file saved while the run was building,
      a sheet the teacher edited) is moved into the new one, so nothing is lost;
    - a file symattn would write that the user made or changed is refused first;
    - a non-empty folder without a manifest is refused unless ``force``, and
      even then no existing file is replaced or removed: a name clash is refused.
    """
    target = _out_folder(out_dir)
    shown = str(out_dir)
    try:
        files_mod.recover_folder(target, owned_files)
        _legacy_leftovers(target)
        entries = {e.name for e in target.iterdir()} if target.exists() else set()
    except OSError as exc:
        raise WorksheetError(f"-o {shown}: {files_mod.describe_os_error(exc)}") from None
    listed = read_manifest(target) if entries else set()
    if listed is None:
        if not force:
            raise WorksheetError(
                f"-o {shown} is a folder symattn did not write (no symattn {MANIFEST} in it) and it "
                "is not empty: give a new folder name, or --force to add the worksheet to it "
                "(nothing already there is replaced or removed)")
        listed = set()
    ours = owned_files(target) if entries else set()
    tex_names = [n for n in files if n.endswith(".tex")]
    names = sorted(set(files) | ({n[:-4] + ".pdf" for n in tex_names} if pdf else set()))
    clash = sorted(n for n in names if n in entries and n not in ours)
    if clash and clash[0] in listed:
        raise WorksheetError(f"-o {shown}: {clash[0]} was changed since symattn wrote it (or an "
                             "older symattn listed it without its content hash): move it away or "
                             "choose another folder (symattn never replaces a changed file)")
    if clash:
        raise WorksheetError(f"-o {shown}: {clash[0]} is there and symattn did not write it; "
                             "move it away or choose another folder (symattn never replaces it)")
    head = files[MANIFEST]

    def build(building: Path) -> None:
        for name, text in files.items():
            if name != MANIFEST:
                (building / name).write_text(text, encoding="utf-8")
        if pdf:
            from symattn.document.pdf import Job, compile_many

            compile_many([Job(files[n], building / (n[:-4] + ".pdf")) for n in tex_names],
                         workdir=building)
        (building / MANIFEST).write_text(
            _manifest(head, files_mod.listing_lines(building, [n for n in names if n != MANIFEST])),
            encoding="utf-8")

    files_mod.replace_folder(target, build, owned_files, WorksheetError, shown)
    return names
