"""The problems a class is graded against: one problem file, or a worksheet folder.

A worksheet folder holds one problem file per version (``version-ID.toml``
as ``symattn worksheet --versions`` writes them, ``ID.toml`` or
``ID/problem.toml``).  A student's ``version`` cell names the version by its
id (``B``) or by the opaque code printed on the student's sheet; the codes
and the points per question are read from the folder's own files, so grading
needs nothing but the folder (the first of these that says it wins):

- ``worksheet.json`` (``symattn worksheet`` writes it): ``versions[].id``,
  ``versions[].code``, ``versions[].problem`` (a file in the folder) and
  ``versions[].questions[].step`` with its ``points`` (a number, ``"3/2"``,
  or null: no points for that question);
- a comment line at the top of a version's problem file:
  ``# code: 7KQ2`` and ``# points: weights=2, output=3``;
- or the folder's manifest (``worksheet.txt``): a version line that says
  ``code 7KQ2`` (``version B: code 7KQ2 version-B.toml …``), and a line
  ``points: weights=2, output=3`` for every version.

Codes are matched ignoring
case, spaces, hyphens and underscores (``7kq-2`` is ``7KQ2``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from symattn.check.checker import Checker
from symattn.errors import SymattnError
from symattn.problem.problem import Problem

__all__ = ["GradeError", "MAX_POINTS", "Versions", "parse_points"]

MANIFEST = "worksheet.txt"
METADATA = "worksheet.json"
MAX_METADATA_BYTES = 16 * 1024 * 1024
MAX_POINTS = 1_000_000          # points of one question
MAX_POINT_KEYS = 1_000          # entries of one points list
_HEAD_BYTES = 64 * 1024         # the part of a file where its comments are looked for
_CODE = re.compile(r"\bcode\s*[:=]?\s*\"?([A-Za-z0-9][A-Za-z0-9_-]{0,39})\"?", re.IGNORECASE)
_POINTS = re.compile(r"\bpoints\s*[:=]\s*(.+?)\s*$", re.IGNORECASE)
_VERSION_LINE = re.compile(r"^version\s+([A-Za-z0-9_-]+)\b(.*)$", re.IGNORECASE)
_AMOUNT = re.compile(r"([0-9]{1,7}(?:\.[0-9]{1,6})?|[0-9]{1,7}/[1-9][0-9]{0,6})")


class GradeError(SymattnError, ValueError):
    """A submissions file or problem source that cannot be graded at all."""


def _code_key(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).upper()


def _split_items(text: str) -> list[str]:
    """Split at commas outside brackets (a key may be ``weights[I, I]``)."""
    items, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch in ",;" and depth == 0:
            items.append(text[start:k])
            start = k + 1
    items.append(text[start:])
    return [i.strip() for i in items if i.strip()]


def parse_points(text: str, where: str = "--points") -> dict[str, Fraction]:
    """``weights=2, output=3`` → {question or column: points}; points are whole numbers,
    decimals (``1.5``) or fractions (``1/2``), at most MAX_POINTS each."""
    items = _split_items(text)
    if not items:
        raise GradeError(f"{where} is empty: give points per question, e.g. \"weights=2, output=3\"")
    if len(items) > MAX_POINT_KEYS:
        raise GradeError(f"{where} has over {MAX_POINT_KEYS:,} entries; give points per question")
    points: dict[str, Fraction] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            key, sep, value = item.rpartition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key or len(key) > 200:
            raise GradeError(f"{where}: cannot read {item[:60]!r}; write question=points, "
                             "e.g. \"weights=2, output=3\"")
        if not _AMOUNT.fullmatch(value):
            raise GradeError(f"{where}: {key[:60]} has the points {value[:40]!r}; write a number "
                             "of points such as 2, 1.5 or 1/2")
        amount = Fraction(value)
        if amount > MAX_POINTS:
            raise GradeError(f"{where}: {key[:60]} has {value} points, over {MAX_POINTS:,}")
        if key in points:
            raise GradeError(f"{where}: {key[:60]} is given twice; give each question once")
        points[key] = amount
    return points


@dataclass(frozen=True)
class VersionInfo:
    """What a folder says about one version besides its problem: its code and points."""

    vid: str
    path: Path
    code: str | None = None
    points: dict[str, Fraction] | None = None


def _head_comments(path: Path) -> list[str]:
    """The comment lines at the top of a problem file (before its first key)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError:
        return []
    lines = []
    for line in head.lstrip("\ufeff").splitlines():
        if line.startswith("#"):
            lines.append(line[1:].strip())
        elif line.strip():
            break
    return lines


