"""The exact state of one problem, as the engine holds it (the base of :class:`Engine`).

Q, K, V and the scores (rational matrices in flint when the inputs are rational, SymPy
matrices otherwise), the scale, the mask, the variant keys (ALiBi, soft-cap, sink, RoPE's
rotated Q and K), the flags that say which fast paths apply, and the caches every later
part fills.  The row plans (each row's allowed keys and maximum, :class:`RowPlan`) are made
by :class:`symattn.engine.engine.Engine` once the planning part is in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

import flint
import sympy

from symattn.engine.extra import StepNumbers
from symattn.engine.powers import log_terms
from symattn.engine.transform import LogitTransform, logit_transform
from symattn.numbers.compare import sign
from symattn.problem.keys import rope
from symattn.problem.matrix import ExactMatrix, sympy_to_fmpq
from symattn.problem.problem import Problem


def sign_or_none(expr: sympy.Expr) -> int | None:
    """The exact sign of a number, or of a symbolic expression when its
    assumptions settle it (``2*a**2 + 1`` with real a); None when they do not."""
    if not expr.free_symbols:
        return sign(expr)
    for value, known in ((1, expr.is_positive), (-1, expr.is_negative), (0, expr.is_zero)):
        if known:
            return value
    return None



@dataclass(frozen=True)
class RowPlan:
    """What the softmax of one row needs: its allowed keys and its maximum."""

    allowed: tuple[int, ...]   # key indices that may be attended to
    argmax: int | None         # index of the row maximum; None when symbols leave it open



class EngineState:
    """Exact state of one problem: inputs, scores, scale, mask, variant keys, caches."""

    #: one plan per query row (set by Engine once the planning part can make them)
    rows: list[RowPlan]

    def __init__(self, problem: Problem) -> None:
        self.problem = p = problem
        if p.projected:
            self.inputs = dict(p.inputs)
            X = p.inputs["X"]
            X_kv = p.inputs.get("X_kv", X)
            self.Q = X.matmul(p.inputs["W_q"])
            self.K = X_kv.matmul(p.inputs["W_k"])
            self.V = X_kv.matmul(p.inputs["W_v"])
        else:
            self.inputs = {}
            self.Q, self.K, self.V = p.inputs["Q"], p.inputs["K"], p.inputs["V"]
        #: Q_rot and K_rot with RoPE (symattn.problem.keys.rope): the scores come from them
        self.rotated: dict[str, ExactMatrix] = {}
        if p.rope is not None:
            self.rotated = {"Q_rot": rope.rotate(self.Q, p.rope.positions, p.rope),
                            "K_rot": rope.rotate(self.K, p.rope.key_positions, p.rope)}
            self.scores = rope.rotated_scores(self.Q, self.K, self.rotated["Q_rot"], self.rotated["K_rot"], p.rope)
        else:
            self.scores = self.Q.matmul(self.K, transpose_other=True)
        self.scale = p.scale
        self.symbolic = bool(p.free_symbols)
        self.scale_sign = sign_or_none(p.scale)
        self.scale_rational = sympy_to_fmpq(p.scale) if p.scale.is_Rational else None
        self.mask = p.mask
        self.n, self.m, self.d_v = p.n, p.m, p.d_v
        #: ALiBi (symattn.problem.keys.logits.Alibi) and the logit transform (the soft-cap,
        #: symattn.engine.transform), or None: then the softmax works on the logits, not on
        #: scale·scores
        self.alibi = p.alibi
        self.transform: LogitTransform | None = logit_transform(p)
        self.plain = self.alibi is None and self.transform is None
        #: the steps of the logits between scaled and masked (bias, biased, the transform's)
        self.logit_steps = ("bias", "biased") + (() if self.transform is None else (self.transform.step,))
        self._pre_rows: dict[int, list | None] = {}
        self._score_ints: list[list[int]] | None = None
        self._score_den: flint.fmpz | None = None
        if self.scores.rational is not None and self.plain:
            numerators, self._score_den = self.scores.rational.numer_denom()
            flat = list(map(int, numerators.entries()))
            self._score_ints = [flat[i * self.m:(i + 1) * self.m] for i in range(self.n)]
        # e^(q·log b) = b^q: possible only when a logarithm is in play
        self._scale_logs = None if self.symbolic or not p.scale.has(sympy.log) or not self.plain \
            else log_terms(p.scale)
        self._logs_possible = not self.symbolic and (self.transform is None or self.transform.keeps_logs) and (
            p.scale.has(sympy.log) or (self.scores.general is not None and self.scores.general.has(sympy.log)))
        # every exponential algebraic: rational scores times a Σ q·log b scale
        log_exps = self._scale_logs is not None and self.scores.is_rational
        # Lindemann–Weierstrass needs algebraic exponents and coefficients.
        self.algebraic = (bool(p.scale.is_algebraic) or log_exps) and (
            self.V.is_rational or all(e.is_algebraic for e in self.V.to_sympy()))
        if self.rotated and not self.scores.is_rational:   # cos(1) in a RoPE score: not algebraic
            self.algebraic = self.algebraic and all(e.is_algebraic for e in self.scores.entries())
        #: the sink logit (an extra softmax column, dropped), or None
        self.sink = p.sink
        if self.sink is not None:   # its exponent sink − scale·max must be algebraic too
            self.algebraic = self.algebraic and bool(p.scale.is_algebraic) and bool(self.sink.is_algebraic)
        if self.alibi is not None:  # scale·Δscore − slope·Δdistance: algebraic with both
            self.algebraic = self.algebraic and bool(p.scale.is_algebraic) and \
                bool(self.alibi.slope.is_algebraic)
        if self.transform is not None and not self.transform.algebraic:  # t(x) − t(y) not algebraic
            self.algebraic = False
        self._powers: dict[int, dict[int, flint.fmpq | sympy.Expr] | None] = {}
        #: (step, row, prec) -> a row of balls; row -1 holds V (an arb_mat, and as integers) and the
        #: exponentials by score gap (a dict)
        self._balls: dict[tuple[str, int, int], Any] = {}
        self._groups: dict[int, dict[Hashable, list[int]]] = {}
        self._row_sums: dict[int, sympy.Expr] = {}
        self._top: dict[int, frozenset[int]] = {}
        self._sink_groups: dict[int, Hashable] = {}
        self._key_balls: dict[sympy.Expr, flint.arb | None] = {}
        self._integer_rows: dict[tuple[str, str], tuple[list[list[int]], int]] = {}
        #: steps a variant adds (online softmax, decoding): name -> their numbers
        #: (``known_row(i)``, ``balls(i, prec)``, ``symbols()``; see symattn.trace.stepnumbers)
        self.extra: dict[str, StepNumbers] = {}

    def _allowed(self, i: int) -> tuple[int, ...]:
        if self.mask is None:
            return tuple(range(self.m))
        return tuple(j for j in range(self.m) if self.mask[i, j])

    def is_allowed(self, i: int, j: int) -> bool:
        return self.mask is None or bool(self.mask[i, j])

    def _argmax(self, i: int) -> int:
        """Row i's maximum where the caller knows it is decided (numbers, not open symbols)."""
        r = self.rows[i].argmax
        assert r is not None, f"row {i}'s maximum is left open by symbols"
        return r

    def _integer_row(self, i: int) -> list[int]:
        """Row i of the scores as integers over one denominator (rational scores, plain problem)."""
        assert self._score_ints is not None
        return self._score_ints[i]

    def _integer_den(self) -> flint.fmpz:
        """The one denominator of the integer scores (set with them)."""
        assert self._score_den is not None
        return self._score_den

    def _integer_scale(self) -> flint.fmpq:
        """scale / den: what multiplies the integer scores (a rational scale)."""
        assert self.scale_rational is not None
        return self.scale_rational / self._integer_den()

    @property
    def open_rows(self) -> tuple[int, ...]:
        """Rows whose maximum the symbols leave undecided (exp is e^scaled there)."""
        return tuple(i for i, plan in enumerate(self.rows) if plan.argmax is None)

    def matrix(self, step: str) -> ExactMatrix | None:
        """The exact matrix behind an input or a projection step, else None."""
        fixed = {"Q": self.Q, "K": self.K, "V": self.V, "scores": self.scores, **self.rotated}
        return fixed.get(step) or self.inputs.get(step)

    def symbols_of(self, step: str) -> frozenset:
        """The symbols a step's entries depend on (empty: it has numbers)."""
        if not self.symbolic:
            return frozenset()
        if step in self.extra:
            return self.extra[step].symbols()
        matrix = self.matrix(step)
        if matrix is not None:
            return frozenset() if matrix.general is None else frozenset(matrix.general.free_symbols)
        found = self.symbols_of("scores") | self.scale.free_symbols
        if self.alibi is not None:
            if step == "bias":
                return frozenset(self.alibi.slope.free_symbols)
            found |= self.alibi.slope.free_symbols
        return found | self.symbols_of("V") if step == "output" else found

    @property
    def logit_step(self) -> str:
        """The last step before the softmax: the transform's (capped), biased or scaled."""
        if self.transform is not None:
            return self.transform.step
        return "biased" if self.alibi is not None else "scaled"
