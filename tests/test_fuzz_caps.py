"""Fuzz at the caps: hostile text through every API a user reaches ends in a result or a SymattnError.

Long and nested expressions, huge and tiny magnitudes, roots and powers go
into problem entries (``Problem(...)`` and TOML files through ``explain``),
written answers (``Checker.check``), targets, CSV cells (``grade`` through
the command line) and claims (``facts``).  Every input must end in a result
or one of symattn's own errors with a one-line message (the CLI: exit 0, 1
or 2 with one ``symattn: error:`` line) — never another exception.

This file is the fast budget that runs in CI (derandomized, ~200 inputs,
no timing asserted: tests are not timed).  Inputs run in one worker
process whose address space is capped at 1 GiB (``RLIMIT_AS``), so a
signal or a memory blow-up is a failure naming the input instead of the
end of the test session; a worker still busy after HANG_GUARD seconds is
killed (a guard against a stalled suite, not a timing test).
``benchmarks/fuzz_caps.py`` draws from the same strategies, runners and
worker for a large budget and also reports inputs slower than 1 s.
"""

from __future__ import annotations

import contextlib
import csv
import io
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import symattn as sa
from symattn import cli
from symattn.errors import SymattnError

HANG_GUARD = 30           # seconds; a guard against a stalled suite, not a timing test
GIB = 1 << 30             # the worker's address-space cap

# ---------------------------------------------------------------- hostile text

#: The inputs the issues name, and their neighbours.
NAMED = [
    "√" * 64 + "2", "√" * 55 + "2", "√" * 70 + "2", "sqrt(" * 60 + "2" + ")" * 60,
    "(7^(1/4914))^(1/9441)^(1/4806)", "(1/7244)^(1/9827)", "2." + "0" * 450 + "e0",
    "10^2200", "1e-9999", "1e12", "1e9", "1e10", "1e11", "1e30", "10^100", "2^64", "1e19",
    "-inf", "-oo", "−∞", "∞", "inf", "oo", "nan", "−1", "1/0", "0^0", "0^-1", "log(0)",
    "9" * 4300, "9" * 4301, "9" * 5000, "1" + "0" * 5001, "0." + "0" * 4999 + "1",
    "e^(10^4)", "e^(-10^4)", "exp(10000)", "exp(-10000)", "2^(10^4)", "(10^4000)^(1/7)",
    "(" * 99 + "1" + ")" * 99, "(" * 101 + "1" + ")" * 101, "+".join(["1"] * 5000),
    "1/" * 2000 + "1", "-" * 99 + "1", "√(2)^(1/9999)", "(2^(1/9973))^(9973)",
    "√2+√3-√(5+2√6)", "π^π^π", "e^e^e^e", "log(log(log(2)))", "1e-10000", "1e10000",
]

_INT = st.integers(-10_000, 10_000).map(str)
_SMALL = st.integers(1, 9999)


#: Sizes where the caps (symattn/limits.py, docs/limits.md) or Python's own limits sit,
#: with their neighbours: inputs just inside a cap must be cheap, just outside refused.
_EDGES = [k + d for k in (8, 16, 30, 64, 100, 300, 400, 1000, 2000, 4300, 5000, 10_000) for d in (-1, 0, 1)]
_PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23]


