"""`symattn check` run as a user runs it: a subprocess."""

import json
import subprocess
import sys
from importlib import resources

import pytest
from clirun import cli


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args, cwd=cwd)


def lesson_figures() -> str:
    return resources.files("symattn.examples").joinpath("figures/i-love-cats.toml").read_text()


def test_the_lesson_checks_every_printed_number():
    result = run("check", "--example", "i-love-cats")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "figures:" in out and "0 not" in out
    assert "sqrt(d_k)" in out and "rounded" in out


def test_json_contract():
    result = run("check", "--example", "i-love-cats", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["summary"]["all_right"] is True
    assert data["summary"]["figures"] == len(data["figures"]) >= 45
    first_row = next(f for f in data["figures"] if f["target"] == "weights[I]")
    assert first_row["verdict"] == "rounded" and first_row["variant"] is None
    assert first_row["expected"] == ["0.136", "0.432", "0.432"]
    assert [e["verdict"] for e in first_row["entries"]] == ["rounded"] * 3
    unscaled = next(f for f in data["figures"] if f.get("variant") == "unscaled")
    assert unscaled["target"] == "weights[love]"
    assert unscaled["expected"] == ["0.00", "0.98", "0.02"]
    scalar = next(f for f in data["figures"] if f["target"] == "sqrt(d_k)")
    assert scalar["exact"] == "sqrt(3)" and scalar["expected"] == "1.73"
    assert "entries" not in scalar


def test_typos_exit_1_and_are_named(tmp_path):
    text = lesson_figures().replace('"[0.136, 0.432, 0.432]"', '"[0.137, 0.432, 0.432]"')
    text = text.replace('"[2.31, 9.24, 6.93]"', '"[2.31, 9.42, 6.93]"')
    path = tmp_path / "typos.toml"
    path.write_text(text, encoding="utf-8")
    result = run("check", str(path), "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    bad = [f["target"] for f in data["figures"] if f["verdict"] not in ("exact", "rounded")]
    assert bad == ["scaled[love]", "weights[I]"]
    text_result = run("check", str(path))
    assert text_result.returncode == 1
    assert "9.42 is not scaled[love, love]" in text_result.stdout


def test_a_bad_figure_is_reported_and_the_rest_checked(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('example = "i-love-cats"\n'
                    '[[figure]]\ntarget = "weights[I, I]"\ntext = "0.136"\n'
                    '[[figure]]\ntarget = "weights[I, I]"\ntext = "9^9^9^9"\n'
                    '[[figure]]\ntarget = "weights"\ntext = "[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]"\n',
                    encoding="utf-8")
    result = run("check", str(path), "--json")
    assert result.returncode == 1, result.stderr
    verdicts = [f["verdict"] for f in json.loads(result.stdout)["figures"]]
    assert verdicts == ["rounded", "invalid", "invalid"]


@pytest.mark.parametrize("content, words", [
    ("example = \n", "not valid TOML"),
    ("example = 'i-love-cats'\n", "no figures"),
    (b"\xff\xfe example", "UTF-8"),
])
def test_an_invalid_file_is_one_line_and_exit_2(tmp_path, content, words):
    path = tmp_path / "bad.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    result = run("check", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith("symattn: error: ")
    assert words in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_file_and_unknown_example():
    result = run("check", "nope.toml")
    assert result.returncode == 2 and "no such file" in result.stderr
    result = run("check", "--example", "nope")
    assert result.returncode == 2 and "no figures shipped" in result.stderr


def test_problem_path_relative_to_the_figures_file_and_output_file(tmp_path):
    (tmp_path / "sub").mkdir()
    problem = resources.files("symattn.examples").joinpath("soft-dictionary.toml").read_text()
    (tmp_path / "sub" / "dict.toml").write_text(problem, encoding="utf-8")
    figures = tmp_path / "sub" / "figures.toml"
    figures.write_text('problem = "dict.toml"\n'
                       '[variant.sharp]\nscale = "25/sqrt(2)"\n'
                       '[[figure]]\ntarget = "weights[query]"\ntext = "red=0.41  green=0.22"\n'
                       '[[figure]]\ntarget = "weights[query]"\ntext = "0.41, 0.22, 0.37"\n'
                       '[[figure]]\ntarget = "output[query]"\nvariant = "sharp"\ntext = "[255, 13]"\n',
                       encoding="utf-8")
    out = tmp_path / "verdicts.json"
    result = run("check", str(figures), "--json", "-o", str(out))
    assert result.returncode == 1, result.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [f["verdict"] for f in data["figures"]] == ["invalid", "rounded", "rounded"]
    assert data["figures"][2]["variant"] == "sharp"


HOSTILE = {   # issue 9, item 1: each is judged alone; none may stop the others
    "nested roots": ("weights[I, I]", "√" * 64 + "2"),
    "450 zeros": ("weights[I, I]", "2." + "0" * 450 + "e0"),
    "root tower": ("weights[I, I]", "(7^(1/4914))^(1/9441)^(1/4806)"),
    "10^2200": ("weights[I, I]", "10^2200"),
    "1e-9999": ("weights[I, I]", "1e-9999"),
    "huge target": ("d_k^9999", "1"),
}


def test_one_hostile_figure_among_good_ones(tmp_path):
    good = [("weights[I]", "0.136, 0.432, 0.432"), ("sqrt(d_k)", "1.73"),
            ("scores[love]", "4, 16, 12"), ("output[I]", "1.86, 6.32, 1.70")]
    figures = []
    for (gt, gx), (bt, bx) in zip(good * 2, HOSTILE.values()):
        figures += [(gt, gx), (bt, bx)]
    body = "".join(f'[[figure]]\ntarget = "{t}"\ntext = "{x}"\n' for t, x in figures)
    path = tmp_path / "hostile.toml"
    path.write_text('example = "i-love-cats"\n' + body, encoding="utf-8")
    result = run("check", str(path), "--json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stderr == ""
    data = json.loads(result.stdout)
    verdicts = data["figures"]
    assert len(verdicts) == len(figures) == 12
    for k, v in enumerate(verdicts):
        if k % 2 == 0:
            assert v["verdict"] in ("exact", "rounded"), v
        else:
            assert v["verdict"] not in ("exact", "rounded"), v
            assert "\n" not in v["message"] and len(v["message"]) < 2000
    huge = verdicts[-1]
    assert huge["target"] == "d_k^9999" and huge["verdict"] == "invalid"
    assert "over 1,000 digits" in huge["message"]
    text = run("check", str(path))
    assert text.returncode == 1 and "Traceback" not in text.stderr
    assert "12 figures: 6 right" in text.stdout
