"""The one implementation of attention: exact values and arb enclosures.

Nothing here materialises a SymPy tree for the softmax up front.  The exact
state of a problem is small: Q, K, V and the scores (rational matrices in
flint when the inputs are rational, SymPy matrices otherwise), the scale,
and per row the index of its maximum.  Every later entry is *structural*:

    shifted[i, j] = scale · (scores[i, j] − scores[i, r_i])      (r_i = argmax)
    exp[i, j]     = e^shifted[i, j]           (0 where masked)
    row_sum[i]    = Σ_j exp[i, j]  (+ e^(sink − scale·scores[i, r_i]) with a sink logit)
    weights[i, j] = exp[i, j] / row_sum[i]
    output[i, c]  = Σ_j weights[i, j] · V[j, c]

With ALiBi or soft-capping (``symattn.problem.keys.logits``) the softmax works on the
*logits* instead of ``scale · scores``: ``biased = scaled + bias`` and/or
``capped = c·tanh(· / c)``; the row maximum and the tie groups are decided on
the logits before the cap (tanh is increasing), and shifted is
``logit[i, j] − logit[i, r_i]``.  The plain problem keeps its fast paths.

so an entry's SymPy expression is built only when asked for, and numbers
come from arb balls computed row by row at the precision asked for.

Which of these values are exact algebraic numbers is decided by
Lindemann–Weierstrass: for distinct algebraic exponents the e^d are
linearly independent over the algebraic numbers, so a ratio
Σ_d a_d e^d / Σ_d b_d e^d is algebraic exactly when a_d = λ·b_d for every d,
and then it equals λ.  That is how ties (1/3, or an output equal to a
constant value column) are recognised instead of looping forever on a
rounding boundary.

A scale that is not algebraic may still give algebraic exponentials: with
``scale = log(2)`` every e^(scale·Δ) is 2^Δ, and the weights are rational
(2^k / Σ 2^k).  Whenever scale·Δ is a sum of rational multiples of
logarithms of positive rationals, e^(Σ q·log b) = Π b^q exactly, and the
softmax steps are computed from those algebraic numbers.  SymPy builds
b^q itself as soon as it sees e^(q·log b) (and again inside any product),
so a problem whose b^q would pass :data:`EXACT_POWER_DIGITS` digits is
refused with a ProblemError instead of hanging on 2^(-10^12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

import flint
import sympy

from symattn.engine.budgets import check_root_indices
from symattn.problem.keys import rope
from symattn.numbers.certify import to_arb
from symattn.numbers.masked import NEG_INF
from symattn.numbers.compare import compare, equal, sign
from symattn.problem.matrix import ExactMatrix, fmpq_to_sympy, sympy_to_fmpq
from symattn.numbers.precision import precision
from symattn.errors import CertificationError
from symattn.problem.keys.logits import capped
from symattn.problem.problem import Problem
from symattn.engine.extra import StepNumbers
from symattn.engine.powers import (EXACT_POWER_DIGITS, LogTerms, _as_sympy, _power, _too_big, log_terms,
                                   power_digits)


def _sign_or_none(expr: sympy.Expr) -> int | None:
    """The exact sign of a number, or of a symbolic expression when its
    assumptions settle it (``2*a**2 + 1`` with real a); None when they do not."""
    if not expr.free_symbols:
        return sign(expr)
    for value, known in ((1, expr.is_positive), (-1, expr.is_negative), (0, expr.is_zero)):
        if known:
            return value
    return None


@dataclass(frozen=True)
class FixedRow:
    """One softmax row in fixed point with 2^bits as the unit (:meth:`Engine.fixed_exps`).

    Every exps[j] is the floor of e^shifted[i, j]·2^bits (0 where masked, exact), and
    the row sum times 2^bits lies in [total, total + terms): each of the ``terms``
    inexact terms (the allowed keys and the sink) was cut by less than one unit.  For the
    keys whose exps[j] is short (tiny weights), fine[j] = (M, s) is the floor of
    e^shifted[i, j]·2^(bits+s): the same value with s more bits."""
    exps: list[int]
    total: int
    terms: int
    fine: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class RowPlan:
    """What the softmax of one row needs: its allowed keys and its maximum."""

    allowed: tuple[int, ...]   # key indices that may be attended to
    argmax: int | None         # index of the row maximum; None when symbols leave it open


class Engine:
    """Exact state of one problem, and arb enclosures of every step by row."""

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
        self.scale_sign = _sign_or_none(p.scale)
        self.scale_rational = sympy_to_fmpq(p.scale) if p.scale.is_Rational else None
        self.mask = p.mask
        self.n, self.m, self.d_v = p.n, p.m, p.d_v
        #: ALiBi (symattn.problem.keys.logits.Alibi) and the soft-cap c, or None: then the softmax
        #: works on the logits, not on scale·scores
        self.alibi, self.softcap = p.alibi, p.softcap
        self.plain = self.alibi is None and self.softcap is None
        self._pre_rows: dict[int, list | None] = {}
        self._score_ints: list[list[int]] | None = None
        self._score_den: flint.fmpz | None = None
        if self.scores.rational is not None and self.plain:
            numerators, self._score_den = self.scores.rational.numer_denom()
            flat = [int(x) for x in numerators.entries()]
            self._score_ints = [flat[i * self.m:(i + 1) * self.m] for i in range(self.n)]
        self.rows = [self._plan_row(i) for i in range(self.n)]
        # e^(q·log b) = b^q: possible only when a logarithm is in play
        self._scale_logs = None if self.symbolic or not p.scale.has(sympy.log) or not self.plain \
            else log_terms(p.scale)
        self._logs_possible = not self.symbolic and self.softcap is None and (
            p.scale.has(sympy.log) or (self.scores.general is not None and self.scores.general.has(sympy.log)))
        # every exponential algebraic: rational scores times a Σ q·log b scale
        log_exps = self._scale_logs is not None and self.scores.is_rational
        if log_exps:
            self._check_power_sizes()
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
        if self.softcap is not None:  # exponents c·tanh(x/c) − c·tanh(y/c): not proved algebraic
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
        #: floor(e^t·2^bits) by bits and by integer score difference (Engine.fixed_exps)
        self._fixed: dict[tuple[int, int], dict[int, int]] = {}
        self._fixed_fine: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
        self._fixed_fmpz: dict[int, flint.fmpz] = {}        # by score gap, this precision
        self._fixed_gaps: dict[int, list[int]] = {}
        self._fixed_rows: dict[tuple[int, int, int], FixedRow | None] = {}
        self._fixed_precision: tuple[int, int] | None = None
        self._integer_rows: dict[tuple[str, str], tuple[list[list[int]], int]] = {}
        #: steps a variant adds (online softmax, decoding): name -> their numbers
        #: (``known_row(i)``, ``balls(i, prec)``, ``symbols()``; see symattn.trace.stepnumbers)
        self.extra: dict[str, StepNumbers] = {}
        check_root_indices(self)     # e^(c·log b) = b^c: its root index, before any is built

    # -- the row maximum, decided exactly ------------------------------------
    def _allowed(self, i: int) -> tuple[int, ...]:
        if self.mask is None:
            return tuple(range(self.m))
        return tuple(j for j in range(self.m) if self.mask[i, j])

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

    def _plan_row(self, i: int) -> RowPlan:
        allowed = self._allowed(i)
        if not self.plain:
            return RowPlan(allowed, self._logit_argmax(i, allowed))
        if self.scale_sign is None:
            return RowPlan(allowed, None)
        if self._score_ints is not None and self.scale_sign != 0:
            # rational scores over one common denominator: compare Python ints
            row = self._score_ints[i]
            pick = max if self.scale_sign > 0 else min
            if len(allowed) == self.m:                   # no mask: the first extreme score
                return RowPlan(allowed, row.index(pick(row)))
            best_value = pick(row[j] for j in allowed)
            return RowPlan(allowed, next(j for j in allowed if row[j] == best_value))
        best = allowed[0]
        if self.scale_sign != 0:
            for j in allowed[1:]:
                c = self._compare_scores(i, j, best)
                if c is None:  # symbols leave the order open: assume nothing
                    return RowPlan(allowed, None)
                if c * self.scale_sign > 0:
                    best = j
        return RowPlan(allowed, best)

    def _compare_scores(self, i: int, a: int, b: int) -> int | None:
        if self.scores.rational is not None:
            x, y = self.scores.rational[i, a], self.scores.rational[i, b]
            return (x > y) - (x < y)
        x, y = self.scores.exact(i, a), self.scores.exact(i, b)
        if x.free_symbols or y.free_symbols:
            return _sign_or_none(sympy.expand(x - y))
        return compare(x, y)

    # -- logits: ALiBi's bias and the soft-cap ------------------------------------
    @property
    def logit_step(self) -> str:
        """The last step before the softmax: capped, biased or scaled."""
        return "capped" if self.softcap is not None else "biased" if self.alibi is not None else "scaled"

    def bias(self, i: int, j: int) -> sympy.Expr:
        """ALiBi's bias −slope·(i − j) (−slope·|i − j| when symmetric)."""
        assert self.alibi is not None      # a bias step only with ALiBi
        return self.alibi.bias(i, j)

    def biased(self, i: int, j: int) -> sympy.Expr:
        """scale·scores + bias: the logit before any cap (the scaled score without ALiBi)."""
        scaled = self.scale * self.scores.exact(i, j)
        return scaled if self.alibi is None else scaled + self.bias(i, j)

    def capped(self, i: int, j: int) -> sympy.Expr:
        return capped(self.softcap, self.biased(i, j))

    def logit(self, i: int, j: int) -> sympy.Expr:
        """The value the softmax takes: capped, biased or scaled."""
        if self.softcap is not None:
            return self.capped(i, j)
        return self.biased(i, j)

    def pre_row(self, i: int) -> list | None:
        """Row i's logits before the cap as fmpq, when scale, scores and slope are rational."""
        if i not in self._pre_rows:
            row = None
            slope = None if self.alibi is None else self.alibi.slope_rational
            if self.scores.rational is not None and self.scale_rational is not None and \
                    (self.alibi is None or slope is not None):
                s, scores = self.scale_rational, self.scores.rational
                row = [scores[i, j] * s for j in range(self.m)]
                if self.alibi is not None and slope is not None:
                    row = [x - slope * self.alibi.distance(i, j) for j, x in enumerate(row)]
            self._pre_rows[i] = row
        return self._pre_rows[i]

    def _logit_argmax(self, i: int, allowed: tuple[int, ...]) -> int | None:
        """The first key of row i's largest logit before the cap (tanh is increasing)."""
        row = self.pre_row(i)
        if row is not None:
            best = allowed[0]
            for j in allowed[1:]:
                if row[j] > row[best]:
                    best = j
            return best
        best = allowed[0]
        for j in allowed[1:]:
            x, y = self.biased(i, j), self.biased(i, best)
            c = _sign_or_none(sympy.expand(x - y)) if self.symbolic else compare(x, y)
            if c is None:
                return None
            if c > 0:
                best = j
        return best

    def _logit_balls(self, step: str, i: int, prec: int) -> list:
        """Row i of bias, biased or capped as arb balls."""
        m = self.m
        if step == "bias":
            assert self.alibi is not None  # a bias step only with ALiBi
            slope = self.alibi.slope_rational
            s = flint.arb(slope) if slope is not None else to_arb(self.alibi.slope, prec)
            return [-s * self.alibi.distance(i, j) for j in range(m)]
        if step == "biased":
            row = self.pre_row(i)
            if row is not None:
                return [flint.arb(x) for x in row]
            scaled = self.balls("scaled", i, prec)
            if self.alibi is None:
                return scaled
            bias = self.balls("bias", i, prec)
            return [a + b for a, b in zip(scaled, bias)]
        if step == "capped":
            c = to_arb(self.softcap, prec)
            return [c * (x / c).tanh() for x in self.balls("biased", i, prec)]
        raise ValueError(step)

    def _known_logits(self, step: str, i: int) -> list:
        """known_row for the logit steps and masked/shifted of a problem with them."""
        m, row = self.m, self.pre_row(i)
        slope = None if self.alibi is None else self.alibi.slope_rational
        if step == "bias":
            return [None] * m if slope is None or self.alibi is None else \
                [-slope * self.alibi.distance(i, j) for j in range(m)]
        if step == "biased":
            return list(row) if row is not None else [None] * m
        if step == "capped":       # tanh(0) = 0: the only rational value known
            return [flint.fmpq(0) if row is not None and row[j] == 0 else None for j in range(m)]
        if step == "masked":
            known = self._known_logits(self.logit_step, i)
        else:   # shifted
            top = self.top_group(i)
            r = self.rows[i].argmax
            if row is not None and self.softcap is None and r is not None:
                known = [x - row[r] for x in row]
            else:
                known = [flint.fmpq(0) if j in top else None for j in range(m)]
        if self.mask is not None:
            known = [x if self.is_allowed(i, j) else NEG_INF for j, x in enumerate(known)]
        return known

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
    def open_rows(self) -> tuple[int, ...]:
        """Rows whose maximum the symbols leave undecided (exp is e^scaled there)."""
        return tuple(i for i, plan in enumerate(self.rows) if plan.argmax is None)

    def is_allowed(self, i: int, j: int) -> bool:
        return self.mask is None or bool(self.mask[i, j])

    # -- exact entries (SymPy) ------------------------------------------------
    def delta(self, i: int, j: int) -> sympy.Expr:
        """scores[i, j] − scores[i, argmax], exactly (the score itself in an open row)."""
        r = self.rows[i].argmax
        if r is None:
            return self.scores.exact(i, j)
        if self.scores.rational is not None:
            return fmpq_to_sympy(self.scores.rational[i, j] - self.scores.rational[i, r])
        return sympy.expand(self.scores.exact(i, j) - self.scores.exact(i, r))

    def shifted(self, i: int, j: int) -> sympy.Expr:
        if not self.is_allowed(i, j):
            return sympy.S.NegativeInfinity
        if self.rows[i].argmax is None:  # the maximum stays a symbolic Max
            if not self.plain:
                return self.logit(i, j) - sympy.Max(*[self.logit(i, k) for k in self.rows[i].allowed])
            scaled = [self.scale * self.scores.exact(i, k) for k in self.rows[i].allowed]
            return self.scale * self.scores.exact(i, j) - sympy.Max(*scaled)
        return self.exponent(i, j)

    def exponent(self, i: int, j: int) -> sympy.Expr:
        """The power of e in exp[i, j]: the shifted score (the scaled one in an open row)."""
        if self.plain:
            return self.scale * self.delta(i, j)
        r = self.rows[i].argmax
        if r is None:
            return self.logit(i, j)
        if j in self.top_group(i):
            return sympy.S.Zero
        row = self.pre_row(i)
        if row is not None and self.softcap is None:
            return fmpq_to_sympy(row[j] - row[r])
        # tied keys share one exact form: their exponentials are then the same expression
        j = next(g[0] for g in self.groups(i).values() if j in g)
        if self.softcap is None:
            return sympy.expand(self.biased(i, j) - self.biased(i, r))
        return self.capped(i, j) - self.capped(i, r)

    def _check_power_sizes(self) -> None:
        """Refuse a Σ q·log b scale whose largest e^(scale·Δ) = Π b^(qΔ) is too long to build."""
        worst, where = 0, (0, 0)
        for i, plan in enumerate(self.rows):
            if plan.argmax is None:
                continue
            row = self._integer_row(i)
            top = row[plan.argmax]
            far = max(plan.allowed, key=lambda j: abs(row[j] - top))
            if abs(row[far] - top) > worst:
                worst, where = abs(row[far] - top), (i, far)
        if worst:
            terms = self._row_terms(*where)
            assert terms is not None       # a Σ q·log b scale times rational scores
            if power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{where[0]}, {where[1]}]")

    def exp(self, i: int, j: int) -> sympy.Expr:
        """e^shifted; in an open row e^scaled, which gives the same weights.

        SymPy turns e^(q·log b) into b^q (a problem where that is too long
        was refused when the engine was made)."""
        if not self.is_allowed(i, j):
            return sympy.S.Zero
        exponent = self.exponent(i, j)
        if self._logs_possible and self._scale_logs is None and exponent.has(sympy.log):
            terms = log_terms(exponent)      # logs in the scores: checked entry by entry
            if terms is not None and power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{i}, {j}]")
        return sympy.exp(exponent)

    def sink_exponent(self, i: int) -> sympy.Expr:
        """The sink's shifted logit, sink − scale·scores[i, r] (the sink itself in an open
        row, where exp is e^scaled)."""
        r = self.rows[i].argmax
        if r is None:
            return self.sink
        if not self.plain:
            return self.sink - self.logit(i, r)
        return self.sink - self.scale * self.scores.exact(i, r)

    def sink_exp(self, i: int) -> sympy.Expr:
        """The sink's term of row i's softmax denominator (0 without a sink)."""
        return sympy.S.Zero if self.sink is None else sympy.exp(self.sink_exponent(i))

    def row_sum(self, i: int) -> sympy.Expr:
        if i not in self._row_sums:
            self._row_sums[i] = sympy.Add(*[self.exp(i, j) for j in self.rows[i].allowed],
                                          self.sink_exp(i))
        return self._row_sums[i]

    def weight(self, i: int, j: int) -> sympy.Expr:
        return self.exp(i, j) / self.row_sum(i)

    def output(self, i: int, c: int) -> sympy.Expr:
        numerator = sympy.Add(*[self.V.exact(j, c) * self.exp(i, j) for j in self.rows[i].allowed])
        return numerator / self.row_sum(i)

    # -- exact algebraic values, by Lindemann–Weierstrass ---------------------
    def groups(self, i: int) -> dict[Hashable, list[int]]:
        """Allowed keys of row i grouped by equal shifted score (one group if scale = 0)."""
        if i not in self._groups:
            groups: dict[Hashable, list[int]] = {}
            if not self.plain:
                self._groups[i] = self._logit_groups(i)
                return self._groups[i]
            if self.scale_sign == 0:
                groups[0] = list(self.rows[i].allowed)
            elif self._score_ints is not None:  # equal scores, equal shifted scores
                row = self._score_ints[i]           # (Python ints: hashing an fmpq is slow)
                for j in self.rows[i].allowed:
                    members = groups.get(row[j])
                    if members is None:
                        groups[row[j]] = [j]
                    else:
                        members.append(j)
            elif self.symbolic:  # only structurally equal scores are known to tie
                for j in self.rows[i].allowed:
                    groups.setdefault(sympy.expand(self.scores.exact(i, j)), []).append(j)
            else:
                for j in self.rows[i].allowed:
                    key: Hashable = self._canonical_key(groups, self.delta(i, j))
                    groups.setdefault(key, []).append(j)
            self._groups[i] = groups
        return self._groups[i]

    def _logit_groups(self, i: int) -> dict[Hashable, list[int]]:
        """Allowed keys grouped by equal logit before the cap (equal after it too)."""
        groups: dict[Hashable, list[int]] = {}
        row = self.pre_row(i)
        r = self.rows[i].argmax
        for j in self.rows[i].allowed:
            if row is not None:
                key: Hashable = (int(row[j].p), int(row[j].q))
            elif self.symbolic or r is None:
                key = sympy.expand(self.biased(i, j))
            else:
                key = self._canonical_key(groups, sympy.expand(self.biased(i, j) - self.biased(i, r)))
            groups.setdefault(key, []).append(j)
        return groups

    def top_group(self, i: int) -> frozenset[int]:
        """The keys of row i whose shifted score is exactly 0 (e^0 = 1)."""
        if i not in self._top:
            r = self.rows[i].argmax
            self._top[i] = frozenset() if r is None else frozenset(
                next(g for g in self.groups(i).values() if r in g))
        return self._top[i]

    def powers(self, i: int) -> dict[int, flint.fmpq | sympy.Expr] | None:
        """Row i's exponentials as exact algebraic numbers, when every one is
        e^(Σ q·log b) = Π b^q within the size budget ({key: fmpq or SymPy
        number} over the allowed keys); None otherwise."""
        if i not in self._powers:
            self._powers[i] = (self._row_powers(i) if self._logs_possible and self.sink is None
                               else None)
        return self._powers[i]

    def _row_powers(self, i: int) -> dict[int, flint.fmpq | sympy.Expr] | None:
        r = self.rows[i].argmax
        if r is None:
            return None
        values: dict[int, flint.fmpq | sympy.Expr] = {}
        for j in self.rows[i].allowed:
            terms = self._row_terms(i, j)
            if terms is None:
                return None
            if power_digits(terms) > EXACT_POWER_DIGITS:
                raise _too_big(terms, f"exp[{i}, {j}]")
            values[j] = _power(terms)
        return values

    def _row_terms(self, i: int, j: int) -> LogTerms | None:
        """scale·Δ of entry (i, j) as Σ q·log b, or None."""
        if self._scale_logs is not None and self.scores.rational is not None:
            r = self.rows[i].argmax
            delta = fmpq_to_sympy(self.scores.rational[i, j] - self.scores.rational[i, r])
            return tuple((q * delta, b) for q, b in self._scale_logs if delta)
        return log_terms(self.exponent(i, j))

    def softmax_is_rational(self, i: int) -> bool:
        """True when every allowed key of row i ties (and the sink with them), so its
        weights are 1/count."""
        if self.plain and self.sink is None and self._score_ints is not None and i not in self._groups:
            row, allowed = self._score_ints[i], self.rows[i].allowed   # no groups needed:
            values = row if len(allowed) == self.m else [row[j] for j in allowed]
            return self.scale_sign == 0 or min(values) == max(values)  # one score, one group
        return len(self.groups(i)) == 1 and self.sink_group(i) != "alone"

    def _denominator_count(self, i: int) -> int:
        """The terms of a fully tied row's denominator: its keys, and the sink."""
        return len(self.rows[i].allowed) + (self.sink is not None)

    def sink_group(self, i: int) -> Hashable | None:
        """The group of row i whose exponent the sink's equals, "alone" when none does;
        None without a sink (decided exactly; symbols: only a structural tie)."""
        if self.sink is None:
            return None
        if i not in self._sink_groups:
            found: Hashable = "alone"
            c = self.sink_exponent(i)
            for key, members in self.groups(i).items():
                d = self.exponent(i, members[0])
                same = sympy.expand(c - d) == 0 if (self.symbolic or self.rows[i].argmax is None) \
                    else equal(c, d)
                if same:
                    found = key
                    break
            self._sink_groups[i] = found
        return self._sink_groups[i]

    def _canonical_key(self, groups: dict, value: sympy.Expr) -> sympy.Expr:
        """The group key equal to ``value`` (decided exactly), or ``value`` itself; a 64-bit
        ball first rules out the groups it cannot equal (an exact equal() costs a SymPy expand)."""
        ball = self._key_ball(value)
        for existing in groups:
            other = self._key_ball(existing)
            if (ball is None or other is None or other.overlaps(ball)) and equal(existing, value):
                return existing
        return value

    def _key_ball(self, value: sympy.Expr) -> flint.arb | None:
        if value not in self._key_balls:
            try:
                self._key_balls[value] = to_arb(value, 64)
            except CertificationError:      # a function the balls do not know: equal() decides
                self._key_balls[value] = None
        return self._key_balls[value]

    def algebraic_value(self, step: str, i: int, j: int) -> sympy.Expr | None:
        """The exact value of a softmax-side entry when the exponentials cancel, else None.

        With algebraic inputs (``self.algebraic``), None means the entry is
        transcendental, so no rounding boundary can stop the precision loop.
        """
        if step in ("exp", "weights") and not self.is_allowed(i, j):
            return sympy.S.Zero
        powers = self.powers(i)
        if powers is not None:
            return self._value_from_powers(step, i, j, powers)
        groups = self.groups(i)
        if step == "exp":
            return sympy.S.One if j in self.top_group(i) else None
        tied = self.softmax_is_rational(i)
        if step == "row_sum":
            return sympy.Integer(self._denominator_count(i)) if tied else None
        if step == "weights":
            return sympy.Rational(1, self._denominator_count(i)) if tied else None
        if step == "output":
            return self._output_if_algebraic(i, j, groups)
        raise ValueError(step)

    def _value_from_powers(self, step: str, i: int, j: int, powers: dict) -> sympy.Expr:
        """A softmax entry from the row's exact exponentials b^q."""
        if step == "exp":
            return _as_sympy(powers[j])
        known = self.known_row(step, i)[j]
        if known is not None:
            return fmpq_to_sympy(known)
        total = sympy.Add(*[_as_sympy(v) for v in powers.values()])
        if step == "row_sum":
            return total
        if step == "weights":
            return _as_sympy(powers[j]) / total
        if step == "output":
            return sympy.Add(*[self.V.exact(k, j) * _as_sympy(v) for k, v in powers.items()]) / total
        raise ValueError(step)

    def _output_if_algebraic(self, i: int, c: int, groups: dict) -> sympy.Expr | None:
        value = None
        sink = self.sink_group(i)
        if sink == "alone":
            value = sympy.S.Zero      # the sink's own group: one member whose value is 0
        for key, members in groups.items():
            extra = 1 if key == sink else 0    # the sink in this group, with value 0
            if self.V.rational is not None:
                total = sum((self.V.rational[j, c] for j in members), flint.fmpq(0))
                mean: sympy.Expr = fmpq_to_sympy(total / (len(members) + extra))
            else:
                mean = sympy.Add(*[self.V.exact(j, c) for j in members]) / (len(members) + extra)
            if value is None:
                value = mean
            elif not equal(value, mean):
                return None
        return value

    # -- rationals known without any ball ----------------------------------------
    def known_integers(self, step: str, i: int) -> tuple[list, int] | None:
        """Row i of a rational step as integers over one denominator (numerators, den > 0;
        NEG_INF where masked), for the hot loops over whole steps; None when the step is
        not such a step here (then :meth:`known_row` says what is known).  The fractions
        are not reduced: the denominator is the step's, shared by every row."""
        if step in self.extra:
            return None
        if step == "scores" and self._score_ints is not None and self._score_den is not None:  # held
            return self._score_ints[i], int(self._score_den)
        matrix = self.matrix(step)
        if matrix is not None:
            if matrix.rational is None:
                return None
            key = ("integers", step)
            if key not in self._integer_rows:
                numerators, den = matrix.rational.numer_denom()
                flat, cols = [int(x) for x in numerators.entries()], matrix.cols
                self._integer_rows[key] = ([flat[r * cols:(r + 1) * cols] for r in range(matrix.rows)],
                                           int(den))
            rows, den = self._integer_rows[key]
            return rows[i], den
        if not self.plain or step not in ("scaled", "masked", "shifted") or self._score_ints is None \
                or self.scale_rational is None or (step == "shifted" and self.rows[i].argmax is None):
            return None
        s, row = self.scale_rational, self._integer_row(i)
        p, den = int(s.p), int(s.q) * int(self._integer_den())
        top = row[self._argmax(i)] if step == "shifted" else 0
        if step == "scaled" or self.mask is None:
            return [(x - top) * p for x in row], den
        values: list = [NEG_INF] * self.m
        for j in self.rows[i].allowed:
            values[j] = (row[j] - top) * p
        return values, den

    def known_row(self, step: str, i: int) -> list:
        """Row i of a step: an fmpq where the exact value is a known rational,
        NEG_INF where masked, None where a ball must decide."""
        if step in self.extra:
            return self.extra[step].known_row(i)
        matrix = self.matrix(step)
        if matrix is not None:
            if matrix.rational is not None:
                return [matrix.rational[i, j] for j in range(matrix.cols)]
            return [None] * matrix.cols
        m, allowed = self.m, self.is_allowed
        if step in ("bias", "biased", "capped") or (not self.plain and step in ("masked", "shifted")):
            return self._known_logits(step, i)
        if step in ("scaled", "masked", "shifted"):
            row: list = [None] * m
            if self.scale_rational is not None and self.scores.rational is not None:
                s, scores = self.scale_rational, self.scores.rational
                top = scores[i, self.rows[i].argmax] if step == "shifted" else flint.fmpq(0)
                row = [(scores[i, j] - top) * s for j in range(m)]
            elif step == "shifted":
                row = [flint.fmpq(0) if j in self.top_group(i) else None for j in range(m)]
            if step != "scaled" and self.mask is not None:
                row = [x if allowed(i, j) else NEG_INF for j, x in enumerate(row)]
            return row
        powers = self.powers(i)
        if powers is not None:
            return self._known_from_powers(step, i, powers)
        if step == "output":
            return [None] * self.d_v
        count = self._denominator_count(i)
        tied = self.softmax_is_rational(i)
        if step == "row_sum":
            return [flint.fmpq(count) if tied else None]
        zero = flint.fmpq(0)
        if step == "exp":
            row = [None] * m
            for j in self.top_group(i):
                row[j] = flint.fmpq(1)
        elif step == "weights":
            row = [flint.fmpq(1, count) if tied else None] * m
        else:
            raise ValueError(step)
        if self.mask is not None:
            row = [x if allowed(i, j) else zero for j, x in enumerate(row)]
        return row

    def _known_from_powers(self, step: str, i: int, powers: dict) -> list:
        """known_row from the row's exact exponentials: rationals where they are."""
        zero, m = flint.fmpq(0), self.m
        rational = all(isinstance(v, flint.fmpq) for v in powers.values())
        total = sum(powers.values(), zero) if rational else None
        if step == "exp":
            return [powers[j] if isinstance(powers.get(j), flint.fmpq) else
                    (zero if j not in powers else None) for j in range(m)]
        if step == "row_sum":
            return [total]
        if step == "weights":
            return [zero if j not in powers else (powers[j] / total if total is not None else None)
                    for j in range(m)]
        if step == "output":
            if total is None or self.V.rational is None:     # total is None unless rational
                return [None] * self.d_v
            V = self.V.rational
            return [sum((w * V[j, c] for j, w in powers.items()), zero) / total
                    for c in range(self.d_v)]
        raise ValueError(step)

    # -- arb enclosures, row by row --------------------------------------------
    def balls(self, step: str, i: int, prec: int) -> list:
        """Row i of a step as arb balls at ``prec`` bits (NEG_INF where masked)."""
        key = (step, i, prec)
        if key not in self._balls:
            with precision(prec):
                self._balls[key] = self._compute_row(step, i, prec)
        return self._balls[key]

    def prefetch(self, step: str, rows: list[int], prec: int) -> None:
        """Compute many rows of a step at once where that is cheaper (the output:
        one arb matrix product instead of one per row)."""
        missing = [i for i in rows if (step, i, prec) not in self._balls]
        if step != "output" or len(missing) < 2:
            return
        weights = [self.balls("weights", i, prec) for i in missing]
        with precision(prec):
            V = self._V_balls(prec)
            integer = self._balls.get(("V_int", -1, prec))
            if integer is not None:                  # W·(N/den) = (W·N)/den
                product = (flint.arb_mat(weights) * integer[0]) / integer[1]
            else:
                product = flint.arb_mat(weights) * V
        for k, i in enumerate(missing):
            self._balls[(step, i, prec)] = [product[k, c] for c in range(self.d_v)]

    def matrix(self, step: str) -> ExactMatrix | None:
        """The exact matrix behind an input or a projection step, else None."""
        fixed = {"Q": self.Q, "K": self.K, "V": self.V, "scores": self.scores, **self.rotated}
        return fixed.get(step) or self.inputs.get(step)

    def _scale_ball(self, prec: int) -> flint.arb:
        if self.scale_rational is not None:
            return flint.arb(self.scale_rational)
        return to_arb(self.scale, prec)

    def _compute_row(self, step: str, i: int, prec: int) -> list:
        m = self.m
        if step in self.extra:
            return self.extra[step].balls(i, prec)
        matrix = self.matrix(step)
        if matrix is not None:
            return [matrix.ball(i, j, prec) for j in range(matrix.cols)]
        if step in ("bias", "biased", "capped"):
            return self._logit_balls(step, i, prec)
        if not self.plain and step in ("masked", "shifted"):
            row = self.balls(self.logit_step, i, prec)
            if step == "shifted":
                r, top = self._argmax(i), self.top_group(i)
                row = [flint.arb(0) if j in top else x - row[r] for j, x in enumerate(row)]
            return [x if self.is_allowed(i, j) else NEG_INF for j, x in enumerate(row)]
        if step in ("scaled", "shifted") and self._score_ints is not None \
                and self.scale_rational is not None and self.rows[i].argmax is not None:
            return self._integer_score_balls(step, i)
        if step in ("scaled", "shifted") and self.scores.rational is not None:
            exact = self.known_row(step, i)  # exact rationals when the scale is rational
            if self.scale_rational is not None:
                return [x if x is NEG_INF else flint.arb(x) for x in exact]
            s = self._scale_ball(prec)
            scores = self.scores.rational
            top = scores[i, self.rows[i].argmax] if step == "shifted" else flint.fmpq(0)
            return [s * flint.arb(scores[i, j] - top) if exact[j] is not NEG_INF else NEG_INF
                    for j in range(m)]
        if step == "scaled":
            s = self._scale_ball(prec)
            return [s * self.scores.ball(i, j, prec) for j in range(m)]
        if step == "masked":
            row = self.balls("scaled", i, prec)
            return [row[j] if self.is_allowed(i, j) else NEG_INF for j in range(m)]
        if step == "shifted":
            s = self._scale_ball(prec)
            top = self.scores.ball(i, self._argmax(i), prec)
            return [s * (self.scores.ball(i, j, prec) - top) if self.is_allowed(i, j) else NEG_INF
                    for j in range(m)]
        if step == "exp":
            if self._score_ints is not None and self.scale_rational is not None \
                    and self.rows[i].argmax is not None:
                return self._integer_score_exps(i, prec)
            return [x.exp() if x is not NEG_INF else flint.arb(0)
                    for x in self.balls("shifted", i, prec)]
        if step == "row_sum":
            total = sum(self.balls("exp", i, prec), flint.arb(0))
            if self.sink is not None:
                total += to_arb(self.sink_exponent(i), prec).exp()
            return [total]
        if step == "weights":
            total = self.balls("row_sum", i, prec)[0]
            return [e / total for e in self.balls("exp", i, prec)]
        if step == "output":
            w = flint.arb_mat([self.balls("weights", i, prec)])
            product = w * self._V_balls(prec)
            return [product[0, c] for c in range(self.d_v)]
        raise ValueError(step)

    def _integer_score_balls(self, step: str, i: int) -> list:
        """Row i of scaled or shifted from the integer scores: (N_j − N_top)·(s/den) as one
        arb_mat scaling of Python ints (no fmpq per entry; an exact 0 stays exact)."""
        row = self._integer_row(i)
        top = row[self._argmax(i)] if step == "shifted" else 0
        factor = flint.arb(self._integer_scale())
        balls = (flint.arb_mat([[x - top for x in row]]) * factor).entries()
        if step == "shifted" and self.mask is not None:
            allowed = self.is_allowed
            return [x if allowed(i, j) else NEG_INF for j, x in enumerate(balls)]
        return balls

    def _integer_score_exps(self, i: int, prec: int) -> list:
        """Row i of exp as e^((N_j − N_top)·s/den): the integer differences repeat across
        rows (decimal inputs give a few thousand distinct ones for 262,144 entries at
        n = 512), so each exponential is computed once per precision and shared."""
        key = ("exp of score differences", -1, prec)    # dropped by keep_only with the rest
        cache = self._balls.get(key)
        if cache is None:
            cache = self._balls[key] = {}
        factor = flint.arb(self._integer_scale())
        row = self._integer_row(i)
        top = row[self._argmax(i)]
        allowed = None if self.mask is None else self.is_allowed
        zero = flint.arb(0)
        out = []
        for j, n in enumerate(row):
            if allowed is not None and not allowed(i, j):
                out.append(zero)
                continue
            e = cache.get(n - top)
            if e is None:
                e = cache[n - top] = (factor * (n - top)).exp()
            out.append(e)
        return out

    def fixed_exps(self, i: int, bits: int, fine_bits: int) -> FixedRow | None:
        """Row i of exp in fixed point: integers E_j with E_j ≤ e^shifted[i, j]·2^bits < E_j + 1
        (0 where masked), when the scores are integers over one denominator and the scale
        is rational (every problem typed in decimals); None otherwise.  Keys whose E_j
        has fewer than ``fine_bits`` bits also get a finer floor (see :class:`FixedRow`).

        The exponents repeat across rows (see :meth:`_integer_score_exps`), so each e^t is
        computed once, in arb, and its floor is taken only when the ball proves it
        (:meth:`prepare_fixed` computes those of many rows in one batch)."""
        if not self._fixed_applies(i):
            return None
        key = (i, bits, fine_bits)
        cache, fine_cache = self._fixed_caches(bits, fine_bits)
        if key in self._fixed_rows:
            return self._fixed_rows[key]
        self._fixed_rows[key] = None                     # until it is proved below
        gaps = self._row_gaps(i)
        self._fill_fixed(gaps, bits, fine_bits)
        values = [cache[g] for g in gaps]
        if None in values:                               # a floor no ball decided
            return None
        plan = self.rows[i]
        if len(gaps) == self.m:
            exps = values
        else:
            exps = [0] * self.m
            for j, e in zip(plan.allowed, values):
                exps[j] = e
        fine = {j: fine_cache[g] for j, g in zip(plan.allowed, gaps) if g in fine_cache} \
            if fine_cache else {}
        terms = len(plan.allowed)
        total = sum(exps)
        if self.sink is not None:
            value = _fixed_exps([self.sink_exponent(i)], bits, 0)[0]
            if value is None:
                return None
            total, terms = total + value[0], terms + 1
        fixed = self._fixed_rows[key] = FixedRow(exps, total, terms, fine)
        self._fixed_gaps[i] = gaps
        return fixed

    def prepare_fixed(self, rows, bits: int, fine_bits: int) -> None:
        """Every distinct e^t the given rows need, floored in one batch (one precision switch
        instead of one per row: setting flint's precision is not free)."""
        gaps: set[int] = set()
        for i in rows:
            if self._fixed_applies(i):
                gaps.update(self._row_gaps(i))
        self._fixed_caches(bits, fine_bits)
        self._fill_fixed(gaps, bits, fine_bits)

    def _fixed_applies(self, i: int) -> bool:
        return (self.plain and self._score_ints is not None and self.scale_rational is not None
                and self.rows[i].argmax is not None and "exp" not in self.extra
                and "weights" not in self.extra
                and (self.sink is None or self.sink.is_Rational))   # log 2 could make a value rational

    def _fixed_caches(self, bits: int, fine_bits: int) -> tuple[dict, dict]:
        """The floors by score gap at this precision; one precision is kept (memory: 20 MB of
        rows at n = 512), as keep_only does for the balls."""
        if self._fixed_precision != (bits, fine_bits):
            self._fixed_precision = (bits, fine_bits)
            for caches in (self._fixed_rows, self._fixed, self._fixed_fine, self._fixed_fmpz,
                           self._fixed_gaps):
                caches.clear()
        return (self._fixed.setdefault((bits, fine_bits), {}),
                self._fixed_fine.setdefault((bits, fine_bits), {}))

    def _row_gaps(self, i: int) -> list[int]:
        """N_j − N_top over row i's allowed keys (the integer score differences)."""
        plan, row = self.rows[i], self._integer_row(i)
        top = row[self._argmax(i)]
        if len(plan.allowed) == self.m:
            return [x - top for x in row]
        return [row[j] - top for j in plan.allowed]

    def _fill_fixed(self, gaps, bits: int, fine_bits: int) -> None:
        """Floor the e^(scale·gap/den) not yet cached (None where no ball decides it)."""
        cache, fine_cache = self._fixed_caches(bits, fine_bits)
        missing = sorted(set(gaps).difference(cache))
        if not missing:
            return
        factor = self._integer_scale()
        for gap, value in zip(missing, _fixed_exps([factor * g for g in missing], bits, fine_bits)):
            cache[gap] = None if value is None else value[0]
            if value is not None and value[2]:
                fine_cache[gap] = value[1:]

    def fixed_exps_fmpz(self, i: int, bits: int, fine_bits: int) -> list[flint.fmpz]:
        """:meth:`fixed_exps` of row i as fmpz (made once per distinct exponent: building an
        fmpz_mat from fmpz is about three times faster than from Python ints)."""
        self.fixed_exps(i, bits, fine_bits)                 # the row and its score gaps
        exps, cache = self._fixed[bits, fine_bits], self._fixed_fmpz
        for gap in set(self._fixed_gaps[i]).difference(cache):
            cache[gap] = flint.fmpz(exps[gap])
        values = [cache[g] for g in self._fixed_gaps[i]]
        if len(values) == self.m:
            return values
        out = [flint.fmpz(0)] * self.m
        for j, z in zip(self.rows[i].allowed, values):
            out[j] = z
        return out

    def _V_balls(self, prec: int) -> flint.arb_mat:
        key = ("V", -1, prec)
        if key not in self._balls:
            if self.V.rational is not None:
                self._balls[key] = flint.arb_mat(self.V.rational)
                # the same matrix as integers over one denominator: arb_mat products with
                # integer entries are about twice as fast (prefetch)
                numerators, den = self.V.rational.numer_denom()
                self._balls[("V_int", -1, prec)] = (flint.arb_mat(numerators), int(den))
            else:
                self._balls[key] = flint.arb_mat(
                    [[self.V.ball(j, c, prec) for c in range(self.d_v)] for j in range(self.m)])
        return self._balls[key]

    def keep_only(self, prec: int) -> None:
        """Drop the cached balls of every other precision (bounded memory at n = 512)."""
        for key in [k for k in self._balls if k[2] != prec]:
            del self._balls[key]