def _at_the_caps() -> st.SearchStrategy[str]:
    edge = st.sampled_from(_EDGES)
    return st.one_of(
        st.builds(lambda k, d: (d * k)[:k], edge, st.sampled_from(["9", "1", "123456789"])),
        st.builds(lambda k, s: f"{s}1e{k}", edge, st.sampled_from(["", "-"])),
        st.builds(lambda k, s: f"1e{s}{k}", edge, st.sampled_from(["", "-"])),
        st.builds(lambda b, k, s: f"{b}^{s}{k}", st.integers(2, 10), edge, st.sampled_from(["", "-"])),
        st.builds(lambda b, k: f"{b}^(1/{k})", st.integers(2, 99), edge),
        st.builds(lambda k: "*".join(f"sqrt({p})" for p in _PRIMES[:k]), st.integers(1, len(_PRIMES))),
        st.builds(lambda k, q: f"(123456789012345678901234567890{'7' * k})^(1/{q})",
                  st.integers(0, 3), st.integers(2, 17)),
        st.builds(lambda k, x: "√" * k + str(x), st.integers(1, 5), st.integers(2, 10**30)),
        st.builds(lambda k: "(" * k + "1" + ")" * k, edge),
        st.builds(lambda d: str(10**6 + d), st.integers(-1, 1)),
        st.builds(lambda d: str(10**12 + d), st.integers(-1, 1)),
        st.sampled_from(["1e6", "-1e6", "999999.5", "1000000.5", "1e12", "1e-12", "10^6", "10^12"]),
    )


def _numerals() -> st.SearchStrategy[str]:
    return st.one_of(
        _INT,
        _at_the_caps(),
        st.builds(lambda a, b, e: f"{a}.{b}e{e}", st.integers(-99, 99), st.integers(0, 999),
                  st.integers(-12_000, 12_000)),
        st.builds(lambda k, d: d * k, st.integers(1, 5200), st.sampled_from("19")),
        st.builds(lambda k: "2." + "0" * k + "e0", st.integers(0, 600)),
        st.builds(lambda k: f"1e{k}", st.integers(-12_000, 12_000)),
        st.builds(lambda k: f"10^{k}", st.integers(-12_000, 12_000)),
        st.builds(lambda p, q, r: f"({p}/{q})^(1/{r})", _SMALL, _SMALL, _SMALL),
        st.sampled_from(["pi", "π", "e", "∞", "-inf", "-oo", "oo", "inf", "nan", "−1", "√2",
                         "sqrt(2)", "0", "0.5", ".5", "5.", "1E10", "2/√3", "−∞", "d_k"]),
    )


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda k, x: "√" * k + f"({x})", st.integers(1, 70), inner),
        st.builds(lambda k, x: "sqrt(" * k + x + ")" * k, st.integers(1, 70), inner),
        st.builds(lambda a, b: f"({a})^({b})", inner, inner),
        st.builds(lambda a, p, q: f"({a})^(1/{p})^(1/{q})", inner, _SMALL, _SMALL),
        st.builds(lambda xs: " + ".join(xs), st.lists(inner, min_size=2, max_size=40)),
        st.builds(lambda k, x: "1+" * k + x, st.integers(1, 6000), inner),
        st.builds(lambda k, x: "(" * k + x + ")" * k, st.integers(1, 150), inner),
        st.builds(lambda f, x: f"{f}({x})", st.sampled_from(["exp", "log", "sqrt", "abs", "√"]), inner),
        st.builds(lambda s, x: s + x, st.sampled_from(["-", "−", "+", "--"]), inner),
        st.builds(lambda a, op, b: f"{a}{op}{b}", inner, st.sampled_from("*/·×÷-+"), inner),
    )


def _mild() -> st.SearchStrategy[str]:
    """Numbers well inside the caps, so that many inputs are accepted and reach the
    engine, the views and the checker (where the cost of an accepted input is paid)."""
    return st.one_of(
        st.integers(-99, 99).map(str),
        st.builds(lambda a, b: f"{a}.{b}", st.integers(-9, 9), st.integers(0, 999)),
        st.builds(lambda p, q: f"{p}/{q}", st.integers(-99, 99), st.integers(1, 99)),
        st.builds(lambda k: f"√{k}", st.sampled_from([0, 2, 3, 4, 12, 27])),
        st.builds(lambda k: f"1e-{k}", st.integers(0, 300)),
        st.builds(lambda b, k: f"{b}^{k}", st.integers(2, 9), st.integers(-300, 300)),
        st.builds(lambda p, q, r: f"({p}/{q})^(1/{r})", st.integers(1, 99), st.integers(1, 99),
                  st.integers(2, 8)),
        st.builds(lambda x: f"exp({x})", st.integers(-700, 50)),
        st.sampled_from(["e", "pi", "π", "2/√3", "1/sqrt(3)", "0.136", "−0.5", "13.6%", "0."]),
    )


