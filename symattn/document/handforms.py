"""Hand forms: how a person writes a value, as math nodes (never rewritten strings).

SymPy rewrites 2/√3 as 2√3/3 the moment it is built; the lesson writes 2/√3,
and so do students.  These functions recover the hand-written shape of the
scaled and shifted scores (a rational over √d_k) and of the softmax entries
(exponentials of those, like terms collected) as nodes of
``symattn.document.blocks``, read from the Trace's public API.  Equality and
evaluation never use these forms; they only decide how a value is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import sympy

from symattn.document.blocks import (
    Exact, Exp, Factor, Frac, Func, Int, Math, Mul, Neg, Product, SigmaSum, Sqrt, Sub, Sum, Sym, Words,
)
from symattn.trace.steps import scale_form

if TYPE_CHECKING:
    from symattn.trace.trace import Trace

SMALL_EXACT = 16      # a softmax row with more allowed keys writes its sum as Σ, not term by term


def surd(c: Fraction, radicand: int | None) -> Math:
    """``c/√radicand`` as written by hand: 2/√3, −8/√3, 5/(2√2), 3/4."""
    num, den = abs(c.numerator), c.denominator
    if c == 0:
        return Int(0)
    if radicand is None:
        node: Math = Int(num) if den == 1 else Frac(Int(num), Int(den))
    else:
        root = Sqrt(Int(radicand))
        node = Frac(Int(num), root if den == 1 else Mul((Int(den), root)))
    return Neg(node) if c < 0 else node


def exact(value: sympy.Basic) -> Math:
    """An exact value with no hand form (a whole number ≥ 0 becomes an ``Int``)."""
    if isinstance(value, sympy.Integer) and value >= 0:
        return Int(int(value))
    return Exact(value)


def factor(value: sympy.Basic) -> Factor:
    """A value as a factor of a written product (the printer adds parentheses)."""
    return Factor(exact(value))


def _rational(x: sympy.Basic) -> Fraction | None:
    return Fraction(int(x.p), int(x.q)) if isinstance(x, sympy.Basic) and x.is_Rational else None


def scaled(trace: Trace, score: sympy.Basic) -> Math:
    """``scale · score`` as a person writes it (SymPy's form when the score is not rational)."""
    form, s = scale_form(trace.problem), _rational(score)
    if form is None or s is None:
        return exact(trace.problem.scale * score)
    return surd(form[0] * s, form[1])


def number(value: sympy.Basic) -> Math:
    """A rational as a person writes it (−1/4, 3/2); anything else in SymPy's form."""
    r = _rational(value)
    return surd(r, None) if r is not None else exact(value)


# -- ALiBi and soft-capping: the logits (symattn.problem.keys.logits) ---------------------------------

def bias_worked(trace: Trace, i: int, j: int) -> Math:
    """ALiBi's bias before it is worked out: −1/4·(1 − 0), or −1/4·|0 − 2| when symmetric."""
    alibi = trace.problem.alibi
    assert alibi is not None         # a bias step only with ALiBi
    gap = Sum((Int(i), Neg(Int(j))))
    distance = Func("abs", gap) if alibi.symmetric else Factor(gap)
    slope = number(alibi.slope)
    return Neg(Product((slope if isinstance(slope, (Int, Frac)) else Factor(slope), distance)))


def _plus(a: Math, b: Math) -> Math:
    if b == Int(0):
        return a
    if a == Int(0):
        return b
    return Sum((a, b))


def biased(trace: Trace, i: int, j: int) -> Math:
    """scaled + bias as written: a rational when it is one, else 2/√3 − 1/4."""
    value = trace.step("biased")[i, j]
    if value.is_Rational:
        return number(value)
    return _plus(scaled(trace, trace.step("scores")[i, j]), number(trace.step("bias")[i, j]))


def capped(trace: Trace, x: Math) -> Math:
    """c·tanh(x/c) with x the logit before the cap as written."""
    if x == Int(0):
        return Int(0)
    cap = number(trace.problem.softcap)
    if cap == Int(1):
        return Func("tanh", x)
    return Mul((cap, Func("tanh", Frac(Factor(x), cap))))


def logit(trace: Trace, i: int, j: int) -> Math:
    """The entry the softmax takes (scaled, biased or capped) as written; no mask."""
    p = trace.problem
    x = biased(trace, i, j) if p.alibi is not None else scaled(trace, trace.step("scores")[i, j])
    return capped(trace, x) if p.softcap is not None else x


def _before_cap(trace: Trace, i: int, j: int) -> Math:
    """The logit the soft-cap takes, as written: biased with ALiBi, else scaled."""
    if trace.problem.alibi is not None:
        return biased(trace, i, j)
    return scaled(trace, trace.step("scores")[i, j])


@dataclass(frozen=True)
class LogitForm:
    """How the derivation writes a variant's logit step (a ``StepKind.LOGIT`` step): the
    symbol of its matrix, an entry as written, and a worked dot row's entry (the working
    before the value: −1/4·(1 − 0); 2/√3 + (−1/4); 50·tanh(x/50) from x)."""

    symbol: Math
    written: Callable[[Trace, int, int], Math]
    worked: Callable[[Trace, int, int], Math]


#: each logit step's forms; the derivation's logits section reads them for every LOGIT step
#: in the trace, so a new logit variant adds its forms here and nothing in ``document/build``
LOGIT_FORMS: dict[str, LogitForm] = {
    "bias": LogitForm(Sym("B"), lambda t, i, j: number(t.step("bias")[i, j]), bias_worked),
    "biased": LogitForm(Words("biased"), biased,
                        lambda t, i, j: Sum((scaled(t, t.step("scores")[i, j]),
                                             number(t.step("bias")[i, j])))),
    "capped": LogitForm(Words("capped"), logit, _before_cap),
}


def _logit_shifted(trace: Trace, i: int, j: int) -> Math:
    """logit[i, j] − logit[i, max] as written (0 for the keys tied with the maximum)."""
    r = trace.row_max(i)
    if r is None:
        return logit(trace, i, j)
    if j in trace.ties(i):
        return Int(0)
    value = trace.exponent(i, j)
    if value.is_Rational:
        return number(value)
    p = trace.problem
    if p.softcap is not None:
        return Sum((logit(trace, i, j), Neg(logit(trace, i, r))))
    form, gap = scale_form(p), _rational(trace.score_gap(i, j))
    if form is None or gap is None or p.alibi is None or not p.alibi.slope.is_Rational:
        return exact(value)          # (logits other than scaled and no soft-cap: ALiBi is on)
    bias = -p.alibi.slope * (p.alibi.distance(i, j) - p.alibi.distance(i, r))
    return _plus(surd(form[0] * gap, form[1]), number(bias))


def _shifted_surd(trace: Trace, i: int, j: int) -> Math | None:
    form, gap = scale_form(trace.problem), _rational(trace.score_gap(i, j))
    if form is None or gap is None:
        return None
    return surd(form[0] * gap, form[1])


def shifted(trace: Trace, i: int, j: int) -> Math:
    """The shifted score of row i, key j (−∞ where masked)."""
    if not trace.is_allowed(i, j):
        return Exact(trace.masked_value)
    if trace.logit_step != "scaled":
        return _logit_shifted(trace, i, j)
    form = _shifted_surd(trace, i, j)
    return form if form is not None else exact(trace.shifted[i, j])


def exponential(trace: Trace, i: int, j: int) -> Math:
    """``e^(−8/√3)``; 1 for e^0; 0 where masked."""
    if not trace.is_allowed(i, j):
        return Int(0)
    if trace.logit_step != "scaled":
        form = _logit_shifted(trace, i, j)
        return Int(1) if form == Int(0) else Exp(form)
    surd_form = _shifted_surd(trace, i, j)
    if surd_form is None:
        return Exact(sympy.exp(trace.exponent(i, j)))
    return Int(1) if surd_form == Int(0) else Exp(surd_form)


def _terms(trace: Trace, i: int) -> list[tuple[Math, list[int]]]:
    """Row i's distinct exponentials and the keys that share each, in key order."""
    terms: dict[Math, list[int]] = {}
    for j in trace.allowed(i):
        terms.setdefault(exponential(trace, i, j), []).append(j)
    return list(terms.items())


def _times(count: sympy.Basic, term: Math) -> Math:
    if term == Int(1):
        return exact(count)
    if count == 1:
        return term
    return Mul((factor(count), term))


def row_sum(trace: Trace, i: int) -> Math:
    """The softmax denominator of row i, like terms collected (Σ when the row is long)."""
    if len(trace.allowed(i)) > SMALL_EXACT:
        return SigmaSum(Exp(Sub(Words("shifted"), (Sym("j"),))), "j")
    return Sum(tuple(_times(sympy.Integer(len(keys)), term) for term, keys in _terms(trace, i)))


def weight(trace: Trace, i: int, j: int) -> Math | None:
    """A weight as the fraction of exponentials it is (None for a long row: not written)."""
    if not trace.is_allowed(i, j):
        return Int(0)
    if len(trace.allowed(i)) > SMALL_EXACT:
        return None
    terms = _terms(trace, i)
    if len(terms) == 1:
        return exact(sympy.Rational(1, len(terms[0][1])))
    return Frac(exponential(trace, i, j), row_sum(trace, i))


def output(trace: Trace, i: int, c: int) -> Math | None:
    """An output entry as Σ v·e^(…) over the row sum, like terms collected (None for a long row)."""
    if len(trace.allowed(i)) > SMALL_EXACT:
        return None
    terms = _terms(trace, i)
    if len(terms) == 1:
        return exact(trace.output[i, c])
    V = trace.V
    parts = []
    for term, keys in terms:
        coefficient = sympy.Add(*[V[j, c] for j in keys])
        if coefficient != 0:
            parts.append(_times(coefficient, term))
    return Frac(Sum(tuple(parts)), row_sum(trace, i))
