"""How many files a variant touches (issue 19): the soft-cap, docs/architecture.md's walk-through.

Read with ``ast``: a file *names* the soft-cap when its code (identifiers, attributes,
keywords, imports, strings other than docstrings) says ``softcap``, ``capped``, ``SoftCap``,
``CAPPED`` or ``SOFTCAP_MISSING``.  Its own path is one file per role (the key, its engine
piece, its steps, its document section, its mistakes; the sixth is its test) and one member in
each closed vocabulary; the other files are where it meets another variant, which a new
variant only touches when it combines with that one.  A file that starts naming the soft-cap
fails here until the walk-through (and this list) says why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = re.compile(r"\b(softcap|capped|SoftCap|CAPPED|SOFTCAP_MISSING)\b")

#: the soft-cap's own path, role by role (docs/architecture.md, "How to add a variant")
OWN = {
    "symattn/problem/keys/logits.py": "the key: its reader and its row of the key table",
    "symattn/engine/transform.py": "its engine piece: the SoftCap transform and its entry",
    "symattn/trace/steps.py": "its steps: the capped step's formula, LaTeX, meaning, title",
    "symattn/document/handforms.py": "its document section: how a capped logit is written",
    "symattn/check/mistakes/logits.py": "its mistakes: softcap-missing, the engine on a rebuilt problem",
}
#: one member each in the closed vocabularies (issue 19 item 4: the enums)
VOCABULARIES = {"symattn/vocab/steps.py", "symattn/check/codes.py"}
#: where the soft-cap meets another variant: the online and decode steps, the backward pass,
#: the facts, grading's carry-forward, multi-head JSON, the worksheets
COMBINED = {
    "symattn/trace/online.py", "symattn/document/build/online.py",
    "symattn/trace/backward.py", "symattn/trace/backward_balls.py", "symattn/trace/backward_steps.py",
    "symattn/check/mistakes/backward.py", "symattn/check/grading/carry_backward.py",
    "symattn/facts/backward_gradient_facts.py", "symattn/facts/__init__.py",
    "symattn/facts/structure_facts.py", "symattn/document/build/heads.py", "symattn/commands/heads.py",
    "symattn/classroom/worksheets/document.py", "symattn/classroom/worksheets/questions.py",
    "symattn/classroom/worksheets/wrong_answers.py",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _names_it(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, (ast.arg, ast.keyword)):
            words = [node.arg or ""]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.alias)):
            words = [node.name]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = [node.value]
        if any(NAMES.search(w) for w in words):
            return True
    return False


def files_naming_the_soft_cap() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in (ROOT / "symattn").rglob("*.py") if _names_it(p)}


def test_the_soft_caps_own_path_is_one_file_per_role():
    found = files_naming_the_soft_cap()
    assert found == set(OWN) | VOCABULARIES | COMBINED, (
        f"new: {sorted(found - set(OWN) - VOCABULARIES - COMBINED)}; "
        f"gone: {sorted((set(OWN) | VOCABULARIES | COMBINED) - found)}")
    assert len(OWN) + 1 <= 6          # the five roles in symattn/ and its test
    assert (ROOT / "tests/test_variants_logits.py").is_file()


def test_the_reader_sees_through_docstrings_but_not_code(tmp_path):
    (tmp_path / "a.py").write_text('"""softcap in words only."""\nx = 1\n')
    (tmp_path / "b.py").write_text('def f(p):\n    return p.softcap\n')
    (tmp_path / "c.py").write_text('STEP = "capped"\n')
    assert [_names_it(tmp_path / n) for n in ("a.py", "b.py", "c.py")] == [False, True, True]


def test_the_walk_through_names_the_same_files():
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    section = text.split("## How to add a variant")[1].split("\n## ")[0]
    for path in [*OWN, *VOCABULARIES]:
        assert f"`{path.removeprefix('symattn/')}`" in section, path
