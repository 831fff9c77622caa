"""The examples in the README and docs/ run, so they cannot go stale."""

import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_documented_examples_run(path):
    result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS
                              | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0
    if path.name == "README.md":
        assert result.attempted >= 5


def test_readme_shows_the_two_setup_commands_first():
    text = (ROOT / "README.md").read_text()
    head = text[: text.index("## ")]
    assert "pip install . && symattn explain" in head
    assert "pip install -e '.[test]' && pytest" in head