def _read_head(path: Path, where: str) -> tuple[str | None, dict[str, Fraction] | None]:
    """(code, points) from the comment lines symattn (or a teacher) put at the top of a
    problem file: ``# points: ...`` and ``# code: ...`` lines, and the code in symattn's
    ``# symattn worksheet: version A (code K7Q-F2M) of seed 3``; other comments are prose."""
    code = points = None
    for line in _head_comments(path):
        lower = line.lower()
        if line.startswith("points:") and points is None:      # lower case, as symattn writes it
            points = parse_points(line.split(":", 1)[1], f"{where} (its '# points:' line)")
        elif lower.startswith(("code:", "symattn worksheet:")) and code is None:
            found = _CODE.search(line)
            if found:
                code = found[1]
    return code, points


def _read_manifest(folder: Path) -> tuple[dict[str, str], dict[str, Fraction] | None]:
    """Codes by version id, and the folder's points, from the folder's manifest."""
    path = folder / MANIFEST
    codes: dict[str, str] = {}
    points = None
    if not path.is_file() or path.is_symlink():
        return codes, points
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return codes, points
    for line in text.splitlines():
        version = _VERSION_LINE.match(line.strip())
        if version:
            code = _CODE.search(version[2])
            if code:
                codes[version[1]] = code[1]
            continue
        found = _POINTS.search(line)
        if found and points is None and line.strip().lower().startswith("points"):
            points = parse_points(found[1], f"{path} (points)")
    return codes, points


