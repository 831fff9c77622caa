"""The backward-pass facts (issue 20, scope 4) against independent numpy float64 computations."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import sympy

import symattn as sa
from symattn import facts
from symattn.cli import main
from symattn.facts.backward_checks import Verdict as _Verdict
from symattn.facts.backward_facts import BACKWARD_FACTS
from symattn.problem.problem import Problem

np = pytest.importorskip("numpy")

Q3 = [["1", "0", "2"], ["0", "1", "1/2"], ["2", "-1", "0"]]
K3 = [["0", "1", "1"], ["1", "1", "0"], ["1/2", "0", "1"]]
V3 = [["1", "2", "0"], ["0", "1", "3"], ["2", "-1", "1"]]
G3 = [[1, 0, -1], [0, 2, 0], [1, 1, 1]]
TOML = ('Q = [[1, 0, 2], [0, 1, 0.5], [2, -1, 0]]\nK = [[0, 1, 1], [1, 1, 0], [0.5, 0, 1]]\n'
        'V = [[1, 2, 0], [0, 1, 3], [2, -1, 1]]\nbackward = { grad_output = [[1, 0, -1], [0, 2, 0], [1, 1, 1]] }\n')


def _f(rows):
    return np.array([[float(Fraction(x)) for x in row] for row in rows])


def _numpy(Q, K, V, G, sink=None):
    """Attention and its gradient in float64, written here (the familiar formulas)."""
    S = Q @ K.T / np.sqrt(Q.shape[1])
    top = S.max(axis=1, keepdims=True) if sink is None else np.maximum(S.max(axis=1, keepdims=True), sink)
    E = np.exp(S - top)
    Z = E.sum(axis=1, keepdims=True) + (0 if sink is None else np.exp(sink - top))
    P = E / Z
    O = P @ V  # noqa: E741
    dP = G @ V.T
    D = (P * dP).sum(axis=1, keepdims=True)
    dS = P * (dP - D)
    return dict(P=P, O=O, dP=dP, D=D, dS=dS, dQ=dS / np.sqrt(Q.shape[1]) @ K, dV=P.T @ G,
                p_sink=1 - P.sum(axis=1))


@pytest.fixture(scope="module")
def plain():
    return sa.attend(Problem(Q=Q3, K=K3, V=V3, backward={"grad_output": G3}))


def test_every_backward_fact_holds_on_a_backward_problem_with_exact_checks(plain, monkeypatch):
    from symattn.facts import backward_checks, backward_gradient_facts

    # the exact tests have a budget (a count of tests, then balls): with no limit every check is exact
    monkeypatch.setattr(backward_checks, "EXACT_BUDGET", 10 ** 6)
    monkeypatch.setattr(backward_gradient_facts, "GRADIENT_BUDGET", 10 ** 6)
    for name in BACKWARD_FACTS:
        proof = facts.prove(name, plain)
        assert proof.holds is True, name
        assert proof.general and proof.checks, name
        assert name in proof.text() and proof.to_json()["holds"] is True
    # the identities are exact on this problem (sums of exponentials: Lindemann–Weierstrass)
    for name in ("d-logits-rows-sum-to-zero", "d-V-column-sums", "d-Q-K-inner-products", "row-dot-is-dO-dot-O",
                 "gradient-is-sympy-derivative"):
        assert all("balls" not in line.text for line in facts.prove(name, plain).checks), name


def test_the_identities_hold_in_numpy_too(plain):
    """What the facts state, recomputed independently in float64."""
    r = _numpy(_f(Q3), _f(K3), _f(V3), np.array(G3, dtype=float))
    assert np.allclose(r["dS"].sum(axis=1), 0, atol=1e-15)
    assert np.allclose(r["dV"].sum(axis=0), np.array(G3).sum(axis=0), atol=1e-14)
    assert np.allclose(r["D"][:, 0], (np.array(G3) * r["O"]).sum(axis=1), atol=1e-14)
    got = np.array([[float(sympy.N(e, 20)) for e in row] for row in plain.step("d_Q").rows()])
    assert np.allclose(got, r["dQ"], rtol=1e-13)


def test_with_a_sink_the_row_sums_are_p_sink_times_D_and_the_column_sums_are_weighted():
    trace = sa.attend(Problem(Q=Q3, K=K3, V=V3, sink="1/2", backward={"grad_output": G3}))
    rows = facts.prove("d-logits-rows-sum-to-zero", trace)
    cols = facts.prove("d-V-column-sums", trace)
    assert rows.holds and cols.holds
    assert all("p_sink,i·D_i (exactly)" in line.text for line in rows.checks)
    assert "not those of dO" in cols.checks[0].text
    r = _numpy(_f(Q3), _f(K3), _f(V3), np.array(G3, dtype=float), sink=0.5)
    # what the fact states, in float64: the rows sum to p_sink·D (not 0), and d_sink is minus their sum
    assert np.allclose(r["dS"].sum(axis=1), r["p_sink"] * r["D"][:, 0], rtol=1e-12)
    assert np.all(np.abs(r["dS"].sum(axis=1)) > 1e-3)
    d_sink = float(sympy.N(trace.step("d_sink")[0, 0], 20))
    assert d_sink == pytest.approx(-(r["p_sink"] * r["D"][:, 0]).sum(), rel=1e-12)
    assert np.allclose(r["dV"].sum(axis=0), ((1 - r["p_sink"])[:, None] * np.array(G3)).sum(axis=0), rtol=1e-12)


def test_finite_difference_errors_are_those_numpy_measures(plain):
    proof = facts.prove("finite-difference-converges", plain)
    fd = proof.to_json()["finite_differences"]
    assert fd["entry"] == "Q[1, 1]"
    errors = {row["h"]: row for row in fd["errors"]}
    assert list(errors) == [f"1e-{k}" for k in range(1, 8)]
    Q, K, V, G = _f(Q3), _f(K3), _f(V3), np.array(G3, dtype=float)
    exact = _numpy(Q, K, V, G)["dQ"][1, 1]

    def loss(q, dtype):
        Qd, Kd, Vd, Gd = (m.astype(dtype) for m in (q, K, V, G))
        S = Qd @ Kd.T / dtype(np.sqrt(3))
        E = np.exp(S - S.max(axis=1, keepdims=True))
        return (Gd * ((E / E.sum(axis=1, keepdims=True)) @ Vd)).sum()

    for k, dtype in ((1, np.float64), (3, np.float64), (7, np.float64), (1, np.float32), (5, np.float32)):
        h = 10.0 ** -k
        up, down = Q.copy(), Q.copy()
        up[1, 1] += h
        down[1, 1] -= h
        if dtype is np.float32:    # as the fact does: the float32 input, then ± the float32 step
            up, down = Q.astype(np.float32), Q.astype(np.float32)
            up[1, 1] += np.float32(h)
            down[1, 1] -= np.float32(h)
        mine = (loss(up, dtype) - loss(down, dtype)) / (dtype(2) * dtype(h))
        bound = float(errors[f"1e-{k}"][dtype.__name__])
        if k == 1:    # truncation dominates: the certified bound is the error, to 2 digits
            assert abs(float(mine) - exact) == pytest.approx(bound, rel=0.05)
        else:         # rounding: the order of magnitude (summation order differs)
            assert bound < 1e-7 if dtype is np.float64 else bound > 1e-5
    # exact arithmetic falls as h² (a decade of h is two decades of error)
    exact_errors = [float(row["exact"]) for row in fd["errors"]]
    for a, b in zip(exact_errors, exact_errors[1:]):
        assert 80 < a / b < 120
    assert float(errors["1e-7"]["float32"]) > 1e4 * float(errors["1e-7"]["float64"])


def test_a_problem_without_backward_says_so_and_facts_are_fast():
    lesson = sa.attend(sa.load_example("i-love-cats"))
    for name in BACKWARD_FACTS:
        proof = facts.prove(name, lesson)
        assert proof.holds and "no backward key" in proof.checks[0].text
    proofs = facts.check_facts(Problem(Q=Q3, K=K3, V=V3, backward={"grad_output": G3}), names=list(BACKWARD_FACTS))
    assert all(p.holds for p in proofs)      # (its speed is measured in benchmarks/bench_facts.py, not here)


def test_the_exact_budget_is_a_count_so_a_check_reads_the_same_under_any_load(monkeypatch):
    """The budget counts exact zero tests, not seconds: two runs give the same words, and a budget
    of 0 leaves a hard difference (a zero only an exact test sees) to its certified ball."""
    from symattn.facts import backward_checks

    problem = Problem(Q=Q3, K=K3, V=V3, backward={"grad_output": G3})
    first = [line.text for p in facts.check_facts(problem, names=list(BACKWARD_FACTS)) for line in p.checks]
    again = [line.text for p in facts.check_facts(problem, names=list(BACKWARD_FACTS)) for line in p.checks]
    assert first == again
    hard = sympy.cos(1) ** 2 + sympy.sin(1) ** 2 - 1
    exact, by_ball = _Verdict(1), _Verdict(0)
    assert exact.zero(hard, "x") and exact.exact == 1 and exact.by_balls == 0
    assert by_ball.zero(hard, "x") and by_ball.exact == 0 and by_ball.by_balls == 1
    monkeypatch.setattr(backward_checks, "EXACT_BUDGET", 0)
    assert _Verdict().tests_left == 0


def test_the_sympy_derivative_is_refused_above_the_cap():
    big = [[str((i * 3 + c) % 5 - 2) for c in range(2)] for i in range(5)]
    trace = sa.attend(Problem(Q=big, K=big, V=big, backward={"loss": "sum"}))
    for name in ("gradient-is-sympy-derivative", "finite-difference-converges"):
        proof = facts.prove(name, trace)
        assert "too large" in proof.checks[0].text and "5 queries" in proof.checks[0].text


def test_a_nonzero_difference_fails_and_a_ball_check_is_worded_as_one():
    v = _Verdict()
    assert v.zero(sympy.exp(1) - sympy.Rational(2718281828, 10 ** 9), "x") is False
    assert not v.ok and "FAILS at x" in v.how()
    w = _Verdict()
    assert w.zero(sympy.cos(1) ** 2 + sympy.sin(1) ** 2 - 1 + sympy.exp(1) - sympy.exp(1), "y")
    assert w.ok
    trace = sa.attend(Problem(Q=[["1", "0"], ["0", "1"]], K=[["1", "1"], ["0", "1"]], V=[["1", "2"], ["3", "4"]],
                              rope={"theta": ["1/2"]}, backward={"loss": "sum"}))
    proof = facts.prove("row-dot-is-dO-dot-O", trace)
    assert proof.holds and all("not an exact proof of 0" in line.text for line in proof.checks)


@pytest.mark.parametrize("fmt", ["text", "latex", "html", "json"])
def test_the_facts_print_in_every_format(tmp_path, capsys, fmt):
    path = tmp_path / "backward.toml"
    path.write_text(TOML)
    args = ["facts", str(path), "--fact", "d-logits-rows-sum-to-zero", "--fact", "finite-difference-converges"]
    assert main(args + ([] if fmt == "text" else ["--format", fmt])) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        data = json.loads(out)
        assert [d["fact"] for d in data] == ["d-logits-rows-sum-to-zero", "finite-difference-converges"]
        assert data[1]["finite_differences"]["errors"][0]["h"] == "1e-1"
    else:
        assert "finite" in out and ("float32" in out)
        assert "holds" in out


def test_the_formal_test_is_asked_only_when_chosen_and_without_cosines_and_sines(monkeypatch):
    """The formal zero test decides a gradient entry's sum of exponentials cheaply; with RoPE's cos
    and sin inside the exponents it can take a minute on one entry and still miss cos² + sin² = 1,
    and on the identities' larger sums with surds it is slower than Lindemann–Weierstrass."""
    from symattn.facts import backward_checks

    asked = []
    real = backward_checks.formally_zero
    monkeypatch.setattr(backward_checks, "formally_zero", lambda d: asked.append(d) or real(d))
    e = sympy.exp(sympy.sqrt(3) / 3)
    assert _Verdict(1).zero(e / (e + 1) - 1 + 1 / (e + 1), "w") and not asked     # not chosen
    v = _Verdict(2, formal=True)
    assert v.zero(e / (e + 1) - 1 + 1 / (e + 1), "x") and v.exact == 1 and len(asked) == 1
    assert v.zero(sympy.cos(1) ** 2 + sympy.sin(1) ** 2 - 1 + e - e * 1, "y") and v.exact == 2
    assert len(asked) == 1         # the cos/sin zero went to the trigonometric test, not the formal one
