"""The mistakes of the backward pass: the engine on a changed problem, or the backward steps
worked by hand from the trace's own exact values with one named change.

==============================  ===================================================================
code                            the change
==============================  ===================================================================
``forgot-row-dot``              the −D term forgotten: dS = P ∘ dP
``row-dot-as-row-sum``          D taken as the row sum of dP (Σ_j dP_ij, not Σ_j P_ij·dP_ij)
``dp-not-transposed``           dP = dO·V instead of dO·Vᵀ (only when d_v = m)
``dv-not-transposed``           dV = P·dO instead of Pᵀ·dO (only when n = m)
``dk-not-transposed``           dK = dS'·Q instead of dS'ᵀ·Q (only when n = m)
``backward-unscaled``           the scale forgotten in the backward: dS' = dS
``backward-scaled-twice``       the scale applied twice: dS' = scale²·dS
``unscaled-forward``            the gradient of an unscaled forward: the engine on the problem
                                with the scale c/√d_k replaced by c (its backward key kept)
``gradient-ascent``             every gradient with its sign flipped (−∇L: ascent)
``early-rounding``              P (``weights``) or dP (``d_weights``) rounded to k places before
                                the rest of the backward is worked from it
==============================  ===================================================================

Why by hand from the trace's values: a wrong backward is a wrong *formula* applied to the right
P, dO, V, Q and K, so each variant is the formula of ``symattn.trace.backward`` (its docstring
lists them) applied to the trace's own exact matrices, with the one change; nothing is
recomputed that the change does not touch (P comes from the trace, never from a second softmax).
The hand chain covers the plain logits (no soft-cap, no RoPE: there the chain factor and the
rotation would have to be re-derived) and the steps d_output through d_K; ``unscaled-forward``
and ``gradient-ascent`` cover every problem and every backward step.  Problems with more than
256 scores are left out of the hand chain (the exact products grow too large to be worth it).
"""

from __future__ import annotations

from typing import Callable

import sympy
from sympy import Matrix

from symattn.check.targets import Source
from symattn.check.codes import MistakeCode, MistakeFamily
from symattn.errors import CertificationError, SymattnError
from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.numbers.compare import sign
from symattn.numbers.masked import Masked
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace
from symattn.vocab import StepName, StepKind

__all__ = ["BACKWARD_CODES", "BackwardMistakes", "GRADIENTS"]

BACKWARD_CODES = MistakeCode.of_family(MistakeFamily.BACKWARD)

#: every step a flipped sign changes (the gradients; lse and loss are not gradients)
GRADIENTS = frozenset(StepName.of_kind(StepKind.GRADIENT))
_EVERY = frozenset(StepName.backward())
_AFTER_DS = (StepName.D_SCORES, StepName.D_Q, StepName.D_K)
_MAX_SCORES = 256

Found = tuple[str, str, frozenset[str], Source]


class _Values(Source):
    """Some steps of a trace replaced by exact matrices (certified as usual)."""

    def __init__(self, trace: Trace, values: Callable[[], dict[str, Matrix]],
                 steps: frozenset[str]) -> None:
        super().__init__(trace)
        self._values, self.steps = values, steps
        self._built: dict[str, Matrix] | None = None

    def _matrix(self, name: str) -> Matrix:
        if self._built is None:
            self._built = self._values()
        return self._built[name]

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        if name not in self.steps:
            return super().exact(name, i, j)
        return self._matrix(name)[i, j]

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name not in self.steps:
            return super().decimal(name, i, j, rounding)
        return _certified(self.exact(name, i, j), rounding)


def _certified(value: sympy.Expr, rounding: Rounding) -> CertifiedDecimal:
    """A hand chain's entry rounded; one exactly 0 in an unsimplified form (p·(dP − D) on a row
    whose dP is constant, dS·Q where it cancels), which ``certify`` cannot round, is 0 when the
    exact sign test proves it so."""
    try:
        return certify(value, rounding)
    except CertificationError:
        if sign(value) == 0:
            return certify(sympy.S.Zero, rounding)
        raise


class _Negated(Source):
    """Every gradient of a trace with its sign flipped: −∇L, a step uphill."""

    def exact(self, name: str, i: int, j: int) -> sympy.Expr:
        value = super().exact(name, i, j)
        return -value if name in GRADIENTS else value

    def decimal(self, name: str, i: int, j: int, rounding: Rounding) -> CertifiedDecimal | Masked:
        if name not in GRADIENTS:
            return super().decimal(name, i, j, rounding)
        return certify(self.exact(name, i, j), rounding)


def _rounded(trace: Trace, step: str, places: int) -> Matrix:
    rows = trace.step(step).decimals(Rounding(places=places))
    return Matrix([[sympy.Rational(d.mantissa, 10 ** -d.exponent) if isinstance(d, CertifiedDecimal)
                    else sympy.S.Zero for d in row] for row in rows])