def _combine_mild(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda x: f"√({x})", inner),
        st.builds(lambda a, b: f"({a})^({b})", inner, st.integers(-3, 3).map(str)),
        st.builds(lambda xs: " + ".join(xs), st.lists(inner, min_size=2, max_size=4)),
        st.builds(lambda f, x: f"{f}({x})", st.sampled_from(["exp", "log", "sqrt"]), inner),
        st.builds(lambda a, op, b: f"{a}{op}{b}", inner, st.sampled_from("*/·×÷-+"), inner),
    )


#: One hostile expression: a named one, one built from numerals, roots and powers at
#: and past the caps, or one well inside them.
MILD = st.recursive(_mild(), _combine_mild, max_leaves=5)
EXPRESSIONS = st.one_of(st.sampled_from(NAMED), st.recursive(_numerals(), _combine, max_leaves=6), MILD)

STEPS = ["Q", "K", "V", "scores", "scaled", "shifted", "exp", "row_sum", "weights", "output", "masked"]
KEYS = st.one_of(st.sampled_from(["I", "love", "cats", "0", "1", "2", "-1", "9" * 30, "", "I, love"]),
                 st.integers(-10**6, 10**6).map(str))


def _targets() -> st.SearchStrategy[str]:
    step = st.sampled_from(STEPS)
    plain = st.one_of(step, st.builds(lambda s, k: f"{s}[{k}]", step, KEYS),
                      st.builds(lambda s, a, b: f"{s}[{a}, {b}]", step, KEYS, KEYS))
    return st.one_of(
        plain,
        st.sampled_from(["d_k^9999", "sqrt(d_k)", "sqrt(d_k)^(1/9999)", "d_k^(10^4)",
                         "sum(exp(scaled[I]))", "rowsum(weights)", "scores[I] / sqrt(d_k)"]),
        st.builds(lambda x, t: f"({x})*{t}", EXPRESSIONS, plain),
        st.builds(lambda f, k, t: f"{f}(" * k + t + ")" * k, st.sampled_from(["sum", "exp", "sqrt"]),
                  st.integers(1, 120), plain),
        st.builds(lambda t, x: f"{t}^({x})", plain, EXPRESSIONS),
        EXPRESSIONS,
    )


TARGETS = _targets()
SCALAR_TARGETS = ["weights[I, I]", "scaled[cats, cats]", "sqrt(d_k)", "weights[cats, I]",
                  "output[love, 2]", "sum(exp(scaled[I]))", "shifted[cats, I]"]
ROW_TARGETS = ["weights[I]", "output[love]", "shifted[cats]", "exp(scaled[I])", "scores[love]"]
GOOD_TARGETS = [*SCALAR_TARGETS, *ROW_TARGETS, "weights"]
PROBLEMS = ["i-love-cats", "i-love-cats-causal"]


def _answers() -> st.SearchStrategy[str]:
    sep = st.sampled_from([", ", " / ", "  ", "; ", "\n"])
    return st.one_of(
        EXPRESSIONS,
        st.builds(lambda xs, s: s.join(xs), st.lists(EXPRESSIONS, min_size=2, max_size=9), sep),
        st.builds(lambda x: f"[[{x}, 0.43, 0.43], [0, 0.91, 0.09], [0.01, 0.75, 0.24]]", EXPRESSIONS),
        st.builds(lambda x: f"≈ {x}", EXPRESSIONS),
        st.builds(lambda x: f"{x}%", EXPRESSIONS),
    )


