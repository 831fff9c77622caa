"""The moments behind variance-d_k (symattn/facts/moments.py), against mpmath's quadrature at
50 digits and a closed form written here; and the fact fails when a derived step is wrong."""

from __future__ import annotations

import mpmath
import sympy

from symattn import facts
from symattn.facts import moments, structure_facts


def _quad_moment(k: int, density, a, b) -> mpmath.mpf:
    with mpmath.workdps(50):
        return mpmath.quad(lambda x: x ** k * density(x), [a, 0, b])


def test_normal_moments_match_quadrature():
    got = moments.normal_moments(6)
    assert got == (1, 0, 1, 0, 3, 0, 15)              # (k − 1)!! for even k
    with mpmath.workdps(50):
        phi = lambda x: mpmath.exp(-x ** 2 / 2) / mpmath.sqrt(2 * mpmath.pi)  # noqa: E731
        for k, value in enumerate(got):
            assert abs(_quad_moment(k, phi, -mpmath.inf, mpmath.inf) - int(value)) < mpmath.mpf(10) ** -40


def test_uniform_moments_match_quadrature():
    got = moments.uniform_moments(sympy.sqrt(3), 4)
    assert got == (1, 0, 1, 0, sympy.Rational(9, 5))
    with mpmath.workdps(50):
        a = mpmath.sqrt(3)
        for k, value in enumerate(got):
            exact = mpmath.mpf(int(value.p)) / int(value.q)
            assert abs(_quad_moment(k, lambda x: 1 / (2 * a), -a, a) - exact) < mpmath.mpf(10) ** -40


def test_expectation_factors_over_independent_variables():
    q, k, q1, k1 = sympy.symbols("q k q1 k1")
    normal = moments.normal_moments(4)
    m = {v: normal for v in (q, k, q1, k1)}
    assert moments.expectation((q * k + q1 * k1) ** 2, m) == 2
    assert moments.expectation(q * k * q1 * k1, m) == 0
    # q + 2k is Normal(0, 5): E[(q + 2k)⁴] = 3·5² = 75
    assert moments.expectation((q + 2 * k) ** 4, m) == 75


def test_variance_fact_fails_when_a_derived_moment_is_wrong(monkeypatch):
    structure_facts._variance_facts.cache_clear()
    try:
        assert facts.prove("variance-d_k").holds
        structure_facts._variance_facts.cache_clear()
        monkeypatch.setattr(structure_facts, "normal_moments", lambda n: (1, 0, 2))   # a wrong E[x²]
        assert not facts.prove("variance-d_k").holds
        structure_facts._variance_facts.cache_clear()
        monkeypatch.setattr(structure_facts, "normal_moments", lambda n: None)        # a failed step
        assert not facts.prove("variance-d_k").holds
    finally:
        structure_facts._variance_facts.cache_clear()

