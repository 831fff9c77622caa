"""`explain --rows` is the one grammar; `--row` is its deprecated alias (issue 25)."""

from __future__ import annotations

import json

import pytest

from clirun import cli


@pytest.mark.parametrize("fmt", ["text", "json", "latex", "html"])
def test_row_is_a_deprecated_alias_of_rows(fmt):
    old = cli("explain", "--row", "love", "--format", fmt)
    new = cli("explain", "--rows", "love", "--format", fmt)
    assert old.returncode == new.returncode == 0
    assert old.stdout == new.stdout
    assert old.stderr.strip() == "symattn: note: --row is deprecated (it goes in the next release): use --rows"
    assert new.stderr == ""
    if fmt == "json":
        assert json.loads(old.stdout)["worked_rows"] == ["love"]
    if fmt == "text":
        assert "The dot products of row 'love'" in old.stdout
        assert "scaled[love] = " in old.stdout


def test_a_bad_row_names_the_flag_to_use():
    result = cli("explain", "--row", "dogs")
    assert result.returncode == 2
    assert "--rows dogs: scores has no row named 'dogs'; its rows are I, love, cats" in result.stderr