ANSWERS = _answers()
#: One entry of a written row or matrix: mostly mild, so that whole rows get read and judged.
_UNSPACED = st.one_of(MILD, MILD, MILD, EXPRESSIONS).map(lambda x: x.replace(" ", ""))

#: A TOML value that Python's tomllib reads as a number: huge integers, tiny and huge floats.
TOML_NUMBERS = st.one_of(
    st.builds(lambda k: "9" * k, st.integers(1, 6000)),
    st.builds(lambda k: "-1" + "0" * k, st.integers(1, 6000)),
    st.builds(lambda e: f"1e{e}", st.integers(-10_000, 400)),
    st.builds(lambda k: "2." + "0" * k + "e0", st.integers(0, 600)),
    st.sampled_from(["1e12", "1e-9999", "-inf", "inf", "nan", "1e308", "5e-324", "1.7976931348623157e308",
                     "0.1", "-0.0", "1_000", "0x10", "0o17", "0b101"]),
)


def _toml_entry() -> st.SearchStrategy[str]:
    """One TOML value: a string through symattn's parser, or a raw TOML number."""
    return st.one_of(EXPRESSIONS.map(lambda x: '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'),
                     TOML_NUMBERS)


#: (slot, text): where a hostile entry goes in a 2×2 problem (Q, K, V entry or the scale).
SLOTS = st.sampled_from(["Q", "K", "V", "scale", "X", "W_q", "QK"])


# ---------------------------------------------------------------- runners
# Each runner takes one generated case and returns normally on a result or a
# SymattnError; anything else (another exception, a non-one-line error, a
# bad exit status) raises.  The benchmark calls the same runners.


def _one_line(exc: SymattnError) -> None:
    text = str(exc)
    assert text and "\n" not in text, f"{type(exc).__name__} message is not one line: {text[:300]!r}"


def _base(slot: str, value: object) -> dict:
    base = {"Q": [[1, 2], [0, 1]], "K": [[1, 0], [2, 1]], "V": [[3, 1], [0, 2]]}
    if slot in ("X", "W_q"):
        base = {"X": [[1, 0], [1, 1]], "W_q": [[1, 0], [0, 1]], "W_k": [[1, 2], [0, 1]],
                "W_v": [[2, 1], [1, 0]]}
    if slot == "scale":
        base["scale"] = value
    elif slot == "QK":                 # in Q and K: the scores reach the square of the entry
        base["Q"][1][0] = base["K"][1][0] = value
    else:
        base[slot][1][0] = value
    return base


def run_problem(case: tuple[str, str, int]) -> None:
    """A hostile entry in Problem(...), then every view: JSON (every decimal), text, LaTeX."""
    from symattn.numbers.certify import Rounding
    from symattn.document.trace_json import render_json
    from symattn.document.trace_latex import LatexOptions, render_latex
    from symattn.document.trace_text import TextOptions, render_text

    slot, text, digits = case
    try:
        trace = sa.attend(sa.Problem(**_base(slot, text)))
        render_json(trace, digits, decimal_only=True)
        render_text(trace, TextOptions(digits=digits))
        render_latex(trace, LatexOptions(rounding=Rounding(digits=digits)))
    except SymattnError as exc:
        _one_line(exc)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    err_text = err.getvalue()
    assert status in (0, 1, 2), f"exit status {status}: {err_text[-500:]}"
    if status == 2:
        assert err_text.startswith("symattn: error: ") and err_text.count("\n") == 1, \
            f"exit 2 without one error line: {err_text[:500]!r}"
    return status, out.getvalue(), err_text


def _toml_problem(slot: str, entry: str) -> str:
    rows = {"Q": ["1", "2", "0", "1"], "K": ["1", "0", "2", "1"], "V": ["3", "1", "0", "2"]}
    lines = []
    for name in ("Q", "K", "V"):
        cells = rows[name]
        if name == slot:
            cells = [cells[0], cells[1], entry, cells[3]]
        lines.append(f"{name} = [[{cells[0]}, {cells[1]}], [{cells[2]}, {cells[3]}]]")
    if slot == "scale":
        lines.append(f"scale = {entry}")
    return "\n".join(lines) + "\n"


