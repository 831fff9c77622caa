"""Exact values on a budget everywhere (issue 24, scope item 3): reproducers first, then the caps.

* A scale, entry, sink or ALiBi slope such as ``log(7)*1.00000000000000000001`` is within every
  input cap, but SymPy writes e^(c·log b) as b^c: a root of index 10^20, which crashed the
  certifier (OverflowError) in explain, facts, worksheet and export.  Now refused when the
  engine is made (MAX_ROOT_INDEX), and the certifier encloses any root index anyway.
* An irrational ALiBi slope sent a 512 × 512 problem through SymPy's compares for over 10
  minutes: the symbolic-size cap (MAX_SYMBOLIC_SIDE) applies to the slope as to the inputs.
* ``explain --format json`` at n = 512 wrote 2.4 GB with 11 GiB of memory: its size is
  estimated first and refused past MAX_JSON_BYTES with the estimate and a hint.

Every refusal: exit 2, exactly one ``symattn: error:`` line naming the input and the cap, no
traceback, nothing written.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import flint
import mpmath
import pytest
import sympy

import symattn as sa
from symattn import limits
from symattn.errors import ProblemError
from symattn.numbers.certify import Rounding, certify, to_arb
from clirun import cli

LONG = "1.00000000000000000001"           # 10^20 + 1 over 10^20: a root of index 10^20
BASE = 'Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'


def toml(tmp: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(*args: str, cwd: Path | None = None) -> str:
    done = cli(*args, cwd=cwd)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.startswith("symattn: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


# ------------------------------------------------------------ roots made by e^(c·log b)

ROOT_CASES = {
    "scale": BASE + f'scale = "log(7)*{LONG}"\n',
    "entry": f'Q = [["log(7)*{LONG}", 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\nscale = 1\n',
    "sink": BASE + f'sink = "log(7)*{LONG}"\nscale = 1\n',
    "alibi-slope": BASE + f'alibi = {{ slope = "log(7)*{LONG}" }}\nscale = 1\n',
    "scale-and-alibi": BASE + f'alibi = {{ slope = "1/4" }}\nscale = "log(7)*{LONG}"\n',
    "scale-log-sum": BASE + f'scale = "log(2)*{LONG} + log(3)"\n',
    "scale-just-over": BASE + 'scale = "log(2)/10001"\n',
    # irrational scores: Δ = 1 − √2 in exp[0, 0], so 7^c · 7^(−c·√2)
    "scale-irrational-scores": f'Q = [[1, "sqrt(2)"]]\nK = [[2, 0], [1, 1]]\nV = [[1], [2]]\nscale = "log(7)*{LONG}"\n',
}
WORDS = {"scale": "the scale", "entry": "the logarithms in the inputs", "sink": "the sink",
         "alibi-slope": "the alibi slope", "scale-and-alibi": "the scale", "scale-log-sum": "the scale",
         "scale-just-over": "root of index 10,001", "scale-irrational-scores": "the scale"}


@pytest.mark.parametrize("name", ROOT_CASES)
@pytest.mark.parametrize("command", [("explain",), ("explain", "--format", "json"),
                                     ("explain", "--format", "latex"), ("facts",)])
def test_roots_of_huge_index_are_refused_in_every_view(tmp_path, name, command):
    path = toml(tmp_path, ROOT_CASES[name])
    line = refused(*command, str(path))
    assert "MAX_ROOT_INDEX" in line and WORDS[name] in line


@pytest.mark.parametrize("name", ["scale", "entry", "sink"])
def test_roots_of_huge_index_are_refused_by_worksheet_and_export(tmp_path, name):
    path = toml(tmp_path, ROOT_CASES[name])
    assert "MAX_ROOT_INDEX" in refused("worksheet", str(path), "-o", str(tmp_path / "sheet"))
    assert not (tmp_path / "sheet").exists()
    assert "MAX_ROOT_INDEX" in refused("export", str(path), "--to", "moodle", "-o", str(tmp_path / "q.xml"))
    assert not (tmp_path / "q.xml").exists()


POWER_CASES = {   # e^(c·log b) = b^c with a huge integer c: SymPy builds the integer on sight
    "sink": (BASE + 'sink = "log(7)*500000"\n', "the sink makes the sink's term of row 0"),
    "alibi-slope": (BASE + 'alibi = { slope = "log(7)*400000" }\n', "the alibi slope makes exp["),
    "entry": ('Q = [["log(7)*100000", 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\nscale = 1\n',
              "exp[0, 1]"),
}


@pytest.mark.parametrize("name", POWER_CASES)
@pytest.mark.parametrize("command", [("explain",), ("explain", "--format", "json"), ("facts",)])
def test_powers_too_long_to_print_are_refused(tmp_path, name, command):
    """These printed a ValueError traceback (Python's 4,300-digit limit) in explain and facts."""
    text, words = POWER_CASES[name]
    line = refused(*command, str(toml(tmp_path, text)))
    assert words in line and "digits (at most 1,000)" in line


def test_the_engine_refuses_before_any_value_is_built():
    with pytest.raises(ProblemError, match="root of index 100,000,000,000,000,000,000"):
        sa.attend(sa.Problem(Q=[[1, 0]], K=[[1, 0], [0, 1]], V=[[1], [2]], scale=f"log(7)*{LONG}"))


def test_roots_within_the_cap_give_the_independent_values():
    """scale = log(2)/10000 is within MAX_ROOT_INDEX: weights 2^(Δ/10000)/Σ, checked with mpmath."""
    trace = sa.attend(sa.Problem(Q=[[1, 0]], K=[[3, 0], [0, 1]], V=[[1], [0]], scale="log(2)/10000"))
    with mpmath.workdps(40):
        a, b = mpmath.mpf(2) ** (mpmath.mpf(3) / 10000), mpmath.mpf(2) ** (mpmath.mpf(0) / 10000)
        want = a / (a + b)
        got = trace.weights.decimals(Rounding(digits=20))[0][0]
        assert abs(mpmath.mpf(str(got)) - want) < mpmath.mpf(10) ** -19


def test_a_log_scale_with_a_soft_cap_builds_no_power():
    """c·tanh(x/c) in the exponent: SymPy writes no b^c, so the long coefficient is fine."""
    trace = sa.attend(sa.Problem(Q=[[1, 0]], K=[[1, 0], [0, 1]], V=[[1], [2]],
                                 scale=f"log(7)*{LONG}", softcap=50))
    s = mpmath.mpf(100000000000000000001) / 10**20 * mpmath.log(7)
    with mpmath.workdps(30):
        z = [50 * mpmath.tanh(s * x / 50) for x in (1, 0)]
        e = [mpmath.exp(x - max(z)) for x in z]
        want = e[0] / sum(e)
        got = trace.weights.decimals(Rounding(digits=12))[0][0]
        assert abs(mpmath.mpf(str(got)) - want) < mpmath.mpf(10) ** -11


@pytest.mark.parametrize("q", [2**32, 10**20, 3**50])
def test_the_certifier_encloses_any_root_index(q):
    """flint's root takes a C unsigned long: past 2^32 the power goes through exp and log."""
    value = sympy.Pow(7, sympy.Rational(1, q), evaluate=False) * 7
    ball = to_arb(value, 128)
    assert ball.rad() < flint.arb(2) ** -100
    with mpmath.workdps(50):
        want = 7 * mpmath.exp(mpmath.log(7) / q)
        assert abs(mpmath.mpf(ball.mid().str(45, radius=False)) - want) < mpmath.mpf(10) ** -35
        d = certify(value, Rounding(digits=25))
        assert abs(mpmath.mpf(str(d)) - want) < mpmath.mpf(10) ** -23
    assert to_arb(sympy.Pow(0, sympy.Rational(1, q), evaluate=False) + 0, 64) == 0


def test_a_derived_power_with_a_long_coefficient_is_not_sent_to_minimal_polynomial(tmp_path):
    """scale = log(1/3)·1540.8 (found by the fuzzing below): e^(scale) = 3^(-1540)·3^(-4/5), a
    735-digit number beside a fifth root; a weight next to 1 sent certify to SymPy's minimal
    polynomial, which ran for minutes.  Now the precision loop settles it."""
    path = toml(tmp_path, BASE + 'scale = "log(1/3)*1540.8"\n')
    done = cli("explain", str(path), "--format", "json", "--digits", "5")
    assert done.returncode == 0, done.stderr
    weights = json.loads(done.stdout)["steps"]["weights"]["decimal"]
    with mpmath.workdps(800):
        x = mpmath.mpf(3) ** (-mpmath.mpf(7704) / 5)          # e^(scale · 1), the score-1 key's
        want = [[x / (1 + x), 1 / (1 + x)], [1 / (1 + x), x / (1 + x)]]
        for got_row, want_row in zip(weights, want):
            for got, w in zip(got_row, want_row):
                assert abs(mpmath.mpf(got) - w) <= abs(w) * mpmath.mpf(10) ** -4


def test_no_minimal_polynomial_is_asked_for_a_huge_degree():
    """An exact test on a derived root of huge index answers "not known" at once instead of
    running SymPy's minimal_polynomial for degree 10^20 (certify then rounds by balls)."""
    from symattn.numbers.certify import _rational_value
    from symattn.numbers.compare import _is_exactly_zero

    big = sympy.Pow(7, sympy.Rational(1, 10**20), evaluate=False)
    assert _rational_value(big) is None and _is_exactly_zero(big - 1) is None
    assert _rational_value(sympy.sqrt(2) * sympy.sqrt(8)) == Fraction(4)   # small degree: still exact


# ------------------------------------------------------------ the symbolic-size cap on slopes

def _random_problem(n: int, d: int = 4, seed: int = 0) -> dict:
    rnd = random.Random(seed)
    return {name: [[rnd.randint(-3, 3) for _ in range(cols)] for _ in range(n)]
            for name, cols in (("Q", d), ("K", d), ("V", 2))}


def _toml(data: dict, extra: str = "") -> str:
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in data.items()) + extra


