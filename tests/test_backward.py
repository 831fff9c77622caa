"""The backward pass (issue 20): every step against an independent reference.

References written for these tests: complex-step derivatives of an mpmath forward
(tests/backward_reference.py) at 60 digits for every variant, and SymPy's own derivative of
the loss, symbol by symbol, on a small problem.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import sympy

import symattn as sa
from symattn.errors import ProblemError
from symattn.problem.problem import Problem

from backward_reference import Ref, gradients

G3 = [[1, 0, -1], [0, 2, 0], [1, 1, 1]]
Q3 = [["1", "0", "2"], ["0", "1", "1/2"], ["2", "-1", "0"]]
K3 = [["0", "1", "1"], ["1", "1", "0"], ["1/2", "0", "1"]]
V3 = [["1", "2", "0"], ["0", "1", "3"], ["2", "-1", "1"]]


def _f(rows):
    return [[Fraction(x) for x in row] for row in rows]


def _close(trace, name, ref, digits):
    """symattn's certified decimals of a step agree with the reference to ``digits`` digits."""
    decimals = trace.step(name).decimals(digits)
    with mpmath.workdps(digits + 20):
        _agree(name, decimals, ref, digits)


def _agree(name, decimals, ref, digits):
    for i, row in enumerate(decimals):
        for j, d in enumerate(row):
            want = ref[i][j]
            got = mpmath.mpf(d.mantissa) * mpmath.mpf(10) ** d.exponent
            if abs(want) < mpmath.mpf(10) ** (-digits - 60):   # the reference's own noise: an exact 0
                assert got == 0, (name, i, j, str(d))
                continue
            ulp = mpmath.mpf(10) ** (mpmath.floor(mpmath.log10(abs(want))) - digits + 1)
            assert abs(got - want) <= 0.51 * ulp, (name, i, j, str(d), mpmath.nstr(want, digits + 5))


CASES = {
    "plain": (dict(Q=Q3, K=K3, V=V3, backward={"grad_output": G3}),
              Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), grad_output=G3)),
    "causal": (dict(Q=Q3, K=K3, V=V3, mask="causal", backward={"grad_output": G3}),
               Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), grad_output=G3,
                   mask=[[j <= i for j in range(3)] for i in range(3)])),
    "window-both-sides": (dict(Q=Q3, K=K3, V=V3, mask={"window": 2, "causal": False},
                               backward={"loss": "half-squared-error", "target": G3}),
                          Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), target=G3,
                              mask=[[abs(i - j) < 2 for j in range(3)] for i in range(3)])),
    "alibi": (dict(Q=Q3, K=K3, V=V3, alibi={"slope": "1/4"}, mask="causal", backward={"loss": "sum"}),
              Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), slope=Fraction(1, 4), loss_sum=True,
                  mask=[[j <= i for j in range(3)] for i in range(3)])),
    "softcap": (dict(Q=Q3, K=K3, V=V3, softcap=2, backward={"grad_output": G3}),
                Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), softcap=2, grad_output=G3)),
    "sink": (dict(Q=Q3, K=K3, V=V3, sink="1/2", backward={"grad_output": G3}),
             Ref(Q=_f(Q3), K=_f(K3), V=_f(V3), sink=Fraction(1, 2), grad_output=G3)),
    "rope": (dict(Q=[["1", "0", "2", "1"], ["0", "1", "1/2", "0"], ["2", "-1", "0", "1"]],
                  K=[["0", "1", "1", "0"], ["1", "1", "0", "2"], ["1/2", "0", "1", "1"]], V=V3,
                  rope={"layout": "interleaved", "theta": ["1/2", "1/3"]}, backward={"grad_output": G3}),
             Ref(Q=_f([["1", "0", "2", "1"], ["0", "1", "1/2", "0"], ["2", "-1", "0", "1"]]),
                 K=_f([["0", "1", "1", "0"], ["1", "1", "0", "2"], ["1/2", "0", "1", "1"]]), V=_f(V3),
                 rope_angles=lambda p, i: Fraction(p) * (Fraction(1, 2), Fraction(1, 3))[i],
                 positions=[0, 1, 2], key_positions=[0, 1, 2], grad_output=G3)),
    "projected": (dict(X=[["1", "0"], ["1/2", "1"], ["0", "2"]], W_q=[["1", "-1"], ["1/2", "1"]],
                       W_k=[["0", "1"], ["1", "1"]], W_v=[["2", "0", "1"], ["1", "1", "0"]],
                       backward={"loss": "half-squared-error", "target": G3}),
                  Ref(X=_f([["1", "0"], ["1/2", "1"], ["0", "2"]]), W_q=_f([["1", "-1"], ["1/2", "1"]]),
                      W_k=_f([["0", "1"], ["1", "1"]]), W_v=_f([["2", "0", "1"], ["1", "1", "0"]]),
                      target=G3)),
    "cross": (dict(X=[["1", "0"], ["1/2", "1"]], X_kv=[["0", "2"], ["1", "1"], ["-1", "1/2"]],
                   W_q=[["1", "-1"], ["1/2", "1"]], W_k=[["0", "1"], ["1", "1"]],
                   W_v=[["2", "0", "1"], ["1", "1", "0"]], backward={"grad_output": G3[:2]}),
              Ref(X=_f([["1", "0"], ["1/2", "1"]]), X_kv=_f([["0", "2"], ["1", "1"], ["-1", "1/2"]]),
                  W_q=_f([["1", "-1"], ["1/2", "1"]]), W_k=_f([["0", "1"], ["1", "1"]]),
                  W_v=_f([["2", "0", "1"], ["1", "1", "0"]]), grad_output=G3[:2])),
}