def run_toml(case: tuple[str, str, str, int]) -> None:
    """A hostile entry (string or raw TOML number) in a problem file: explain in one format."""
    slot, entry, fmt, digits = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "problem.toml"
        path.write_text(_toml_problem(slot, entry), encoding="utf-8")
        argv = ["explain", str(path), "--digits", str(digits)]
        if fmt != "text":
            argv += ["--format", fmt]
        _cli(argv)


_CHECKERS: dict[str, object] = {}


def _checker(name: str):
    from symattn.check import Checker

    if name not in _CHECKERS:
        _CHECKERS[name] = Checker(sa.load_example(name))
    return _CHECKERS[name]


_CODES = {"exact", "rounded", "last-digit", "mistake", "wrong", "invalid"}


def _verdict(checker, target: str, text: str) -> None:
    verdict = checker.check(target, text)
    assert verdict.code in _CODES, verdict.code
    assert "\n" not in verdict.message, f"verdict message is not one line: {verdict.message[:300]!r}"


def run_answer(case: tuple[str, str, str]) -> None:
    """A hostile written answer to a real target."""
    name, target, text = case
    _verdict(_checker(name), target, text)


def run_target(case: tuple[str, str, str]) -> None:
    """A hostile target with a plain answer."""
    name, target, text = case
    _verdict(_checker(name), target, text)


def run_grade(case: tuple[str, list[str], list[list[str]]]) -> None:
    """A class CSV with hostile cells (ids, headers, answers) through ``symattn grade``."""
    from symattn.examples import example_text

    name, header, rows = case
    with tempfile.TemporaryDirectory() as tmp:
        problem = Path(tmp) / "problem.toml"
        problem.write_text(example_text(name), encoding="utf-8")
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(header)
        writer.writerows(rows)
        submissions = Path(tmp) / "answers.csv"
        submissions.write_text(buf.getvalue(), encoding="utf-8")
        report = Path(tmp) / "report.csv"
        status, _, _ = _cli(["grade", str(problem), str(submissions), "-o", str(report)])
        if status != 2:
            assert report.exists(), "grade exited without an error but wrote no report"


def run_claims(case: tuple[str, str, int, int]) -> None:
    """A hostile entry among claimed weights or outputs, through the facts that read claims."""
    from symattn.facts import Claims, check_facts

    which, text, i, j = case
    good = {"weights": [["0.14", "0.43", "0.43"], ["0.001", "0.909", "0.09"], ["0.007", "0.755", "0.238"]],
            "output": [["1.86", "6.32", "1.70"], ["2.00", "7.82", "0.27"], ["1.99", "7.26", "0.72"]]}
    matrix = [list(row) for row in good[which]]
    matrix[i][j] = text
    try:
        claims = Claims.from_mapping({which: matrix})
        for proof in check_facts(sa.load_example("i-love-cats"), claims,
                                 ["rows-sum-to-one", "weights-in-open-interval", "convex-hull"]):
            assert isinstance(proof.holds, bool)
    except SymattnError as exc:
        _one_line(exc)


def run_claims_file(case: tuple[str, str, int, int]) -> None:
    """A hostile entry (string or raw TOML number) in a claims file, through ``symattn facts --claims``."""
    which, entry, i, j = case
    good = {"weights": [["0.14", "0.43", "0.43"], ["0.001", "0.909", "0.09"], ["0.007", "0.755", "0.238"]],
            "output": [["1.86", "6.32", "1.70"], ["2.00", "7.82", "0.27"], ["1.99", "7.26", "0.72"]]}
    matrix = [list(row) for row in good[which]]
    matrix[i][j] = entry
    text = f"{which} = [" + ", ".join("[" + ", ".join(row) + "]" for row in matrix) + "]\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "claims.toml"
        path.write_text(text, encoding="utf-8")
        _cli(["facts", "--example", "i-love-cats", "--claims", str(path), "--json",
              "--fact", "rows-sum-to-one", "--fact", "weights-in-open-interval", "--fact", "convex-hull"])


