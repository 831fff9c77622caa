"""Exact values print exactly (issue 25, "Numbers").

An exact terminating value is written without padding ("1.1", "0.5", "1"), also when
its step is certified from balls because its neighbours are irrational (RoPE, ALiBi,
√2 inputs): the rule of README's JSON section and of ``certify``'s docstring.
"""

from __future__ import annotations

import json

import pytest

import symattn as sa
from clirun import cli

IRRATIONAL = dict(Q=[["sqrt(2)", "1/10"], ["-1/4", "1"]], K=[["1", "sqrt(2)"], ["1/2", "0"]],
                  V=[["1/10", "sqrt(2)"], ["-1/4", "1"]], tokens=["a", "b"])


def _texts(trace: sa.Trace, step: str, digits: int = 4) -> list[list[str]]:
    return [[getattr(d, "text", str(d)) for d in row] for row in trace.step(step).decimals(digits)]


def test_scaled_and_shifted_of_irrational_inputs_are_not_padded():
    trace = sa.attend(sa.Problem(**IRRATIONAL))
    # (11·√2/10)/√2 = 11/10 and (√2/2)/√2 = 1/2, certified from balls
    assert _texts(trace, "scaled") == [["1.1", "0.5"], ["0.8232", "-0.08839"]]
    assert _texts(trace, "shifted") == [["0", "-0.6"], ["0", "-0.9116"]]
    assert [d.exact for d in trace.scaled.decimals(4)[0]] == [True, True]


def test_alibi_biased_and_masked_exact_values_are_not_padded():
    trace = sa.attend(sa.Problem(**IRRATIONAL, mask="causal", alibi={"slope": "1/2"}))
    assert _texts(trace, "biased")[0] == ["1.1", "1"]          # 11/10 + 0, 1/2 + 1/2
    assert _texts(trace, "masked")[0] == ["1.1", "-inf"]
    assert _texts(trace, "output")[0] == ["0.1", "1.414"]


def test_rope_steps_keep_exact_values_exact():
    trace = sa.attend(sa.Problem(**IRRATIONAL, rope={"theta": ["pi/2"]}))
    assert _texts(trace, "scaled")[0] == ["1.1", "0.03536"]
    assert _texts(trace, "Q_rot") == [["1.414", "0.1"], ["-1", "-0.25"]]


@pytest.fixture
def irrational_file(tmp_path):
    path = tmp_path / "irrational.toml"
    path.write_text('tokens = ["a", "b"]\n'
                    'Q = [["sqrt(2)", "1/10"], ["-1/4", "1"]]\n'
                    'K = [["1", "sqrt(2)"], ["1/2", "0"]]\n'
                    'V = [["1/10", "sqrt(2)"], ["-1/4", "1"]]\n', encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["text", "latex", "html", "json"])
def test_every_format_prints_the_exact_scaled_row_unpadded(irrational_file, fmt):
    result = cli("explain", str(irrational_file), "--digits", "4", "--format", fmt)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for padded in ("1.100", "0.5000", "0.6000"):
        assert padded not in out
    if fmt == "json":
        steps = json.loads(out)["steps"]
        assert steps["scaled"]["decimal"][0] == ["1.1", "0.5"]
        assert steps["shifted"]["decimal"][0] == ["0", "-0.6"]
    elif fmt == "text":
        assert "[11/10, 1/2] ≈ [1.1, 0.5]" in out
    elif fmt == "latex":
        assert r"\left[1.1,\ 0.5\right]" in out
    else:
        assert ">1.1<" in out and ">0.5<" in out


@pytest.mark.parametrize("fmt, exact, approx", [
    ("text", "divided by √4 = 2\n", "divided by √3 ≈ 1.73"),
    ("latex", r"divided by $\sqrt{4} = 2$", r"divided by $\sqrt{3} \approx 1.73$"),
    ("html", "<msqrt><mn>4</mn></msqrt><mo>=</mo><mn>2</mn>", "<mo>≈</mo>"),
])
def test_a_rational_square_root_of_d_k_is_written_with_equals(fmt, exact, approx):
    """√4 is exactly 2 (issue 25): "=", and 2 itself, not a padded decimal, also at --places."""
    for places in ([], ["--places", "4"]):
        rope = cli("explain", "--example", "rope", "--format", fmt, *places)
        assert rope.returncode == 0, rope.stderr
        assert exact in rope.stdout
        assert "√4 ≈" not in rope.stdout and r"\sqrt{4} \approx" not in rope.stdout
        assert "2.0000" not in rope.stdout.split("divided by", 1)[1][:200]
    lesson = cli("explain", "--example", "i-love-cats", "--format", fmt)
    assert approx in lesson.stdout
