"""Folders are never lost or mixed (issue 24, scope item 4): worksheet folders, self-check
folders and PrairieLearn exports are built beside their target and swapped in whole
(symattn.output.files.replace_folder); only files a manifest lists with their unchanged content hash
are removed; a file the user saves or edits is kept, even one saved while a run is building.

Fault injection: each writer is stopped at every file boundary of its build, in-process (an
exception from the file write) and, for the PrairieLearn export, by a real kill (os._exit in
a subprocess); the target then holds the old folder exactly, and the next run the new one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symattn.output import files
from symattn.cli import main

ROOT = Path(__file__).resolve().parents[1]


class Stop(BaseException):
    """What a kill looks like to the code under test: not an Exception, not an OSError."""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".symattn-" in p.name)


# The three folder writers, each as (first run, second run) argv makers
WRITERS = {
    "worksheet": (["worksheet", "--versions", "2", "--seed", "1"],
                  ["worksheet", "--versions", "3", "--seed", "2"]),
    "selfcheck": (["worksheet", "--versions", "2", "--seed", "1", "--selfcheck"],
                  ["worksheet", "--versions", "3", "--seed", "2", "--selfcheck"]),
    "prairielearn": (["export", "--to", "prairielearn", "--example", "i-love-cats"],
                     ["export", "--to", "prairielearn", "--example", "i-love-cats", "--digits", "4"]),
}


def _counting_writes(monkeypatch, stop_at: int | None, counter: list[int]) -> None:
    """Make the k-th file written by a build raise Stop (None: count only)."""
    real_text, real_bytes = Path.write_text, Path.write_bytes

    def check(path: Path) -> None:
        if ".symattn-new-" in str(path.parent):
            counter[0] += 1
            if stop_at is not None and counter[0] == stop_at:
                raise Stop()

    def write_text(self, *a, **k):
        check(self)
        return real_text(self, *a, **k)

    def write_bytes(self, *a, **k):
        check(self)
        return real_bytes(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(Path, "write_bytes", write_bytes)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_stop_at_every_file_boundary_leaves_the_old_folder(tmp_path, monkeypatch, writer):
    first, second = WRITERS[writer]
    out = tmp_path / "out"
    assert main([*first, "-o", str(out)]) == 0
    (out / "notes.txt").write_text("the teacher's notes")
    old = snapshot(out)
    counter = [0]
    with monkeypatch.context() as m:
        _counting_writes(m, None, counter)
        assert main([*second, "-o", str(tmp_path / "count")]) == 0
    boundaries = counter[0]
    assert boundaries >= 3
    for k in range(1, boundaries + 1):
        with monkeypatch.context() as m:
            _counting_writes(m, k, [0])
            with pytest.raises(Stop):
                main([*second, "-o", str(out)])
        assert snapshot(out) == old, k                   # old, whole
        assert leftovers(tmp_path) == [], k              # an exception cleans its staging folder
    assert main([*second, "-o", str(out)]) == 0
    new = snapshot(out)
    assert new["notes.txt"] == b"the teacher's notes" and new != old
    fresh = tmp_path / "fresh"
    assert main([*second, "-o", str(fresh)]) == 0
    mine = {k: v for k, v in new.items() if k != "notes.txt"}
    assert mine.keys() == snapshot(fresh).keys()         # exactly the new folder's files


def test_a_stop_after_the_swap_keeps_the_users_file(tmp_path, monkeypatch):
    """Killed after the swap, before the old folder is drained: the target is the new folder
    and the user's file waits in the old one; the next run moves it back."""
    out = tmp_path / "q"
    argv = ["export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(out)]
    assert main(argv) == 0
    (out / "notes.txt").write_text("keep")
    with monkeypatch.context() as m:
        m.setattr(files, "drain", lambda *a, **k: (_ for _ in ()).throw(Stop()))
        with pytest.raises(Stop):
            main([*argv, "--digits", "4"])
    assert 'comparison="sigfig" digits="4"' in (out / "question.html").read_text()   # new
    assert not (out / "notes.txt").exists() and len(leftovers(tmp_path)) == 1
    files.recover_folder(out)               # what the next run does first (no manifest rule: keep all)
    assert (out / "notes.txt").read_text() == "keep" and leftovers(tmp_path) == []


KILL_AT = """
import os, sys
from pathlib import Path
stop, count = int(sys.argv[1]), [0]
real = Path.write_bytes
def write_bytes(self, data):
    if ".symattn-new-" in str(self.parent):
        count[0] += 1
        if count[0] == stop:
            os._exit(9)                     # a kill: no cleanup runs
    return real(self, data)
Path.write_bytes = write_bytes
real_text = Path.write_text
def write_text(self, data, *a, **k):
    if ".symattn-new-" in str(self.parent):
        count[0] += 1
        if count[0] == stop:
            os._exit(9)
    return real_text(self, data, *a, **k)
Path.write_text = write_text
from symattn.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("stop", [1, 2, 3, 4])
def test_a_real_kill_at_every_file_of_the_export_is_old_or_new(tmp_path, stop):
    out = tmp_path / "q"
    argv = ["export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(out)]
    assert main(argv) == 0
    (out / "notes.txt").write_text("keep")
    old = snapshot(out)
    done = subprocess.run([sys.executable, "-c", KILL_AT, str(stop), *argv, "--digits", "4"],
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 9
    assert snapshot(out) == old                            # never info.json of one run, server.py of another
    assert len(leftovers(tmp_path)) == 1                   # the killed build
    assert main([*argv, "--digits", "4"]) == 0             # the next run removes it and writes
    assert leftovers(tmp_path) == [] and (out / "notes.txt").read_text() == "keep"
    assert 'digits="4"' in (out / "question.html").read_text()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_file_saved_during_a_rerun_is_kept(tmp_path, monkeypatch, writer):
    first, second = WRITERS[writer]
    out = tmp_path / "out"
    assert main([*first, "-o", str(out)]) == 0
    edited = sorted(n for n in snapshot(out) if n.endswith((".tex", ".html")))[0]
    real = files.swap_in

    def saving_during_the_run(new, target, owned=None):
        (target / "saved-meanwhile.txt").write_text("typed while symattn ran")
        (target / edited).write_text("the teacher's edit, made while symattn ran")
        return real(new, target, owned)

    monkeypatch.setattr(files, "swap_in", saving_during_the_run)
    assert main([*second, "-o", str(out)]) == 0
    assert (out / "saved-meanwhile.txt").read_text() == "typed while symattn ran"
    kept = out / f"{edited}.kept"          # the new run writes that name too: the edit is kept beside
    if kept.exists():
        assert (out / edited).read_text() != kept.read_text()
    else:                                  # a page of a version the new run no longer has
        kept = out / edited
    assert kept.read_text() == "the teacher's edit, made while symattn ran"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", ["prairielearn", "selfcheck", "worksheet"])
def test_a_manifest_is_never_trusted_for_a_file_whose_hash_differs(tmp_path, writer):
    first, second = WRITERS[writer]
    out = tmp_path / "out"
    assert main([*first, "-o", str(out)]) == 0
    manifest = {"prairielearn": "symattn-export.txt", "selfcheck": "selfcheck.txt",
                "worksheet": "worksheet.txt"}[writer]
    text = (out / manifest).read_text()
    (out / "notes.txt").write_text("mine")
    wrong = "sha256:" + "0" * 64
    (out / manifest).write_text(text + f"notes.txt {wrong}\nthesis.tex\n../outside.txt\n")
    (out / "thesis.tex").write_text("mine too")
    (tmp_path / "outside.txt").write_text("outside")
    # an old file symattn wrote and no longer writes, changed by the user: kept
    old_only = sorted(n for n in snapshot(out) if n.startswith(("version-B", "selfcheck-B")))
    if old_only:
        (out / old_only[0]).write_text("changed by the teacher")
    rerun = {"prairielearn": second, "worksheet": ["worksheet", "--versions", "1", "--seed", "2"],
             "selfcheck": ["worksheet", "--versions", "1", "--seed", "2", "--selfcheck"]}[writer]
    assert main([*rerun, "-o", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "thesis.tex").read_text() == "mine too"
    assert (tmp_path / "outside.txt").read_text() == "outside"
    if old_only:
        assert (out / old_only[0]).read_text() == "changed by the teacher"


def test_an_unchanged_old_file_is_removed_a_changed_one_refused(tmp_path, capsys):
    out = tmp_path / "ws"
    assert main(["worksheet", "--versions", "2", "--seed", "1", "-o", str(out)]) == 0
    assert main(["worksheet", "--versions", "1", "--seed", "1", "-o", str(out)]) == 0
    assert not (out / "version-B.toml").exists()           # symattn's, unchanged: removed
    (out / "version-A-sheet.tex").write_text("edited")
    assert main(["worksheet", "--versions", "1", "--seed", "2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "version-A-sheet.tex was changed since symattn wrote it" in err and err.count("\n") == 1
    assert (out / "version-A-sheet.tex").read_text() == "edited"


def test_export_without_a_source_is_an_error_and_replaces_nothing(tmp_path, capsys):
    sheets = tmp_path / "sheets"
    assert main(["worksheet", "--versions", "3", "--seed", "1", "-o", str(sheets)]) == 0
    quiz = tmp_path / "quiz.xml"
    assert main(["export", "--to", "moodle", str(sheets), "-o", str(quiz)]) == 0
    before = quiz.read_bytes()
    assert main(["export", "--to", "moodle", "-o", str(quiz)]) == 2
    err = capsys.readouterr().err
    assert "export what?" in err and "--example" in err and err.count("\n") == 1
    assert quiz.read_bytes() == before


def test_an_export_made_from_another_source_or_size_needs_force(tmp_path, capsys):
    two, three = tmp_path / "two", tmp_path / "three"
    assert main(["worksheet", "--versions", "2", "--seed", "1", "-o", str(two)]) == 0
    assert main(["worksheet", "--versions", "3", "--seed", "1", "-o", str(three)]) == 0
    q = tmp_path / "q"
    assert main(["export", "--to", "prairielearn", str(three), "-o", str(q)]) == 0
    before = snapshot(q)
    assert main(["export", "--to", "prairielearn", str(three), "--digits", "4", "-o", str(q)]) == 0
    assert main(["export", "--to", "prairielearn", str(two), "-o", str(q)]) == 2
    assert "3 version(s)" in capsys.readouterr().err
    assert main(["export", "--to", "prairielearn", "--example", "i-love-cats", "-o", str(q)]) == 2
    assert snapshot(q) != before and "VERSIONS" in (q / "server.py").read_text()
    assert main(["export", "--to", "prairielearn", str(two), "--force", "-o", str(q)]) == 0
    assert "'B'" in (q / "server.py").read_text() and "'C'" not in (q / "server.py").read_text()


def test_stale_staging_folders(tmp_path):
    target = tmp_path / "q"
    target.mkdir()
    (target / "a").write_text("a")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    unfinished = tmp_path / f".q.symattn-new-{pid}-aaaaaaaa"
    unfinished.mkdir()
    (unfinished / files.STAGING_MARK).write_bytes(files._STAGING_TEXT)
    (unfinished / "half.json").write_text("{")
    swapped_out = tmp_path / f".q.symattn-new-{pid}-bbbbbbbb"    # an old folder after the exchange
    swapped_out.mkdir()
    (swapped_out / "a").write_text("the user's a")
    (swapped_out / "b").write_text("the user's b")
    files.recover_folder(target)
    assert leftovers(tmp_path) == []
    assert snapshot(target) == {"a": b"a", "a.kept": b"the user's a", "b": b"the user's b"}


def test_listing_reads_hashes_and_ignores_paths():
    h = files.content_hash(b"x")
    assert files.read_listing([f"a.txt {h}", "b.txt", "../c", ".hidden", "d/e", f"f {h} extra"]) == {
        "a.txt": h, "b.txt": None, "f": None}


@pytest.mark.parametrize("to, name", [("moodle", "quiz.xml"), ("qti", "quiz.zip")])
def test_a_quiz_file_made_from_another_source_or_size_needs_force(tmp_path, capsys, to, name):
    """The issue's case: a 30-version quiz is not replaced by another source's quiz (or the
    same folder regenerated with another number of versions) without --force."""
    sheets = tmp_path / "sheets"
    assert main(["worksheet", "--versions", "3", "--seed", "1", "--questions", "weights",
                 "-o", str(sheets)]) == 0
    quiz = tmp_path / name
    assert main(["export", "--to", to, str(sheets), "-o", str(quiz)]) == 0
    before = quiz.read_bytes()
    assert main(["export", "--to", to, str(sheets), "-o", str(quiz)]) == 0      # same source: fine
    assert quiz.read_bytes() == before                                           # and the same bytes
    assert main(["export", "--to", to, "--example", "i-love-cats", "-o", str(quiz)]) == 2
    err = capsys.readouterr().err
    assert "made from sheets (" in err and "3 version(s), not example i-love-cats, 1 version(s)" in err
    assert str(sheets) not in err and str(tmp_path).encode() not in before       # the path stays private
    assert main(["worksheet", "--versions", "2", "--seed", "1", "--questions", "weights",
                 "-o", str(sheets)]) == 0
    assert main(["export", "--to", to, str(sheets), "-o", str(quiz)]) == 2       # another size
    assert quiz.read_bytes() == before
    assert main(["export", "--to", to, str(sheets), "--force", "-o", str(quiz)]) == 0
    assert quiz.read_bytes() != before


def test_grade_refuses_a_folder_that_does_not_match_its_manifest(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["worksheet", "--versions", "2", "--seed", "1", "--questions", "weights",
                 "-o", str(ws)]) == 0
    subs = tmp_path / "class.csv"
    subs.write_text("student,version,weights\nann,A,0.5\n", encoding="utf-8")
    header = (ws / "version-A.toml").read_text().splitlines()[0]
    assert main(["grade", str(ws), str(subs), "-o", str(tmp_path / "r.csv")]) in (0, 1)
    capsys.readouterr()
    original = (ws / "version-B.toml").read_bytes()
    (ws / "version-B.toml").write_bytes(original.replace(b"1", b"2", 1))    # edited after the run
    assert main(["grade", str(ws), str(subs)]) == 2
    err = capsys.readouterr().err
    assert "version-B.toml does not match the folder's manifest" in err and err.count("\n") == 1
    (ws / "version-B.toml").write_bytes(original)
    (ws / "version-C.toml").write_text((ws / "version-A.toml").read_text())  # a version symattn did not write
    assert main(["grade", str(ws), str(subs)]) == 2
    assert "version-C.toml is not in the folder's manifest" in capsys.readouterr().err
    (ws / "version-C.toml").unlink()
    (ws / "version-A.toml").unlink()                                        # missing
    assert main(["grade", str(ws), str(subs)]) == 2
    assert "version-A.toml does not match" in capsys.readouterr().err
    assert header.startswith("#")