@pytest.mark.parametrize("slope", ["2^(-1/2)", "pi/8", "log(2)", "e^(-1)"])
def test_an_irrational_alibi_slope_meets_the_symbolic_size_cap(tmp_path, slope):
    n = limits.MAX_SYMBOLIC_SIDE + 1
    path = toml(tmp_path, _toml(_random_problem(n), f'mask = "causal"\nalibi = {{ slope = "{slope}" }}\n'))
    line = refused("explain", str(path))
    assert "alibi slope is not a rational number" in line and "MAX_SYMBOLIC_SIDE" in line
    # the 512 × 512: refused as fast (nothing is compared)
    big = toml(tmp_path, _toml(_random_problem(512), f'alibi = {{ slope = "{slope}" }}\n'), "big.toml")
    assert "MAX_SYMBOLIC_SIDE" in refused("explain", str(big))


def test_a_symbolic_scale_meets_the_symbolic_size_cap(tmp_path):
    """A scale with a symbol sent every step through SymPy: 64 × 64 ran past 60 s."""
    n = limits.MAX_SYMBOLIC_SIDE + 1
    path = toml(tmp_path, _toml(_random_problem(n), 'scale = "s"\nsymbols = ["s"]\n'))
    line = refused("explain", str(path))
    assert "the scale holds the symbols s" in line and "MAX_SYMBOLIC_SIDE" in line
    data = _random_problem(4)
    small = sa.attend(sa.Problem(**data, scale="s", symbols=["s"]))
    s = sympy.Symbol("s", real=True)
    for j in range(4):                                   # scaled = s · (q_0 · k_j), exactly
        score = sum(a * b for a, b in zip(data["Q"][0], data["K"][j]))
        assert sympy.expand(small.scaled[0, j] - s * score) == 0