@pytest.fixture(scope="module")
def references():
    return {name: gradients(ref, dps=60) for name, (_, ref) in CASES.items()}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("digits", [3, 30])
def test_every_backward_step_matches_the_complex_step_reference(case, digits, references):
    keys, _ = CASES[case]
    trace = sa.attend(Problem(**keys))
    ref = references[case]
    names = [n for n in trace.step_names if n in ref]
    backward = trace.step_names[trace.step_names.index("lse"):]
    assert set(backward) <= set(ref) | {"row_dot"}, set(backward) - set(ref)
    for name in names:
        _close(trace, name, ref[name], digits)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_backward_step_to_a_thousand_digits(case):
    """The Done means' 1000 digits, for every variant and every step the reference takes."""
    keys, ref_problem = CASES[case]
    trace = sa.attend(Problem(**keys))
    ref = gradients(ref_problem, dps=1030)
    names = [n for n in trace.step_names if n in ref]
    assert {"d_Q", "d_K", "d_V", "d_scores"} <= set(names)
    with mpmath.workdps(1030):
        for name in names:
            _close(trace, name, ref[name], 1000)


def test_the_gradient_is_sympys_derivative_of_the_loss():
    """Symbol by symbol: L = Σ G∘O with the softmax written out in SymPy, differentiated."""
    q = sympy.Matrix(3, 3, lambda i, j: sympy.Symbol(f"q{i}{j}"))
    k = sympy.Matrix([[sympy.Rational(x) for x in row] for row in K3])
    v = sympy.Matrix([[sympy.Rational(x) for x in row] for row in V3])
    S = q * k.T / sympy.sqrt(3)
    P = sympy.Matrix(3, 3, lambda i, j: sympy.exp(S[i, j]) / sum(sympy.exp(S[i, c]) for c in range(3)))
    O = P * v  # noqa: E741
    L = sum(G3[i][c] * O[i, c] for i in range(3) for c in range(3))
    values = {q[i, j]: sympy.Rational(Q3[i][j]) for i in range(3) for j in range(3)}
    trace = sa.attend(Problem(**CASES["plain"][0]))
    for i in range(3):
        for j in range(3):
            mine = trace.step("d_Q")[i, j]
            theirs = sympy.diff(L, q[i, j]).subs(values)
            assert abs(sympy.N(mine - theirs, 60)) < sympy.Float("1e-50")


def test_exact_zeros_are_exact():
    """A causal first row has dS = 1·(dP − dP) = 0; a loss of Σ O over value rows with equal
    sums is constant, so dS, dQ and dK are exactly 0 — printed as 0, not as a tiny ball."""
    trace = sa.attend(Problem(**CASES["causal"][0]))
    assert trace.step("d_logits")[0, 0] == 0
    assert str(trace.step("d_logits").decimal(0, 0, 5)) == "0"
    equal_sums = [["1", "2"], ["3", "0"], ["0", "3"]]
    flat = sa.attend(Problem(Q=Q3, K=K3, V=equal_sums, backward={"loss": "sum"}))
    for name in ("d_logits", "d_scores", "d_Q", "d_K"):
        assert all(e == 0 for row in flat.step(name).rows() for e in row), name
        assert {str(d) for row in flat.step(name).decimals(4) for d in row} == {"0"}
    assert [str(d) for d in flat.step("d_V").row_decimals(0, 3)]   # d_V is not zero


