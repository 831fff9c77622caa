"""Token names are set apart in running text (issue 25): "the weight of the is ..." read as a
broken sentence when a token is an English word.  LaTeX sets them in \\texttt, HTML in
<code class="token">, text in quotes; labels of matrix rows and columns stay as they were."""

from __future__ import annotations

from clirun import cli


def _files(tmp_path, *args: str) -> dict[str, str]:
    done = cli("worksheet", *args, "-o", "ws", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "ws").iterdir() if p.is_file()}


def test_latex_key_sets_token_names_apart_in_prose(tmp_path):
    key = _files(tmp_path, "--template", "window")["version-A-key.tex"]
    assert "Exactly, the weight of \\texttt{sat} is a fraction of exponentials:" in key
    assert "\\paragraph{Row \\texttt{down}.}" in key
    assert "The mask blocks \\texttt{the}, \\texttt{cat}: weight exactly 0." in key
    assert "(\\text{key \\texttt{down}})" in key
    assert "Row \\texttt{the} blends the value rows with its weights:" in key
    assert "\\textup{" not in key
    assert " & \\text{the} & \\text{cat} & \\text{sat} & \\text{down} \\\\" in key   # labels unchanged


def test_latex_sheet_instructions_mark_the_prompt_and_the_blocks(tmp_path):
    sheet = _files(tmp_path, "--template", "kv-cache")["version-A-sheet.tex"]
    assert "the first 3 tokens (\\texttt{I}, \\texttt{love}, \\texttt{cats}) are the prompt" in sheet
    (tmp_path / "o").mkdir()
    sheet = _files(tmp_path / "o", "--template", "online-softmax")["version-A-sheet.tex"]
    assert ("reads the keys in blocks (\\texttt{k1}, \\texttt{k2}), (\\texttt{k3}, \\texttt{k4}), "
            "numbered from 0") in sheet


def test_html_key_sets_token_names_apart_as_code(tmp_path):
    key = _files(tmp_path, "--template", "window", "--format", "html")["version-A-key.html"]
    assert 'Exactly, the weight of <code class="token">sat</code> is a' in key
    assert '<h3>Row <code class="token">down</code></h3>' in key
    assert 'The mask blocks <code class="token">the</code>, <code class="token">cat</code>: weight' in key
    assert "(key “down”)" in key
    assert 'title="weight of query “sat” on key “cat”: ' in key
    assert '<span class="token">' not in key


def test_text_derivation_quotes_token_names(tmp_path):
    done = cli("explain", "--example", "i-love-cats")
    assert done.returncode == 0
    assert "(keys 'I', 'love', 'cats')" in done.stdout
    assert "By hand, the query of 'I' is its embedding times W_q:" in done.stdout
