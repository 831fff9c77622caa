"""arb enclosures of every step, row by row, at the precision asked for.

Each row of a step is computed once per precision and cached (``keep_only`` drops the
others); exact rationals stay exact balls, and rational scores take integer fast paths
(one arb_mat scaling per row, one exponential per distinct score gap).
"""

from __future__ import annotations

import flint

from symattn.engine.algebraic import AlgebraicValues
from symattn.numbers.certify import to_arb
from symattn.numbers.masked import NEG_INF
from symattn.numbers.precision import precision



class Balls(AlgebraicValues):
    """Row i of any step as arb balls (:meth:`balls`)."""

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
        if step in self.logit_steps:
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

    def _logit_balls(self, step: str, i: int, prec: int) -> list:
        """Row i of bias, biased or the transformed logits (capped) as arb balls."""
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
        if self.transform is not None and step == self.transform.step:
            return self.transform.balls(self.balls("biased", i, prec), prec)
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