def run_figures(case: tuple[str, str, str]) -> None:
    """A hostile figure beside a good one in a figures file, through ``symattn check --json``:
    the good figure must still be judged."""
    import json

    name, target, text = case
    figures = (f"example = {json.dumps(name)}\n\n"
               f"[[figure]]\ntarget = \"weights[I, I]\"\ntext = \"0.136\"\n\n"
               f"[[figure]]\ntarget = {json.dumps(target)}\ntext = {json.dumps(text)}\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "figures.toml"
        path.write_text(figures, encoding="utf-8")
        status, out, _ = _cli(["check", str(path), "--json"])
        assert status != 2, "one hostile figure made the whole figures file invalid"
        assert "weights[I, I]" in out, "the good figure was not judged"


def run_probe(case: str) -> None:
    """Not an API: misbehaves on purpose, so a test can show the worker reports each failure kind."""
    import os

    if case == "raise":
        raise ValueError("a probe")
    if case == "multiline":
        raise SymattnError("two\nlines")
    if case == "signal":
        os.kill(os.getpid(), signal.SIGFPE)
    if case == "memory":
        bytearray(2 * GIB)
    if case == "hang":
        time.sleep(3600)


RUNNERS = {"problem": run_problem, "toml": run_toml, "answer": run_answer,
           "target": run_target, "grade": run_grade, "claims": run_claims,
           "claims-file": run_claims_file, "figures": run_figures}
_PROBE = {"probe": run_probe}

DIGITS = st.sampled_from([1, 2, 3, 3, 3, 6, 20, 60, 401, 1000])
CASES = {
    "problem": st.tuples(SLOTS.filter(lambda s: s != "X"), EXPRESSIONS, DIGITS),
    "toml": st.tuples(st.sampled_from(["Q", "K", "V", "scale"]), _toml_entry(),
                      st.sampled_from(["text", "json", "latex"]), DIGITS),
    "answer": st.one_of(          # answers of the target's shape (so they are read and judged) or any
        st.tuples(st.sampled_from(PROBLEMS), st.sampled_from(SCALAR_TARGETS), EXPRESSIONS),
        st.tuples(st.sampled_from(PROBLEMS), st.sampled_from(ROW_TARGETS),
                  st.builds(", ".join, st.lists(_UNSPACED, min_size=3, max_size=3))),
        st.tuples(st.sampled_from(PROBLEMS), st.just("weights"),
                  st.builds(lambda xs: "[" + "\n ".join("[" + "  ".join(xs[3 * r:3 * r + 3]) + "]"
                                                        for r in range(3)) + "]",
                            st.lists(_UNSPACED, min_size=9, max_size=9))),
        st.tuples(st.sampled_from(PROBLEMS), st.sampled_from(GOOD_TARGETS), ANSWERS)),
    "target": st.tuples(st.sampled_from(PROBLEMS), TARGETS,
                        st.sampled_from(["0.136", "1", "0", "-inf", "1.73"])),
    "grade": st.builds(
        lambda name, targets, ids, cells: (
            name, ["student", *targets],
            [[sid, *[cells[(r + c) % len(cells)] for c in range(len(targets))]]
             for r, sid in enumerate(ids)]),
        st.sampled_from(PROBLEMS),
        st.lists(st.one_of(st.sampled_from(GOOD_TARGETS), TARGETS), min_size=1, max_size=3),
        st.lists(st.one_of(st.sampled_from(["s1", "=cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3", ""]),
                           EXPRESSIONS), min_size=1, max_size=4),
        st.lists(ANSWERS, min_size=1, max_size=4)),
    "figures": st.one_of(
        st.tuples(st.sampled_from(PROBLEMS), st.sampled_from(GOOD_TARGETS), ANSWERS),
        st.tuples(st.sampled_from(PROBLEMS), TARGETS, st.sampled_from(["0.136", "1", "-inf"]))),
    "claims": st.tuples(st.sampled_from(["weights", "output"]), EXPRESSIONS,
                        st.integers(0, 2), st.integers(0, 2)),
    "claims-file": st.tuples(st.sampled_from(["weights", "output"]), _toml_entry(),
                             st.integers(0, 2), st.integers(0, 2)),
}


# ---------------------------------------------------------------- the CI budget

@pytest.fixture(scope="module")
def capped_worker():
    work = Worker(GIB, warm=False)     # no timing here, so no warm-up
    yield work
    work.stop()


def test_the_worker_reports_every_kind_of_failure(capped_worker):
    """The harness itself: a test that cannot fail is a defect."""
    assert capped_worker.run("probe", "fine", HANG_GUARD)[0] == "ok"
    # only the hang waits out a short limit: the others end at once, but a case run after the
    # signal case first restarts the worker (importing symattn), which takes seconds on a loaded machine
    kinds = {case: capped_worker.run("probe", case, 2 if case == "hang" else HANG_GUARD)[0:2]
             for case in ("raise", "multiline", "signal", "memory", "hang")}
    assert kinds == {"raise": ("exception:ValueError", "ValueError"),
                     "multiline": ("contract", "SymattnError"),
                     "signal": ("signal:SIGFPE", None), "memory": ("memory", "MemoryError"),
                     "hang": ("hang", None)}
    assert capped_worker.run("answer", ("i-love-cats", "weights[I, I]", "0.136"), HANG_GUARD)[0] == "ok"


CI = settings(max_examples=30, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate],        # no shrinking: a hang is not re-run
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.large_base_example, HealthCheck.filter_too_much])


