"""The command line, run as a user runs it: a subprocess."""

import json
import subprocess
import sys

import pytest
import sympy

LESSON_TOML = """title = "I love cats"
tokens = ["I", "love", "cats"]
X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_k = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_v = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
"""


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "symattn", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_explain_works_the_lesson_by_default():
    result = run("explain")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "I love cats" in out
    assert "1·0 + 0·1 + 2·1 = 2" in out          # a dot product written out
    assert "2/√3" in out and "2√3/3" not in out   # the hand-written form of a scaled score
    assert "≈ [1.15, 2.31, 2.31]" in out
    assert "row maximum: 12/√3 ≈ 6.93" in out     # the max-subtraction trick on 'cats'
    assert "[−8/√3, 0, −2/√3] ≈ [−4.62, 0, −1.15]" in out
    assert "0.136" in out and "0.432" in out
    assert "≈ [1.86, 6.32, 1.70]" in out


def test_json_contract_reads_back_exactly():
    result = run("explain", "--example", "i-love-cats", "--format", "json", "--digits", "6")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["digits"] == 6
    for name in ("X", "Q", "K", "V", "scores", "scaled", "weights", "output"):
        assert name in data["steps"]
    weights = data["steps"]["weights"]
    assert weights["shape"] == [3, 3]
    assert weights["decimal"][0] == ["0.136126", "0.431937", "0.431937"]
    exact = sympy.sympify(weights["exact"][0][0])  # the test reads our output, not user input
    expected = sympy.exp(-2 / sympy.sqrt(3)) / (sympy.exp(-2 / sympy.sqrt(3)) + 2)
    assert sympy.simplify(exact - expected) == 0
    assert data["steps"]["scores"]["exact"] == [["2", "4", "4"], ["4", "16", "12"], ["4", "12", "10"]]
    assert data["steps"]["output"]["decimal"][0] == ["1.86387", "6.31937", "1.70419"]


def test_json_decimal_only_and_masked_entries(tmp_path):
    path = tmp_path / "causal.toml"
    path.write_text(LESSON_TOML + 'mask = "causal"\n')
    result = run("explain", str(path), "--format", "json", "--digits", "3", "--decimal-only")
    assert result.returncode == 0, result.stderr
    steps = json.loads(result.stdout)["steps"]
    assert "exact" not in steps["weights"]
    assert steps["masked"]["decimal"][0] == ["1.15", "-inf", "-inf"]
    assert steps["weights"]["decimal"][0] == ["1", "0", "0"]


def test_examples_lists_both_seed_examples():
    result = run("examples")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names[0] == "i-love-cats"
    assert "soft-dictionary" in names and "soft-dictionary-sharpness-25" in names
    shown = run("examples", "--show", "soft-dictionary")
    assert 'scale = "1/sqrt(2)"' in shown.stdout


def test_soft_dictionary_example():
    result = run("explain", "--example", "soft-dictionary-sharpness-25", "--format", "json",
                 "--digits", "2", "--decimal-only")
    data = json.loads(result.stdout)
    assert data["steps"]["weights"]["decimal"] == [["0.92", "1.1e-7", "0.078"]]
    assert data["key_tokens"] == ["red", "green", "orange"]


@pytest.mark.parametrize("content, message", [
    (LESSON_TOML.replace("[1, 0, 1, 0], [0, 2, 0, 2]", "[1, 0, 1], [0, 2, 0, 2]"),
     "X row 1 has 4 entries but row 0 has 3"),
    (LESSON_TOML + "colour = 1\n", "unknown key 'colour'"),
    (LESSON_TOML + 'mask = [[0, 0, 0], [1, 1, 1], [1, 1, 1]]\n', "mask row 0 ('I') blocks every key"),
    (LESSON_TOML.replace("W_k = [[0, 0, 1]", "W_k = [[\"0+\", 0, 1]"), "W_k[0][0]"),
])
def test_bad_problem_files_exit_2_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    out = tmp_path / "out.json"
    result = run("explain", str(path), "--format", "json", "-o", str(out))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (("explain", "--example", "nope"), "no example named 'nope'"),
    (("explain", "missing.toml"), "missing.toml: no such file"),
    (("explain", "--digits", "0"), "--digits must be between 1 and"),
    (("explain", "--rows", "dogs"), "no row named 'dogs'"),
    (("explain", "--frobnicate"), "unrecognized arguments"),
])
def test_bad_command_lines_exit_2(args, message):
    result = run(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_output_file_is_written_whole(tmp_path):
    out = tmp_path / "lesson.txt"
    result = run("explain", "--row", "love", "-o", str(out))
    assert result.returncode == 0 and result.stdout == ""
    text = out.read_text()
    assert "The dot products of row 'love'" in text
    assert [p.name for p in tmp_path.iterdir()] == ["lesson.txt"]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["explain", "--help"], ["worksheet", "--help"]])
def test_version_and_help_start_without_sympy(argv):
    """Start-up a user feels: --version and --help load no SymPy (issue 25: 1.6 s before)."""
    code = ("import sys\nfrom symattn.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('sympy', 'flint', 'mpmath', 'numpy') if m in sys.modules)\n"
            "print('LOADED', heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "LOADED []"


def test_the_public_names_load_on_first_use():
    code = ("import sys, symattn as sa\nassert 'sympy' not in sys.modules\n"
            "t = sa.attend(sa.load_example('i-love-cats'))\n"
            "print(str(t.weights.decimal('I', 'love', 3)), sorted(set(sa.__all__) - set(dir(sa))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0.432 []"