def test_an_irrational_slope_within_the_cap_is_worked_exactly():
    n = limits.MAX_SYMBOLIC_SIDE
    data = _random_problem(n, seed=3)
    trace = sa.attend(sa.Problem(**data, mask="causal", alibi={"slope": "2^(-1/2)"}))
    i = n - 1
    with mpmath.workdps(30):
        s = [mpmath.fsum(mpmath.mpf(a) * b for a, b in zip(data["Q"][i], data["K"][j])) / 2
             - mpmath.sqrt(2) / 2 * (i - j) for j in range(n)]
        e = [mpmath.exp(x - max(s)) for x in s]
        want = e[0] / mpmath.fsum(e)
        got = trace.weights.decimals(Rounding(digits=15))[i][0]
        assert abs(mpmath.mpf(str(got)) - want) <= abs(want) * mpmath.mpf(10) ** -14
    sa.attend(sa.Problem(**_random_problem(512), alibi={"slope": "1/4"}))    # a rational slope: any size


# ------------------------------------------------------------ explain --format json on a budget

def test_json_at_512_is_refused_with_its_size_and_a_hint(tmp_path):
    path = toml(tmp_path, _toml(_random_problem(512, d=8)))
    out = tmp_path / "o.json"
    line = refused("explain", str(path), "--format", "json", "-o", str(out))
    assert "MAX_JSON_BYTES" in line and ("GiB" in line or "MiB" in line) and "--decimal-only" in line
    assert not out.exists()
    done = cli("explain", str(path), "--format", "json", "--decimal-only", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["steps"]["weights"]["shape"] == [512, 512] and "exact" not in data["steps"]["weights"]
    assert out.stat().st_size <= limits.MAX_JSON_BYTES


def test_the_estimate_is_close_to_what_is_written():
    """The refusal's number is honest: within 25% of the real size on problems that fit."""
    from symattn.document.trace_json import estimate_json_bytes, render_json

    for n, extra in ((40, {}), (24, {"mask": "causal"}), (16, {"softcap": "sqrt(2)"}), (30, {"sink": "log(3)"})):
        trace = sa.attend(sa.Problem(**_random_problem(n, seed=n), **extra))
        for decimal_only in (False, True):
            real = len(render_json(trace, 3, decimal_only=decimal_only).encode("utf-8"))
            est = estimate_json_bytes(trace, 3, decimal_only=decimal_only)
            assert 0.75 * real <= est <= 1.6 * real, (n, extra, decimal_only, est, real)


def test_the_json_cap_is_exact_at_the_edge(monkeypatch):
    from symattn.document import trace_json

    trace = sa.attend(sa.Problem(**_random_problem(8)))
    size = trace_json.estimate_json_bytes(trace, 3)
    monkeypatch.setattr(limits, "MAX_JSON_BYTES", size)
    json.loads(trace_json.render_json(trace, 3))
    monkeypatch.setattr(limits, "MAX_JSON_BYTES", size - 1)
    with pytest.raises(ProblemError, match="MAX_JSON_BYTES"):
        trace_json.render_json(trace, 3)


# ------------------------------------------------------------ fuzzing the log coefficients

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PLACES = {
    "scale": lambda v: BASE + f'scale = "{v}"\n',
    "sink": lambda v: BASE + f'sink = "{v}"\nscale = 1\n',
    "alibi": lambda v: BASE + f'alibi = {{ slope = "{v}" }}\n',
    "entry": lambda v: f'Q = [["{v}", 1], [0, 1]]\nK = [[1, 0], [2, 1]]\nV = [[1, 2], [3, 4]]\nscale = 1\n',
    "softcap": lambda v: BASE + f'scale = "{v}"\nsoftcap = 30\n',
}


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(_PLACES)), st.sampled_from([2, 3, 7, 10, "1/3", "22/7"]),
       st.integers(-3000, 3000), st.text("0123456789", max_size=25), st.sampled_from(["text", "json", "latex"]))
def test_log_coefficients_end_in_a_result_or_one_line(tmp_path_factory, place, base, whole, digits, fmt):
    """c·log(b) with any number of decimal places anywhere it can be typed: a result, or exit 2
    with one line; never a traceback.  (``facts`` takes its 3 s of general proofs on any input,
    so it is held to the same by the named cases above, not here.)"""
    value = f"log({base})*{whole}" + (f".{digits}" if digits else "")
    path = toml(tmp_path_factory.mktemp("log"), _PLACES[place](value))
    done = cli("explain", str(path), "--format", fmt)
    assert "Traceback" not in done.stderr, (value, place, done.stderr[-1500:])
    assert done.returncode in (0, 1, 2), (value, place, done.returncode)
    if done.returncode == 2:
        assert done.stderr.startswith("symattn: error: ") and done.stderr.count("\n") == 1, done.stderr
