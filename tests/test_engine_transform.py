"""The logit-transform interface (symattn.engine.transform): the fast paths ask the transform.

The soft-cap answers "no" to every question (its values are checked against float64 and
mpmath in test_variants_logits.py).  Here a test transform that answers "yes" to all of them,
t(x) = x / 2, runs the rational, algebraic and b^q paths and the root-index budget: its
values must be those of the plain problem with half the scale, worked by hand or in floats.
"""

from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import flint
import numpy as np
import pytest
import sympy

import symattn as sa
from symattn.engine import transform as transform_module
from symattn.engine.transform import SoftCap
from symattn.errors import ProblemError
from symattn.limits import MAX_ROOT_INDEX


@dataclass(frozen=True)
class Halve:
    """t(x) = x / 2: rational, algebraic, keeps logarithms (log 2 / 2 = log √2)."""

    step: ClassVar[str] = "capped"
    rational: ClassVar[bool] = True
    algebraic: ClassVar[bool] = True
    keeps_logs: ClassVar[bool] = True

    def exact(self, x):
        return x / 2

    def known(self, x):
        return x / 2

    def balls(self, row, prec):
        return [x / 2 for x in row]


@pytest.fixture
def halve(monkeypatch):
    """Problems with a soft-cap get Halve instead of c·tanh(x / c) (the key only switches it on)."""
    monkeypatch.setattr(transform_module, "TRANSFORMS",
                        (lambda p: Halve() if p.softcap is not None else None,))


Q, K, V = [[1, 2], [0, 1]], [[1, 0], [2, 1], [0, 3]], [[1], [2], ["1/2"]]


def test_the_registry_finds_the_soft_cap_and_nothing_else():
    with_cap = sa.Problem(Q=Q, K=K, V=V, softcap=5)
    assert transform_module.logit_transform(with_cap) == SoftCap(sympy.Integer(5))
    assert transform_module.logit_transform(sa.Problem(Q=Q, K=K, V=V)) is None
    assert sa.attend(with_cap).engine.logit_steps == ("bias", "biased", "capped")


def test_a_rational_transform_keeps_the_rows_rational(halve):
    t = sa.attend(sa.Problem(Q=Q, K=K, V=V, scale="1/3", softcap=1))
    e = t.engine
    assert not e.plain and e.logit_step == "capped"
    # by hand: scores row 0 = [1, 4, 6], row 1 = [0, 1, 3]; scale 1/3, halved: /6
    scores = [[1, 4, 6], [0, 1, 3]]
    for i, row in enumerate(scores):
        capped = [Fraction(x, 6) for x in row]
        top = max(capped)
        assert e.known_row("capped", i) == [flint.fmpq(c.numerator, c.denominator) for c in capped]
        assert e.known_row("shifted", i) == [flint.fmpq((c - top).numerator, (c - top).denominator)
                                             for c in capped]
        assert [t.shifted[i, j] for j in range(3)] == [sympy.Rational(c - top) for c in capped]
    # the weights: float64 softmax of the halved logits
    z = np.array(scores, dtype=float) / 6
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    got = np.array([[float(str(d)) for d in row] for row in t.weights.decimals(sa.Rounding(places=12))])
    assert np.abs(got - w).max() < 1e-11


def test_an_algebraic_transform_of_a_log_scale_gives_exact_powers(halve):
    # by hand: scores [1, 0], scale log 2: logits [log 2, 0], halved [log √2, 0], so
    # exp = [1, 1/√2] and the weights are 1/(1 + 1/√2) = 2 − √2 and √2 − 1
    t = sa.attend(sa.Problem(Q=[[1]], K=[[1], [0]], V=[[1], [0]], scale="log(2)", softcap=1))
    assert t.engine.powers(0) is not None      # the b^q path: e^(log √2) = √2
    r2 = sympy.sqrt(2)
    assert sympy.simplify(t.weights[0, 0] - (2 - r2)) == 0
    assert sympy.simplify(t.weights[0, 1] - (r2 - 1)) == 0
    assert [str(d) for d in t.weights.decimals(5)[0]] == ["0.58579", "0.41421"]


def test_the_root_index_budget_sees_the_transform(halve):
    # scale log(2)/k: the plain exponent 2^(1/k) is within the budget, halved 2^(1/(2k)) is not
    k = MAX_ROOT_INDEX // 2 + 1
    problem = dict(Q=[[1]], K=[[1], [0]], V=[[1], [0]], scale=f"log(2)/{k}")
    sa.attend(sa.Problem(**problem))
    with pytest.raises(ProblemError, match="root of index"):
        sa.attend(sa.Problem(**problem, softcap=1))