class _Hand:
    """The backward from d_output to d_K as a person works it, from the trace's exact values."""

    def __init__(self, trace: Trace) -> None:
        self.t = trace
        self.scale = trace.problem.scale

    def chain(self, *, P: Matrix | None = None, dP: Matrix | None = None, change: str = ""
              ) -> dict[str, Matrix]:
        t = self.t
        P = t.weights.matrix if P is None else P
        dO, V, Q, K = t.step("d_output").matrix, t.V.matrix, t.Q.matrix, t.K.matrix
        if dP is None:
            dP = dO * V if change == MistakeCode.DP_NOT_TRANSPOSED else dO * V.T
        n, m = P.shape
        if change == MistakeCode.ROW_DOT_AS_ROW_SUM:
            D = Matrix(n, 1, lambda i, _: sum((dP[i, j] for j in range(m)), sympy.S.Zero))
        else:
            D = Matrix(n, 1, lambda i, _: sum((P[i, j] * dP[i, j] for j in range(m)), sympy.S.Zero))
        minus = sympy.S.Zero if change == MistakeCode.FORGOT_ROW_DOT else sympy.S.One
        dS = Matrix(n, m, lambda i, j: P[i, j] * (dP[i, j] - minus * D[i, 0]))
        factors: dict[str, sympy.Expr] = {MistakeCode.BACKWARD_UNSCALED: sympy.S.One,
                                          MistakeCode.BACKWARD_SCALED_TWICE: self.scale ** 2}
        factor = factors.get(change, self.scale)
        dSs = dS * factor
        dV = P * dO if change == MistakeCode.DV_NOT_TRANSPOSED else P.T * dO
        dK = dSs * Q if change == MistakeCode.DK_NOT_TRANSPOSED else dSs.T * Q
        return {"d_V": dV, "d_weights": dP, "row_dot": D, "d_logits": dS, "d_scores": dSs,
                "d_Q": dSs * K, "d_K": dK}


class BackwardMistakes:
    """The backward mistakes of one trace (none without a backward key), built once."""

    def __init__(self, trace: Trace, attempt: Callable[[Callable[[], Problem]], Trace | None]) -> None:
        self.trace, self.attempt = trace, attempt
        p = trace.problem
        self.hand = p.backward is not None and p.rope is None and p.softcap is None and \
            p.n * p.m <= _MAX_SCORES
        self._early: dict[int, list[Found]] = {}

    def _source(self, steps: tuple[str, ...], **chain: object) -> _Values:
        hand = _Hand(self.trace)
        return _Values(self.trace, lambda: hand.chain(**chain), frozenset(steps))  # type: ignore[arg-type]

    def fixed(self) -> list[Found]:
        t, p = self.trace, self.trace.problem
        if p.backward is None:
            return []
        out: list[Found] = [(MistakeCode.GRADIENT_ASCENT, "every gradient's sign flipped (−∇L)", GRADIENTS,
                             _Negated(t))]
        c = p.scale * sympy.sqrt(p.d_k)
        if p.d_k != 1 and p.scale.is_zero is not True:
            unscaled = self.attempt(lambda: p.rebuilt(scale=c))
            if unscaled is not None:
                out.append((MistakeCode.UNSCALED_FORWARD, "the gradient of the forward without the √d_k",
                            _EVERY, Source(unscaled)))
        if not self.hand:
            return out
        changes: list[tuple[str, str, tuple[str, ...], bool]] = [
            (MistakeCode.FORGOT_ROW_DOT, "dS = P ∘ dP: the −D term forgotten", ("d_logits", *_AFTER_DS), True),
            (MistakeCode.ROW_DOT_AS_ROW_SUM, "D taken as the row sum of dP", ("row_dot", "d_logits", *_AFTER_DS),
             True),
            (MistakeCode.DP_NOT_TRANSPOSED, "dP = dO·V instead of dO·Vᵀ",
             ("d_weights", "row_dot", "d_logits", *_AFTER_DS), p.d_v == p.m),
            (MistakeCode.DV_NOT_TRANSPOSED, "dV = P·dO instead of Pᵀ·dO", ("d_V",), p.n == p.m),
            (MistakeCode.DK_NOT_TRANSPOSED, "dK = dS·Q instead of dSᵀ·Q", ("d_K",), p.n == p.m),
            (MistakeCode.BACKWARD_UNSCALED, "the scale left out of the backward", _AFTER_DS, p.scale != 1),
            (MistakeCode.BACKWARD_SCALED_TWICE, "the scale applied twice in the backward", _AFTER_DS,
             p.scale != 1 and p.scale != -1),
        ]
        for code, detail, steps, possible in changes:
            if possible:
                out.append((code, detail, frozenset(steps), self._source(steps, change=code)))
        return out

    def early(self, places: int) -> list[Found]:
        """P or dP rounded to ``places`` places before the rest of the backward."""
        if not self.hand:
            return []
        if places not in self._early:
            s = "s" if places != 1 else ""
            try:
                P, dP = _rounded(self.trace, "weights", places), _rounded(self.trace, "d_weights", places)
            except SymattnError:
                self._early[places] = []
                return []
            self._early[places] = [
                (MistakeCode.EARLY_ROUNDING, f"weights rounded to {places} place{s} before the backward",
                 frozenset(("d_V", "row_dot", "d_logits", *_AFTER_DS)), self._source(
                     ("d_V", "row_dot", "d_logits", *_AFTER_DS), P=P)),
                (MistakeCode.EARLY_ROUNDING, f"d_weights rounded to {places} place{s} first",
                 frozenset(("row_dot", "d_logits", *_AFTER_DS)), self._source(
                     ("row_dot", "d_logits", *_AFTER_DS), dP=dP))]
        return self._early[places]
