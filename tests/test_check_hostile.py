"""Student text is hostile input: read by symattn's own parser, capped, never executed."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symattn as sa
from symattn.check import Checker, read_figure
from symattn.check.grading.grade import Versions, grade
from symattn.errors import SymattnError

CORPUS = [
    # code injection
    "__import__('os').system('echo pwned')", "eval('1')", "exec('import os')", "lambda: 1",
    "open('/etc/passwd').read()", "().__class__.__bases__[0].__subclasses__()", "${jndi:ldap://x}",
    "'; DROP TABLE students; --", "{{7*7}}", "os.system", "sympify('1')", "Symbol('x')",
    "globals()", "1; import os", "`id`", "$(id)",
    # huge numbers and exponents
    "9^9^9^9", "10^10^10", "((9^9)^9999)^9999", "2**2**2**2**2**2", "1e999999999",
    "1e-999999999", "e^(10^10)", "exp(exp(exp(10)))", "10^(10^5)", "(10^4000)^(10^4000)",
    "9" * 5001, "0." + "1" * 6000, "1" * 100_000, "1/0", "0^-1", "sqrt(-1)", "log(0)",
    "nan", "inf", "-inf", "Infinity", "1e", ".", "-", "e^", "√", "%", "12%%", "1.2.3",
    # deep nesting and long text
    "(" * 10_000 + "1" + ")" * 10_000, "[" * 1000 + "1" + "]" * 1000, "√" * 5000 + "2",
    "-" * 100_000 + "1", "exp(" * 200 + "1" + ")" * 200, ", ".join(["1"] * 100_000),
    "[" + "; ".join(["1 2 3"] * 30_000) + "]", "x" * 2_000_000,
    # bytes and odd characters
    "0.1\x00", "\x00", "0.13\udcff6", "\ufffd", "１２３", "0.136\u202e", "🙂", "0,136",
    "\n\n\n", "   ", "", "[]", "[[]]", "[,]", ",", ";", "[1, 2], [3]",
]


@pytest.fixture(scope="module")
def lesson():
    return Checker(sa.load_example("i-love-cats"))


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_hostile_text_gives_a_verdict_quickly_and_runs_nothing(lesson, text, capfd):
    start = time.perf_counter()
    for target in ("weights[I, I]", "weights[I]", "weights"):
        verdict = lesson.check(target, text)
        assert verdict.code in ("invalid", "wrong", "mistake", "last-digit", "rounded", "exact")
        assert "\n" not in verdict.message
    assert time.perf_counter() - start < 20     # a hang guard, not a benchmark
    out, err = capfd.readouterr()
    assert "pwned" not in out and "pwned" not in err


def test_injection_is_invalid_not_evaluated(lesson):
    v = lesson.check("weights[I, I]", "__import__('os').system('echo pwned')")
    assert v.code == "invalid" and "quotes are not allowed" in v.message
    v = lesson.check("weights[I, I]", "exec(1)")
    assert v.code == "invalid" and "unknown function 'exec'" in v.message


def test_huge_exponents_are_refused_by_the_caps(lesson):
    for text in ("9^9^9^9", "10^10^10", "((9^9)^9999)^9999"):
        v = lesson.check("weights[I, I]", text)
        assert v.code == "invalid" and ("cap" in v.message or "MAX_" in v.message)


def test_hostile_targets_are_invalid(lesson):
    for target in ("__import__('os')", "weights[" * 500, "weights[I, I, I]", "exec(weights)",
                   "weights[I]" * 300, "sum(" * 200 + "weights" + ")" * 200):
        assert lesson.check(target, "0.136").code == "invalid"


def test_a_class_of_hostile_answers_is_graded_cell_by_cell():
    rows = ["student,weights[I],sqrt(d_k)"]
    for k, text in enumerate(CORPUS[:60]):
        cell = text.replace('"', '""')[:5000]
        rows.append(f's{k},"{cell}",1.73')
    report = grade(Versions(single=sa.load_example("i-love-cats")), "\n".join(rows) + "\n")
    assert len(report.rows) >= 55
    assert all(r.verdicts[-1].code == "rounded" for r in report.rows if not r.note)


FIGURE_CHARS = "0123456789.,;[] \neE+-*/^()√π%≈~−·sqrtexpliand_k=rg"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=FIGURE_CHARS, max_size=60))
def test_fuzz_figure_parser_only_raises_its_own_errors(text):
    try:
        written = read_figure(text)
    except SymattnError as exc:
        assert "\n" not in str(exc)
    else:
        assert written.entries


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_fuzz_any_unicode(text):
    try:
        read_figure(text)
    except SymattnError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=FIGURE_CHARS, max_size=30))
def test_fuzz_check_always_gives_a_verdict(lesson, text):
    v = lesson.check("weights[I]", text)
    assert v.code in ("invalid", "wrong", "mistake", "last-digit", "rounded", "exact")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="weightsoucrdI[], ()^*+-/0123456789", max_size=30))
def test_fuzz_targets(lesson, text):
    v = lesson.check(text, "0.1")
    assert v.code in ("invalid", "wrong", "mistake", "last-digit", "rounded", "exact")


ISSUE9_ANSWERS = ["√" * 64 + "2", "2." + "0" * 450 + "e0", "(7^(1/4914))^(1/9441)^(1/4806)",
                  "10^2200", "1e-9999"]


@pytest.mark.parametrize("text", ISSUE9_ANSWERS, ids=range(len(ISSUE9_ANSWERS)))
def test_issue9_answers_are_judged_alone(lesson, text):
    """Each hostile answer gets a verdict of its own (invalid with a one-line reason once the
    parser caps refuse it); a right answer checked next is still right."""
    v = lesson.check("weights[I, I]", text)
    assert v.code in ("invalid", "wrong", "mistake")   # 2.000… is scores[I, I] = 2: wrong-step
    assert "\n" not in v.message and len(v.message) < 1000
    assert lesson.check("weights[I, I]", "0.136").code == "rounded"


@pytest.mark.parametrize("target, words", [
    ("d_k^9999", "over 1,000 digits"),                    # 3^9999: 15,849 bits
    ("weights[I, I] * d_k^9999", "over 1,000 digits"),
    ("exp(9999)", "beyond 10^1,000"),                 # e^9999 ≈ 10^4342
    ("sum(exp(600 * scores[love]))", "beyond 10^1,000"),   # e^9600
])
def test_targets_beyond_the_size_cap_are_invalid(lesson, target, words):
    v = lesson.check(target, "1")
    assert v.code == "invalid" and words in v.message, v.message
    assert "\n" not in v.message


def test_a_target_just_inside_the_cap_is_judged(lesson):
    # 3^2000 has 954 digits (3,170 bits): under both caps, checked exactly
    v = lesson.check("d_k^2000", "3^2000")
    assert v.code == "exact"
    assert lesson.check("d_k^2000", "3^1999").code == "wrong"