def _read_metadata(folder: Path) -> dict[str, tuple[str | None, Path | None, dict | None]]:
    """Version id -> (code, problem file, points) from the folder's ``worksheet.json``; a
    file that cannot be read or has another shape is ignored (the other sources remain)."""
    path = folder / METADATA
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_METADATA_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return {}
    entries = data.get("versions") if isinstance(data, dict) else None
    found: dict[str, tuple[str | None, Path | None, dict | None]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        code = entry.get("code") if isinstance(entry.get("code"), str) else None
        name = entry.get("problem")
        problem = folder / name if isinstance(name, str) and re.fullmatch(r"[\w.-]+\.toml", name) \
            and (folder / name).is_file() else None
        found[entry["id"]] = (code, problem, _question_points(entry.get("questions"), path))
    return found


def _question_points(questions: object, where: Path) -> dict[str, Fraction] | None:
    """{step: points} from worksheet.json's questions; None when no question has points."""
    if not isinstance(questions, list):
        return None
    points: dict[str, Fraction] = {}
    given = False
    for q in questions:
        if not isinstance(q, dict) or not isinstance(q.get("step"), str):
            continue
        value = q.get("points")
        if value is None:
            points.setdefault(q["step"], Fraction(0))
            continue
        if isinstance(value, bool) or not (isinstance(value, int) or
                                           (isinstance(value, str) and _AMOUNT.fullmatch(value))):
            raise GradeError(f"{where}: question {q['step'][:40]!r} has the points {str(value)[:40]!r}; "
                             "points are a whole number or a fraction such as \"3/2\"")
        amount = Fraction(value)
        if not 0 <= amount <= MAX_POINTS:
            raise GradeError(f"{where}: question {q['step'][:40]!r} has {value} points; give 0 to "
                             f"{MAX_POINTS:,}")
        points[q["step"]] = amount
        given = True
    return points if given else None


_FILES_HEADING = "files written by symattn"


def check_manifest(folder: Path) -> None:
    """Refuse a worksheet folder whose problem files or metadata do not match its manifest.

    ``symattn worksheet`` lists every file with its content hash; grading reads the
    ``.toml`` files and ``worksheet.json``, so each of those must be there with the listed
    hash, and no other problem file may be.  A folder without a hash list (made by hand, or
    by an older symattn) is graded as it is."""
    from symattn.output.files import file_hash, read_listing

    path = folder / MANIFEST
    try:
        if path.is_symlink() or not path.is_file():
            return
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return
    if not lines or not lines[0].startswith("symattn worksheet:"):
        return
    heading = next((k for k, line in enumerate(lines) if line.startswith(_FILES_HEADING)), None)
    if heading is None:
        return
    listed = read_listing(lines[heading + 1:])
    if not any(listed.values()):
        return
    graded = {n for n in listed if n.endswith(".toml") or n == METADATA}
    present = {p.name for p in folder.glob("*.toml")} | ({METADATA} if (folder / METADATA).exists() else set())
    for name in sorted(graded | present):
        digest = listed.get(name)
        if name not in listed:
            why = "is not in the folder's manifest (symattn did not write it)"
        elif digest is not None and file_hash(folder / name) != digest:
            why = ("does not match the folder's manifest (changed, replaced or missing since "
                   "symattn wrote it)")
        else:
            continue
        raise GradeError(f"{folder / name} {why}: grade against the folder as symattn wrote it "
                         "(run the same 'symattn worksheet' command again, or restore the file)")


class Versions:
    """Problems by version: one problem for everyone, or a folder of versions."""

    def __init__(self, single: Problem | None = None, folder: Path | None = None,
                 single_path: Path | None = None) -> None:
        self.single, self.folder = single, folder
        self._checkers: dict[str | None, Checker | SymattnError] = {}
        self._info: dict[str, VersionInfo] | None = None
        self._single_points: dict[str, Fraction] | None = None
        if single_path is not None:
            self._single_points = _read_head(single_path, str(single_path))[1]

    @classmethod
    def from_path(cls, path: str | Path) -> "Versions":
        """A problem file, or a worksheet folder of per-version problem files."""
        path = Path(path)
        if path.is_dir():
            if not cls._files(path):
                raise GradeError(f"{path}: no problem files in this folder; expected "
                                 "version-ID.toml, ID.toml or ID/problem.toml for each version")
            check_manifest(path)     # never a half-updated or edited folder, silently
            versions = cls(folder=path)
            versions.info()          # a bad points list is refused before grading
            return versions
        return cls(single=Problem.from_toml(path), single_path=path)

    @staticmethod
    def _files(folder: Path) -> dict[str, Path]:
        """Version id -> problem file: ``version-ID.toml`` (as ``symattn worksheet --versions``
        writes them), ``ID.toml`` or ``ID/problem.toml``."""
        found: dict[str, Path] = {}
        for p in sorted(folder.glob("*.toml")):
            found[p.stem] = p
            if p.stem.startswith("version-") and len(p.stem) > 8:
                found.setdefault(p.stem[len("version-"):], p)
        for p in sorted(folder.glob("*/problem.toml")):
            found.setdefault(p.parent.name, p)
        return found

    @property
    def needs_version(self) -> bool:
        return self.folder is not None

    def info(self) -> dict[str, VersionInfo]:
        """Each version's id, file, code and points (read once)."""
        if self._info is None:
            files = self._files(self.folder) if self.folder is not None else {}
            codes, folder_points = _read_manifest(self.folder) if self.folder is not None else ({}, None)
            meta = _read_metadata(self.folder) if self.folder is not None else {}
            for vid, (_, problem, _) in meta.items():
                if problem is not None:
                    files.setdefault(vid, problem)
            by_path: dict[Path, str] = {}
            for vid, path in files.items():     # 'A' is preferred to 'version-A'
                if path not in by_path or by_path[path].startswith("version-"):
                    by_path[path] = vid
            info = {}
            for path, vid in by_path.items():
                code, points = _read_head(path, str(path))
                m_code, _, m_points = meta.get(vid, (None, None, None))
                info[vid] = VersionInfo(
                    vid, path, m_code or code or codes.get(vid),
                    m_points if m_points is not None else points if points is not None else folder_points)
            self._info = info
        return self._info

    def ids(self) -> list[str]:
        """The versions' ids, in order (for a single problem: none)."""
        return sorted(self.info(), key=lambda v: (len(v), v))

    def resolve(self, version: str | None) -> str | None:
        """The version id a student's ``version`` cell names (its id, its file's stem, or its
        code); None for a single problem."""
        if self.single is not None:
            return None
        if not version:
            raise GradeError("no version given; the version column picks the problem")
        info = self.info()
        if version in info:
            return version
        files = self._files(self.folder) if self.folder is not None else {}
        if version in files:
            path = files[version]
            return next(v for v, i in info.items() if i.path == path)
        wanted = _code_key(version)
        for vid, item in info.items():
            if item.code is not None and _code_key(item.code) == wanted:
                return vid
        for vid in info:                     # 'b' for B
            if vid.upper() == version.upper():
                return vid
        raise GradeError(f"no version {version!r} in {self.folder}; the versions are "
                         f"{', '.join(self.ids()) or 'none'}")

    def points(self, vid: str | None) -> dict[str, Fraction] | None:
        """The points per question the folder (or the problem file) gives this version."""
        if vid is None:
            return self._single_points
        item = self.info().get(vid)
        return None if item is None else item.points

    def checker(self, version: str | None) -> Checker:
        """The checker of the version a ``version`` cell names (built once per version)."""
        key = None if self.single is not None else version
        hit = self._checkers.get(key)
        if hit is None:
            try:
                hit = self._build(key)
            except SymattnError as exc:
                hit = exc
            except Exception as exc:  # noqa: BLE001 — the last resort, kept on purpose: a bug in
                # one version must not stop the others, and it is not hidden: every row of that
                # version is invalid with the error's type and message and "please report it"
                where = "the problem" if key is None else f"version {key}"
                hit = GradeError(f"internal error while preparing {where} "
                                 f"({type(exc).__name__}: {str(exc)[:120]}); please report it")
            self._checkers[key] = hit
        if isinstance(hit, SymattnError):
            raise hit
        return hit

    def _build(self, version: str | None) -> Checker:
        if self.single is not None:
            return Checker(self.single)
        vid = self.resolve(version)
        assert vid is not None, "resolve gives None only for a single problem"
        if vid != version:
            return self.checker(vid)
        return Checker(Problem.from_toml(self.info()[vid].path))