#: the finer floors of tiny e^t go at most this many times ``bits`` further down (smaller
#: ones are left to the arb path)
_FINE_REACH = 8


def _fixed_exps(exponents: list[flint.fmpq | sympy.Expr], bits: int,
                fine_bits: int) -> list[tuple[int, int, int] | None]:
    """(E, M, s) for each exponent t: E = ⌊e^t·2^bits⌋ and the finer M = ⌊e^t·2^(bits+s)⌋,
    with the shift s ≥ 0 that gives M about ``fine_bits`` bits (s = 0 and M = E when E
    has them already; M = 0 for e^t below 2^−(bits·(1 + _FINE_REACH))).  Each floor is
    proved by an arb ball (one precision context per batch); None where two precisions
    do not decide it.  E = ⌊M/2^s⌋ exactly (floors of floors)."""
    found: list[tuple[int, int, int] | None] = [None] * len(exponents)
    todo = []
    reach = bits * (1 + _FINE_REACH)
    for k, t in enumerate(exponents):
        if isinstance(t, flint.fmpq) and t == 0:
            found[k] = (1 << bits, 1 << bits, 0)
        elif isinstance(t, flint.fmpq) and t < -reach:   # e^t < e^-reach < 2^-reach
            found[k] = (0, 0, 0)
        else:
            todo.append(k)
    unit = flint.fmpz(1) << bits
    for prec in (bits + 64, 2 * bits + 128):
        with precision(prec):
            for k in todo:
                t = exponents[k]
                x = (flint.arb(t) if isinstance(t, flint.fmpq) else to_arb(t, prec)).exp()
                floor = (x * unit).floor().unique_fmpz()
                if floor is None:
                    continue
                e = int(floor)
                if e.bit_length() >= fine_bits:         # the common case: E is fine already
                    found[k] = (e, e, 0)
                    continue
                man, exp = x.mid().man_exp()            # x ≈ 2^(exp + bits of man − 1)
                shift = min(max(0, fine_bits - bits - int(exp) - int(man).bit_length()),
                            reach - bits)
                fine = (x * (flint.fmpz(1) << (bits + shift))).floor().unique_fmpz()
                if fine is not None:
                    found[k] = (int(fine) >> shift, int(fine), shift)
        todo = [k for k in todo if found[k] is None]
        if not todo:
            break
    return found


ExactEntry = Callable[[int, int], sympy.Expr]
