"""⟨dQ, Q⟩ = ⟨dK, K⟩ proved from its parts (dQ = dS'·K, dK = dS'ᵀ·Q, S = Q·Kᵀ), exactly, with no
transcendental zero test: on a soft-capped problem with surds the whole sums' Lindemann–Weierstrass
test took minutes (its speed is in benchmarks/bench_facts.py, not here)."""

from __future__ import annotations

import math

import pytest
import sympy

import symattn as sa
from symattn import facts
from symattn.facts import backward_checks
from symattn.facts.backward_checks import inner_products_structurally
from symattn.facts.zerotest import algebraically_zero, formally_zero
from symattn.numbers.arb import to_arb
from symattn.problem.problem import Problem

np = pytest.importorskip("numpy")

#: the slow problem: 3 tokens, surds in Q and K, a soft-cap, L = Σ O
Q = [["sqrt(2)", "1"], ["0", "1/2+sqrt(3)"], ["1", "sqrt(2)/2"]]
K = [["1", "sqrt(3)"], ["sqrt(2)", "0"], ["1/2", "1"]]
V = [["1", "0"], ["0", "2"], ["1", "1"]]
CAP = 5


@pytest.fixture(scope="module")
def slow():
    return sa.attend(Problem(Q=Q, K=K, V=V, softcap=CAP, backward={"loss": "sum"}))


def _numpy_gradients():
    """dQ and dK in float64 from the familiar formulas, soft-cap included (written here)."""
    q = np.array([[math.sqrt(2), 1], [0, 0.5 + math.sqrt(3)], [1, math.sqrt(2) / 2]])
    k = np.array([[1, math.sqrt(3)], [math.sqrt(2), 0], [0.5, 1]])
    v = np.array([[1.0, 0], [0, 2], [1, 1]])
    b = q @ k.T / math.sqrt(2)
    z = CAP * np.tanh(b / CAP)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dP = np.ones((3, 2)) @ v.T
    dS = p * (dP - (p * dP).sum(axis=1, keepdims=True))
    dZ = dS * (1 - np.tanh(b / CAP) ** 2) / math.sqrt(2)
    return q, k, dZ @ k, dZ.T @ q


def test_the_slow_problem_is_proved_exactly_without_lindemann_weierstrass(slow, monkeypatch):
    def refused(*args):
        raise AssertionError("the whole inner products went to a transcendental zero test")
    monkeypatch.setattr(backward_checks, "exp_sum_is_zero", refused)
    monkeypatch.setattr(backward_checks, "trig_is_zero", refused)
    assert inner_products_structurally(slow, "Q", "K", "d_Q", "d_K")
    proof = facts.prove("d-Q-K-inner-products", slow)
    assert proof.holds
    assert [line.text for line in proof.checks] == ["⟨d_Q, Q⟩ = ⟨d_K, K⟩ = ⟨dS', S⟩ (exactly)"]


def test_the_slow_problems_gradients_and_inner_products_are_those_numpy_computes(slow):
    q, k, dQ, dK = _numpy_gradients()
    for name, want in (("d_Q", dQ), ("d_K", dK)):
        got = np.array([[float(to_arb(slow.step(name)[i, c], 128).mid()) for c in range(2)] for i in range(3)])
        assert np.allclose(got, want, rtol=1e-12, atol=1e-14), name
    assert abs((dQ * q).sum() - (dK * k).sum()) < 1e-12
    assert abs((dQ * q).sum()) > 1e-3        # not 0: the identity is not a trivial one here


class _Tampered:
    """The trace with one entry of one step changed (a wrong dQ, dK or score)."""

    def __init__(self, trace, name: str, change: sympy.Expr) -> None:
        self.trace, self.name, self.change = trace, name, change
        self.problem = trace.problem

    def allowed(self, i: int):
        return self.trace.allowed(i)

    def step(self, name: str):
        step = self.trace.step(name)
        if name != self.name:
            return step
        rows = self.problem.m if name == "d_K" else self.problem.n
        cols = self.problem.m if name == "scores" else self.problem.d_k
        table = {(i, c): step[i, c] for i in range(rows) for c in range(cols)}
        table[1, 1] = table[1, 1] + self.change
        return table


@pytest.mark.parametrize("name", ["d_Q", "d_K", "scores"])
def test_a_wrong_entry_is_never_proved(slow, name):
    tiny = sympy.exp(sympy.sqrt(2)) * sympy.Rational(1, 10 ** 40)
    assert not inner_products_structurally(_Tampered(slow, name, tiny), "Q", "K", "d_Q", "d_K")
    assert inner_products_structurally(_Tampered(slow, name, sympy.S.Zero), "Q", "K", "d_Q", "d_K")


def test_the_algebraic_test_multiplies_roots_as_numbers_and_keeps_tanh_whole():
    e, t = sympy.exp(sympy.sqrt(2)), sympy.tanh(sympy.sqrt(5) / 3)
    zero = sympy.sqrt(3) * (sympy.sqrt(3) * e + t) / (e + 1) - (3 * e + sympy.sqrt(3) * t) / (e + 1)
    assert zero != 0 and abs(to_arb(zero, 200).mid()) < 1e-50
    assert algebraically_zero(zero)
    assert not formally_zero(zero)          # √3 an indeterminate there: √3·√3 ≠ 3
    nested = (1 + sympy.sqrt(2)) * ((1 + sympy.sqrt(2)) * e - t) - (3 + 2 * sympy.sqrt(2)) * e \
        + (1 + sympy.sqrt(2)) * t
    assert algebraically_zero(nested)
    assert algebraically_zero(sympy.cbrt(2) * (sympy.cbrt(2) ** 2 * t + e) - 2 * t - sympy.cbrt(2) * e)
    # nonzeros are never proved 0, however near 0
    assert not algebraically_zero(zero + sympy.Rational(1, 10 ** 60))
    assert not algebraically_zero(sympy.sqrt(3) * (sympy.sqrt(3) * e + t) - (3 * e + t))
    # a zero that needs what tanh is: not shown this way (False is "not shown", never "nonzero")
    assert not algebraically_zero(sympy.tanh(1) - (sympy.exp(2) - 1) / (sympy.exp(2) + 1))
