"""Checking masked problems: blocked weights written 0, masked scores written −∞.

Every expected figure here comes from an independent reference (Fractions for
the exact part, mpmath at 50 digits for the rest, rounded half away from zero
with the decimal module), never from symattn's own numbers.
"""

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import mpmath
import pytest

import symattn as sa
from symattn.check import Checker, read_figures
from symattn.check.grading.carry import carry_forward
from symattn.check.grading.grade import Versions, grade
from symattn.cli import main

X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_Q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_K = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_V = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
CAUSAL = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
NEG_INF = "-inf"


def _mul(A, B):
    return [[sum(Fraction(a) * Fraction(b) for a, b in zip(row, col)) for col in zip(*B)]
            for row in A]


def reference(Q, K, V, mask, scale):
    """Every step of masked attention, independently: {step: rows of mpf or NEG_INF}."""
    mpmath.mp.dps = 50
    scores = _mul(Q, list(zip(*K)))
    scaled = [[mpmath.mpf(s.numerator) / s.denominator * scale for s in row] for row in scores]
    masked = [[x if mask[i][j] else NEG_INF for j, x in enumerate(row)]
              for i, row in enumerate(scaled)]
    shifted, exp, weights, output = [], [], [], []
    for row in masked:
        top = max(x for x in row if x != NEG_INF)
        sh = [NEG_INF if x == NEG_INF else x - top for x in row]
        ex = [mpmath.mpf(0) if x == NEG_INF else mpmath.exp(x) for x in sh]
        total = sum(ex)
        w = [x / total for x in ex]
        shifted.append(sh)
        exp.append(ex)
        weights.append(w)
        output.append([sum(w[k] * V[k][c] for k in range(len(V))) for c in range(len(V[0]))])
    return {"scores": [[mpmath.mpf(s.numerator) / s.denominator for s in r] for r in scores],
            "scaled": scaled, "masked": masked, "shifted": shifted, "exp": exp,
            "weights": weights, "output": output}


def fmt(x, places: int = 2) -> str:
    """x rounded half away from zero to ``places`` (numbers here are far from ties)."""
    if x == NEG_INF:
        return "-inf"
    d = Decimal(mpmath.nstr(x, 45, min_fixed=-50, max_fixed=50))
    return str(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


@pytest.fixture(scope="module")
def causal():
    return Checker(sa.load_example("i-love-cats-causal"))


@pytest.fixture(scope="module")
def causal_ref():
    Q, K, V = _mul(X, W_Q), _mul(X, W_K), _mul(X, W_V)
    V = [[int(v) for v in row] for row in V]
    return reference(Q, K, V, CAUSAL, 1 / mpmath.sqrt(3))


def test_the_reproducer_blocked_weights_written_0(causal):
    v = causal.check("weights[I]", "1, 0, 0")
    assert v.code == "exact" and v.right
    assert [e.code for e in v.entries] == ["exact"] * 3
    assert causal.check("weights[I, love]", "0.00").code == "exact"
    assert causal.check("weights[love, cats]", "0").code == "exact"


def test_the_reproducer_through_the_cli(tmp_path, capsys):
    path = tmp_path / "causal.toml"
    path.write_text('example = "i-love-cats-causal"\n[[figure]]\ntarget = "weights[I]"\n'
                    'text = "1, 0, 0"\n', encoding="utf-8")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "exact" in out and "1 figure: 1 right" in out


@pytest.mark.parametrize("step", ["scores", "scaled", "masked", "shifted", "exp", "weights",
                                  "output"])
@pytest.mark.parametrize("spell", ["-inf", "−∞", "-oo"])
def test_every_step_of_the_causal_example_right_as_written(causal, causal_ref, step, spell):
    rows = causal_ref[step]
    text = "[" + ", ".join("[" + ", ".join(fmt(x) for x in row) + "]" for row in rows) + "]"
    text = text.replace("-inf", spell)
    v = causal.check(step, text)
    assert v.right, (step, text, v.message)
    if step in ("masked", "shifted"):
        blocked = [e for e in v.entries if e.expected == "-inf"]
        assert len(blocked) == 3 and all(e.code == "exact" for e in blocked)
        assert all(e.exact == "-oo" and e.written == spell.replace("−", "-") for e in blocked)


def test_a_number_where_minus_infinity_belongs_is_wrong(causal, causal_ref):
    for step in ("masked", "shifted"):
        for written in ("0", "-1000", "0.00", "-9.99e99", "2/√3"):
            v = causal.check(f"{step}[I, love]", written)
            assert not v.right and v.code in ("wrong", "mistake"), (step, written, v.message)
            assert v.entries[0].expected == "-inf"
    row = fmt(causal_ref["masked"][0][0])
    assert row == "1.15"
    v = causal.check("masked[I]", f"{row}, 0, 0")
    assert v.code == "wrong" and "masked, so it is −∞" in v.message
    assert [e.code for e in v.entries] == ["rounded", "wrong", "wrong"]


def test_minus_infinity_where_a_number_belongs_is_wrong(causal):
    for target in ("masked[I, I]", "shifted[cats, love]", "scaled[I, love]", "scores[I, cats]",
                   "weights[I, love]", "exp[love, cats]", "output[I, 0]"):
        for spell in ("-inf", "−∞", "-oo", "inf", "+∞"):
            v = causal.check(target, spell)
            assert not v.right, (target, spell, v.message)
    # +∞ is wrong even where the value is −∞
    assert causal.check("masked[I, love]", "inf").code == "wrong"
    assert causal.check("masked[I, love]", "∞").code == "wrong"


def test_expression_targets_use_e_to_the_minus_infinity_is_0(causal, causal_ref):
    assert causal.check("exp(shifted[I])", "1, 0, 0").code == "exact"
    assert causal.check("e^shifted[I]", "1, 0, 0").code == "exact"
    assert causal.check("sum(exp(shifted[I]))", "1").code == "exact"
    total = sum(causal_ref["exp"][1])
    assert causal.check("sum(exp(shifted[love]))", fmt(total, 4)).right
    assert causal.check("rowsum(weights)", "[1, 1, 1]").right
    assert causal.check("masked[I] - 1", "0.15, -inf, -inf").right
    for undefined in ("masked[I] - masked[I]", "0 * masked[I]", "-masked[I]", "sqrt(masked[I])",
                      "1 / masked[I]", "masked[I]^2"):
        v = causal.check(undefined, "0, 0, 0")
        assert v.code == "invalid" and "masked" in v.message and "\n" not in v.message


def test_a_0_1_mask_matrix_problem():
    Q = [[1, 0], [0, 1], [1, 1]]
    K = [[1, 2], [0, 1], [3, 0]]
    V = [[1, 0], [0, 1], [2, 3]]
    mask = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]
    c = Checker(sa.Problem(Q=Q, K=K, V=V, mask=mask, scale="1/2"))
    ref = reference(Q, K, V, mask, mpmath.mpf(1) / 2)
    for step in ("scores", "scaled", "masked", "shifted", "exp", "weights", "output"):
        rows = ref[step]
        text = "; ".join(", ".join(fmt(x, 3) for x in row) for row in rows)
        v = c.check(step, text)
        assert v.right, (step, text, v.message)
    # the blocked weight of row 0 is exactly 0; its masked score exactly −∞
    assert c.check("weights[0, 1]", "0").code == "exact"
    assert c.check("masked[1, 0]", "−∞").code == "exact"
    assert [fmt(x) for x in ref["shifted"][2]] == ["0.00", "-1.00", "-inf"]
    assert c.check("shifted[2]", "0, -1, -inf").code == "exact"
    # a row of the weights written with a blocked weight non-zero is wrong
    w = ref["weights"][0]
    assert c.check("weights[0]", f"{fmt(w[0], 2)}, 0.01, {fmt(w[2], 2)}").code != "rounded"