def _assert_fine(work: Worker, api: str, case) -> None:
    kind, etype, message, tail, seconds, peak = work.run(api, case, HANG_GUARD)
    assert kind == "ok", (f"{api} {kind} {etype or ''}: {message}\ninput: {repr(case)[:600]}"
                          f"\n{tail}")


@pytest.mark.parametrize("api", list(RUNNERS))
def test_hostile_input_ends_in_a_result_or_one_line(api, capped_worker):
    @CI
    @given(case=CASES[api])
    def run(case):
        _assert_fine(capped_worker, api, case)

    run()


@pytest.mark.parametrize("text", NAMED, ids=range(len(NAMED)))
def test_the_named_hostile_inputs_as_answers(text, capped_worker):
    """Every input the issues name, as an answer to a weight of the lesson and of its causal variant."""
    for name in PROBLEMS:
        _assert_fine(capped_worker, "answer", (name, "weights[cats]", text))


@pytest.mark.parametrize("text", NAMED, ids=range(len(NAMED)))
def test_the_named_hostile_inputs_as_problem_entries(text, capped_worker):
    """Every input the issues name, as a Q and K entry and as the scale, through every view."""
    for slot in ("QK", "scale"):
        _assert_fine(capped_worker, "problem", (slot, text, 3))


#: Inputs the large budget found (benchmarks/fuzz_caps.py), kept as regressions.
FOUND = [
    ("claims", ("weights", "log(1e-147)/3^-102 + 3^-102", 0, 1)),          # rows-sum-to-one: > 5 min in simplify
    ("claims", ("weights", "log(1e-147)/3^-102 + 3^-102 + 1e-147", 1, 1)),
    ("claims", ("output", "1+1+1+2^-99", 0, 2)),                            # 1.9 s
    ("toml", ("scale", '"log(30)*√(1000000000000)"', "text", 1)),           # ValueError: int->str 4300
    ("toml", ("scale", '"log(1000000000000)*√(1000000000000)"', "text", 1)),  # past 10 s
]