def test_identities_hold_on_the_numbers():
    """dS rows sum to 0; column sums of dV equal those of dO; D_i = dO_i·O_i; ⟨dQ,Q⟩ = ⟨dK,K⟩."""
    trace = sa.attend(Problem(**CASES["window-both-sides"][0]))
    with mpmath.workdps(40):
        num = {n: trace.step(n).to_mpmath(40) for n in ("d_logits", "d_V", "d_output", "row_dot", "output",
                                                          "d_Q", "d_K", "Q", "K")}
        for i in range(3):
            assert abs(sum(num["d_logits"][i, j] for j in range(3))) < mpmath.mpf(10) ** -35
            assert abs(num["row_dot"][i, 0] - sum(num["d_output"][i, c] * num["output"][i, c]
                                                  for c in range(3))) < mpmath.mpf(10) ** -35
        for c in range(3):
            assert abs(sum(num["d_V"][j, c] - num["d_output"][j, c] for j in range(3))) < mpmath.mpf(10) ** -35
        inner = lambda a, b: sum(num[a][i, c] * num[b][i, c] for i in range(3) for c in range(3))  # noqa: E731
        assert abs(inner("d_Q", "Q") - inner("d_K", "K")) < mpmath.mpf(10) ** -35


def test_float64_gradients_of_a_mild_problem():
    """The familiar float64 formulas, computed with numpy, agree to 12 digits."""
    np = pytest.importorskip("numpy")
    Q, K, V, G = (np.array([[float(Fraction(x)) for x in row] for row in m]) for m in (Q3, K3, V3, G3))
    S = Q @ K.T / np.sqrt(3)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - (P * dP).sum(axis=1, keepdims=True)) / np.sqrt(3)
    trace = sa.attend(Problem(**CASES["plain"][0]))
    for name, want in (("d_V", P.T @ G), ("d_Q", dS @ K), ("d_K", dS.T @ Q)):
        got = np.array([[float(d.text) for d in row] for row in trace.step(name).decimals(15)])
        assert np.allclose(got, want, rtol=1e-12, atol=1e-14), name


@pytest.mark.parametrize("backward, message", [
    ({"grad_output": [[1, 2], [3, 4]]}, "backward grad_output is 2×2 but the output is 3×3"),
    ({"loss": "half-squared-error", "target": [[1, 2, 3]]}, "backward target is 1×3 but the output is 3×3"),
    ({"loss": "mse"}, "backward loss is 'mse': the losses are 'half-squared-error' and 'sum'"),
    ({"loss": "sum", "target": G3}, 'backward loss "sum" takes no target'),
    ({"loss": "half-squared-error"}, "needs target"),
    ({"grad_output": G3, "loss": "sum"}, "not both"),
    ({"gradient": G3}, "unknown key 'gradient'"),
    ("sum", "write backward = "),
])
def test_bad_backward_keys_get_one_line_errors(backward, message):
    with pytest.raises(ProblemError) as err:
        Problem(Q=Q3, K=K3, V=V3, backward=backward)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_problem_file_with_a_backward_key(tmp_path):
    path = tmp_path / "b.toml"
    path.write_text('Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'
                    'backward = { loss = "half-squared-error", target = [[0, 0], [1, 1]] }\n')
    trace = sa.attend(Problem.from_toml(path))
    assert "d_Q" in trace.step_names and "loss" in trace.step_names
    bad = tmp_path / "bad.toml"
    bad.write_text('Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'
                   'backward = { grad_output = [[1, 2, 3]] }\n')
    with pytest.raises(ProblemError, match=r"bad.toml: backward grad_output is 1×3 but the output is 2×2"):
        Problem.from_toml(bad)


def test_forward_only_problems_have_no_backward_steps():
    trace = sa.attend(Problem(Q=Q3, K=K3, V=V3))
    assert not any(n.startswith("d_") for n in trace.step_names) and "lse" not in trace.step_names


def test_exact_entries_across_masked_keys_and_zero_value_rows():
    """A masked weight (and a dP entry against a zero value row) is the empty sum: exact d_V,
    d_K and row_dot entries of a causal problem build, and agree with numpy float64."""
    np = pytest.importorskip("numpy")
    Q, K, V, G = [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[0, 0], [1, 2]], [[1, 2], [3, 4]]
    trace = sa.attend(Problem(Q=Q, K=K, V=V, mask="causal", backward={"grad_output": G}))
    Qa, Ka, Va, Ga = (np.array(m, dtype=float) for m in (Q, K, V, G))
    S = Qa @ Ka.T / np.sqrt(2) + np.where(np.tril(np.ones((2, 2))) > 0, 0, -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = Ga @ Va.T
    D = (P * dP).sum(axis=1, keepdims=True)
    dS = P * (dP - D) / np.sqrt(2)
    for name, want in (("d_V", P.T @ Ga), ("row_dot", D), ("d_K", dS.T @ Qa), ("d_Q", dS @ Ka)):
        got = np.array([[float(sympy.N(e, 20)) for e in row] for row in trace.step(name).rows()])
        assert np.allclose(got, want, rtol=1e-13, atol=1e-15), name