def test_grading_a_causal_class_and_carrying_a_slip_forward():
    """The Checker API the grade side calls works on masked problems (D owns grade itself)."""
    ref_v = [[int(v) for v in row] for row in _mul(X, W_V)]
    ref = reference(_mul(X, W_Q), _mul(X, W_K), ref_v, CAUSAL, 1 / mpmath.sqrt(3))
    sh = ", ".join(fmt(x) for x in ref["shifted"][1])
    w = ", ".join(fmt(x, 3) for x in ref["weights"][1])
    assert (sh, w) == ("-6.93, 0.00, -inf", "0.001, 0.999, 0.000")
    # bob's slip in the shifted row (-6.39), carried correctly to his weights: e^−6.39 ≈ 0.00168
    mpmath.mp.dps = 30
    own = mpmath.exp(mpmath.mpf("-6.39"))
    assert fmt(own / (own + 1), 3) == "0.002"
    csv = ("student,shifted[love],weights[love]\n"
           f'ann,"{sh}","{w}"\n'
           'bob,"-6.39, 0, −∞","0.002, 0.998, 0"\n'
           'cy,"-6.93, 0, 0","1, 0, 0"\n')
    report = grade(Versions(single=sa.load_example("i-love-cats-causal")), csv)
    codes = {r.student: [v.code for v in r.verdicts] for r in report.rows}
    assert codes["ann"] == ["rounded", "rounded"]
    assert codes["bob"][0] == "wrong"
    assert report.rows[1].verdicts[1].mistake == "carried-forward"
    assert codes["cy"][0] == "wrong" and codes["cy"][1] not in ("rounded", "exact", "invalid")
    assert "masked" in report.to_csv()


def test_carry_forward_skips_minus_infinity_where_the_mask_allows():
    trace = sa.attend(sa.load_example("i-love-cats-causal"))
    checker = Checker(trace)
    targets = ["shifted[cats]", "weights[cats]"]
    verdicts = [checker.check(targets[0], "-inf, 0, -1.15"), checker.check(targets[1], "0, 0.76, 0.24")]
    carry_forward(trace, targets, verdicts)
    assert verdicts[1].mistake != "carried-forward"


def test_a_figures_file_of_a_masked_problem_checks_every_figure():
    text = '''
example = "i-love-cats-causal"
[[figure]]
target = "weights"
text = "[[1, 0, 0], [0.00, 1.00, 0], [0.01, 0.75, 0.24]]"
[[figure]]
target = "masked[love]"
text = "2.31, 9.24, -inf"
[[figure]]
target = "shifted[I]"
text = "0, −∞, −∞"
[[figure]]
target = "exp[I]"
text = "1, 0, 0"
[[figure]]
target = "output[I]"
text = "1, 2, 3"
'''
    verdicts = read_figures(text).check()
    assert [v.code for v in verdicts] == ["rounded", "rounded", "exact", "exact", "exact"]