@pytest.mark.parametrize("api,case", FOUND, ids=[f"{a}-{i}" for i, (a, _) in enumerate(FOUND)])
def test_inputs_the_large_budget_found(api, case, capped_worker):
    _assert_fine(capped_worker, api, case)


# ---------------------------------------------------------------- the capped worker

def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


def _where(exc: BaseException) -> str:
    """The last symattn frames of a traceback and the frame that raised: enough to route it."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/symattn/" in f.filename and "/tests/" not in f.filename][-3:]
    shown = ours + ([frames[-1]] if frames and frames[-1] not in ours else [])
    return "".join(traceback.format_list(shown))[-1500:] + f"{type(exc).__name__}: {str(exc)[:200]}"


def worker(memory: int) -> None:
    """Read (api, case) pairs from stdin, run each, answer with its outcome."""
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr            # runners print nothing, but keep the pipe clean
    while True:
        job = _receive(stdin)
        if job is None:
            return
        api, case = job
        start = time.perf_counter()
        kind, etype, message, tail = "ok", None, None, ""
        try:
            (RUNNERS.get(api) or _PROBE[api])(case)
        except MemoryError:
            kind, etype = "memory", "MemoryError"
        except SymattnError as exc:    # runners let these through only when they are fine
            if "\n" in str(exc):
                kind, etype, message = "contract", type(exc).__name__, str(exc)[:400]
        except AssertionError as exc:  # the runner's contract: one line, exit 0/1/2, a report
            kind, etype, message = "contract", "AssertionError", str(exc)[:400]
        except BaseException as exc:  # noqa: BLE001 - the point is to catch everything
            kind, etype, message = "exception:" + type(exc).__name__, type(exc).__name__, str(exc)[:400]
            tail = _where(exc)
        elapsed = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        _send(stdout, (kind, etype, message, tail, elapsed, peak))


WARM_UP = [("problem", ("Q", "1", 3)), ("toml", ("Q", "1", "json", 3)),
           ("answer", ("i-love-cats", "weights[I]", "0.136, 0.432, 0.432")),
           ("answer", ("i-love-cats-causal", "weights[I]", "1, 0, 0")),
           ("grade", ("i-love-cats", ["student", "weights[I, I]"], [["s", "0.136"]])),
           ("claims", ("weights", "0.14", 0, 0)), ("claims-file", ("weights", "0.14", 0, 0)),
           ("figures", ("i-love-cats", "weights[I]", "0.136, 0.432, 0.432")),
           ("target", ("i-love-cats", "sqrt(d_k)", "1.73"))]


class Worker:
    """One worker process; restarted after a hang or a death."""

    def __init__(self, memory: int, warm: bool = True) -> None:
        self.memory, self.warm = memory, warm
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """A fresh worker, warmed up (imports, the examples' checkers) so that
        the first real input is timed like every other."""
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(self.memory)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=str(Path(__file__).parent.parent))
        for api, case in WARM_UP if self.warm else ():
            _send(self.proc.stdin, (api, case))
            if _receive(self.proc.stdout) is None:
                raise RuntimeError("the fuzz worker died while warming up")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self.proc = None

    def run(self, api: str, case, timeout: float) -> tuple:
        """(kind, type, message, traceback, seconds, peak bytes) of one input."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        start = time.perf_counter()
        try:
            _send(self.proc.stdin, (api, case))
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.stop()
            return ("hang", None, f"killed after {timeout} s", "", time.perf_counter() - start, 0)
        answer = _receive(self.proc.stdout)
        if answer is None:
            code = self.proc.wait()
            self.proc = None
            name = signal.Signals(-code).name if code < 0 else f"exit {code}"
            return (f"signal:{name}", None, f"worker died ({name})", "", time.perf_counter() - start, 0)
        return answer



if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(int(sys.argv[2]))
