"""The fixed-point fast path of the weights and the output (symattn.engine.fixed).

Two kinds of checks:

* the error analysis itself, on synthetic fixed-point rows: every decimal the
  fast path gives must be the rounding of *every* value its integers allow
  (both ends of the weight's interval, the extreme corners of the output's),
  computed with Python fractions; crafted rows put the value next to a rounding
  boundary, where the fast path must leave the entry alone or still be right;
* whole problems against an independent mpmath computation at 90 digits
  (masks, a sink, a negative scale, cross-attention), with the fast path shown
  to decide almost every entry (so the comparison tests it, not the arb path).
"""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import mpmath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symattn as sa
from symattn.numbers.certify import Rounding, round_ratio
from symattn.engine.engine import FixedRow
from symattn.engine.fixed import fixed_point_decimals, working_bits


def _ratio_rounding(x: Fraction, rounding: Rounding):
    return round_ratio(x.numerator, x.denominator, rounding)


class _Rows:
    """An engine stand-in that hands out given fixed-point rows (the analysis needs only
    E_j ≤ e_j·2^F < E_j + 1 and S ≤ s·2^F < S + k; F itself does not enter)."""

    def __init__(self, rows: list[FixedRow], V: list[list[int]] | None = None, den: int = 1):
        self._rows, self.m = rows, len(rows[0].exps)
        if V is not None:
            self.V, self._V, self._den = _RationalMatrix(V, den), V, den

    def fixed_exps(self, i: int, bits: int, fine_bits: int) -> FixedRow:
        return self._rows[i]

    def prepare_fixed(self, rows, bits: int, fine_bits: int) -> None:
        pass

    def softmax_is_rational(self, i: int) -> bool:
        return False

    algebraic = True

    def algebraic_value(self, step: str, i: int, c: int) -> Fraction | None:
        """A constant value column's output is that constant; any other is transcendental
        in these rows (their exponentials are distinct)."""
        column = {Fraction(row[c]) for row in self._V}
        return column.pop() / self._den if len(column) == 1 else None

    def fixed_exps_fmpz(self, i: int, bits: int, fine_bits: int, shift: int = 0) -> list[flint.fmpz]:
        return [flint.fmpz(e >> shift) for e in self._rows[i].exps]


class _RationalMatrix:
    def __init__(self, numerators: list[list[int]], den: int):
        self.is_rational = True
        self.rational = flint.fmpq_mat(flint.fmpz_mat(numerators)) / den


def _row(exps: list[int], extra: int = 0, extra_terms: int = 0) -> FixedRow:
    return FixedRow(exps, sum(exps) + extra, len(exps) + extra_terms, {})


# ---------------------------------------------------------------- weights: the analysis

def _check_weights(row: FixedRow, rounding: Rounding) -> int:
    """Every decided weight is the rounding of both ends of [E/(S + k), (E + 1)/S]."""
    decided = fixed_point_decimals(_Rows([row]), "weights", rounding, {0: list(range(len(row.exps)))})
    got = decided.get(0, {})
    for j, d in got.items():
        e, unit = row.exps[j], 1
        if j in row.fine:                       # a tiny one: M/2^s, s bits finer than E
            e, shift = row.fine[j]
            unit = 1 << shift
        low = Fraction(e, unit * (row.total + row.terms))
        high = Fraction(e + 1, unit * row.total)
        assert _ratio_rounding(low, rounding)[:2] == d[:2], (j, d)
        assert _ratio_rounding(high, rounding)[:2] == d[:2], (j, d)
        assert not d.exact
    return len(got)


def _check_exp_and_row_sum(row: FixedRow, bits: int, rounding: Rounding) -> int:
    """Every decided exponential is the rounding of both ends of [E, E + 1)/2^F, and the
    row sum of both ends of [S, S + k)/2^F."""
    engine, unit = _Rows([row]), 1 << bits
    count = 0
    for step, pairs in (("exp", [(e, 1) for e in row.exps]), ("row_sum", [(row.total, row.terms)])):
        got = fixed_point_decimals(engine, step, rounding, {0: list(range(len(pairs)))}).get(0, {})
        for j, d in got.items():
            a, spread = pairs[j]
            for end in (Fraction(a, unit), Fraction(a + spread, unit)):
                assert _ratio_rounding(end, rounding)[:2] == d[:2], (step, j, d)
        count += len(got)
    return count


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(digits=st.integers(1, 60), seed=st.integers(0, 2**32), n=st.integers(1, 30),
       spread=st.integers(0, 300), sink=st.booleans())
def test_random_exps_and_row_sums_round_like_both_ends_of_their_interval(digits, seed, n, spread, sink):
    rng = random.Random(seed)
    _, bits = working_bits(digits, n)
    unit = 1 << bits
    exps = [unit] + [rng.randrange(unit >> rng.randint(1, spread + 1), unit) for _ in range(n - 1)]
    row = _row(exps, extra=rng.randrange(0, 50 * unit) if sink else 0, extra_terms=int(sink))
    decided = _check_exp_and_row_sum(row, bits, Rounding(digits=digits))
    if spread <= 60:
        assert decided >= n - 1


@pytest.mark.parametrize("digits", [1, 3, 17, 30, 120])
def test_exps_next_to_a_rounding_boundary_are_left_or_right(digits):
    rng = random.Random(-digits)
    rounding = Rounding(digits=digits)
    _, bits = working_bits(digits, 2)
    left = 0
    for _ in range(100):
        mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
        boundary = Fraction(2 * mantissa + 1, 2 * 10 ** (digits + rng.randint(0, 20)))
        e = int(boundary * (1 << bits)) + rng.randint(-1, 0)     # [E, E + 1) holds the boundary
        row = _row([1 << bits, e])
        _check_exp_and_row_sum(row, bits, rounding)
        left += 1 not in fixed_point_decimals(_Rows([row]), "exp", rounding, {0: [1]}).get(0, {})
    assert left == 100


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(digits=st.integers(1, 60), seed=st.integers(0, 2**32), n=st.integers(1, 40),
       spread=st.integers(0, 200))
def test_random_rows_round_like_both_ends_of_their_interval(digits, seed, n, spread):
    rng = random.Random(seed)
    base = 1 << (4 * digits + 140)
    exps = [base] + [rng.randrange(base >> rng.randint(0, spread), base + 1) for _ in range(n - 1)]
    row = _row(exps, extra=rng.randrange(0, base), extra_terms=rng.randint(0, 1))
    decided = _check_weights(row, Rounding(digits=digits))
    if spread <= 60:          # all weights well inside the fixed point: nearly all decided
        assert decided >= n - 2


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(digits=st.integers(1, 60), seed=st.integers(0, 2**32), n=st.integers(2, 20))
def test_tiny_weights_from_their_finer_floors_round_like_both_ends(digits, seed, n):
    """Weights far below the fixed point's unit (E_j = 0 or a few bits) come from (M, s):
    M/2^s of the same unit, and still round like both ends of their interval."""
    rng = random.Random(seed)
    b, bits = working_bits(digits, n)
    exps, fine = [1 << bits], {}
    for j in range(1, n):
        shift = rng.randint(1, 8 * bits)
        m = rng.randrange(1 << (b + 8), 1 << (b + 40))
        exps.append(m >> shift)
        if exps[j] < 1 << b:
            fine[j] = (m, shift)
    row = FixedRow(exps, sum(exps), n, fine)
    decided = _check_weights(row, Rounding(digits=digits))
    assert decided >= n - 2


@pytest.mark.parametrize("digits", [1, 3, 17, 30, 120])
def test_weights_next_to_a_rounding_boundary_are_left_or_right(digits):
    """E/S placed within a few units of (M + 1/2)·10^t: the end check proves each decided
    one, and the ones straddling the boundary are left to the arb path."""
    rng = random.Random(digits)
    rounding = Rounding(digits=digits)
    left = 0
    for _ in range(200):
        total = rng.randrange(1 << (4 * digits + 200), 1 << (4 * digits + 201))
        mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
        places = digits + rng.randint(0, 30)                   # the weight ≈ M·10^−places
        boundary = Fraction(2 * mantissa + 1, 2 * 10 ** places)
        e = int(boundary * total) + rng.randint(-3, 3)
        exps = [e, total - e]
        row = FixedRow(exps, total, 2, {})
        _check_weights(row, rounding)                           # what is decided is right
        left += 0 not in fixed_point_decimals(_Rows([row]), "weights", rounding, {0: [0]}).get(0, {})
    assert left == 200       # each straddles its boundary: none may be decided


def test_tiny_weights_and_a_thin_row_sum_are_left_to_arb():
    rounding = Rounding(digits=30)
    # a weight below the fixed point's precision (E < 2^B)
    row = _row([1 << 400, 12345])
    got = fixed_point_decimals(_Rows([row]), "weights", rounding, {0: [0, 1]})
    assert list(got[0]) == [0]
    # a row sum too small for its term count (S < k·2^B): nothing is claimed
    row = _row([1 << 100, 1 << 100])
    assert fixed_point_decimals(_Rows([row]), "weights", rounding, {0: [0, 1]}) == {}


# ---------------------------------------------------------------- outputs: the analysis

def _output_corners(row: FixedRow, V: list[list[int]], den: int, c: int) -> list[Fraction]:
    """The output at corners of the box the integers allow (ê_j in [E_j, E_j + 1), the row
    sum the sum of the ê_j): all low, all high, and the two that push the column's sign."""
    eps = Fraction(1, 1 << 20)
    corners = []
    for pick in ("low", "high", "up", "down"):
        hats = []
        for j, e in enumerate(row.exps):
            positive = V[j][c] > 0
            high = {"low": False, "high": True, "up": positive, "down": not positive}[pick]
            hats.append(Fraction(e) + (1 - eps if high else 0))
        total = sum(hats)
        corners.append(sum(h * V[j][c] for j, h in enumerate(hats)) / (total * den))
    return corners


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(digits=st.integers(1, 45), seed=st.integers(0, 2**32), n=st.integers(1, 12),
       cols=st.integers(1, 4), den=st.sampled_from([1, 10, 100, 7]))
def test_random_outputs_round_like_the_corners_of_their_box(digits, seed, n, cols, den):
    rng = random.Random(seed)
    base = 1 << (4 * digits + 160)
    rounding = Rounding(digits=digits)
    exps = [base] + [rng.randrange(base >> rng.randint(0, 40), base + 1) for _ in range(n - 1)]
    V = [[rng.randint(-40, 40) for _ in range(cols)] for _ in range(n)]
    row = _row(exps)
    got = fixed_point_decimals(_Rows([row], V, den), "output", rounding, {0: list(range(cols))})
    for c, d in got.get(0, {}).items():
        for value in _output_corners(row, V, den, c):
            assert _ratio_rounding(value, rounding)[:2] == d[:2], (c, d, float(value))


@pytest.mark.parametrize("digits", [2, 15, 30, 90])
def test_outputs_that_cancel_or_sit_next_to_a_boundary_are_left_or_right(digits):
    rng = random.Random(digits)
    rounding = Rounding(digits=digits)
    base = 1 << (4 * digits + 200)
    left = 0
    for trial in range(100):
        if trial % 2:       # cancellation: o = (E_0 − E_1)/S is tiny next to its error
            exps = [base, base - rng.randint(1, 40)]
            V = [[1], [-1]]
        else:               # o = x/(base + x) within a few units of (M + 1/2)·10^−p
            mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
            boundary = Fraction(2 * mantissa + 1, 2 * 10 ** (digits + rng.randint(0, 5)))
            x = int(boundary * base / (1 - boundary)) + rng.randint(-3, 3)
            exps, V = [base, x], [[0], [1]]
        row = _row(exps)
        got = fixed_point_decimals(_Rows([row], V, 1), "output", rounding, {0: [0]}).get(0, {})
        for d in got.values():
            for value in _output_corners(row, V, 1, 0):
                assert _ratio_rounding(value, rounding)[:2] == d[:2]
        left += 0 not in got
    assert left == 100


def test_an_output_equal_to_its_own_decimal_is_left_to_the_exact_check():
    """A constant value column: the output is exactly that constant, a terminating decimal
    that the fixed-point enclosure contains; only the exact path may call it exact."""
    rounding = Rounding(digits=30)
    base = 1 << 400
    row = _row([base, base // 3, base // 7])
    V = [[5, 1], [5, -2], [5, 3]]
    got = fixed_point_decimals(_Rows([row], V, 2), "output", rounding, {0: [0, 1]})
    assert 0 not in got[0] and 1 in got[0]


# ---------------------------------------------------------------- whole problems vs mpmath

def _decimal_matrix(rng: random.Random, rows: int, cols: int, places: int = 1, top: int = 30):
    return [[str(Fraction(rng.randint(-top, top), 10 ** places)) for _ in range(cols)]
            for _ in range(rows)]


def _mp_reference(Q, K, V, scale: Fraction, mask, sink: Fraction | None):
    """exp (shifted by the row's largest logit), the row sum, the weights and the output by
    the definition, in mpmath at 90 digits (no fixed point: a different computation from
    symattn's)."""
    with mpmath.workdps(90):
        def mp(x):
            q = Fraction(x)
            return mpmath.mpf(q.numerator) / q.denominator
        s = mpmath.mpf(scale.numerator) / scale.denominator
        exp_rows, sums, weights, output = [], [], [], []
        for i, q in enumerate(Q):
            logits = [s * mpmath.fsum(mp(a) * mp(b) for a, b in zip(q, k)) for k in K]
            allowed = [mask is None or mask[i][j] for j in range(len(K))]
            top = max(x for x, ok in zip(logits, allowed) if ok)
            exps = [mpmath.exp(x - top) if ok else mpmath.mpf(0) for x, ok in zip(logits, allowed)]
            total = mpmath.fsum(exps) + (mpmath.exp(mp(sink) - top) if sink is not None else 0)
            w = [e / total for e in exps]
            exp_rows.append(exps)
            sums.append(total)
            weights.append(w)
            output.append([mpmath.fsum(wj * mp(v[c]) for wj, v in zip(w, V)) for c in range(len(V[0]))])
        return exp_rows, sums, weights, output


def _mp_text(x, digits: int) -> str:
    with mpmath.workdps(90):
        return mpmath.nstr(x, digits, min_fixed=-mpmath.inf, max_fixed=mpmath.inf,
                           strip_zeros=False)


def _agree(decimal, value, digits: int) -> bool:
    """The certified decimal equals the mpmath value rounded (compared as numbers, with
    the 90-digit value 10^-60 away from any boundary in these problems)."""
    with mpmath.workdps(90):
        got = mpmath.mpf(decimal.mantissa) * mpmath.mpf(10) ** decimal.exponent
        unit = mpmath.mpf(10) ** decimal.exponent
        return abs(got - value) <= unit / 2


CASES = {
    "plain": dict(n=12, m=12, d=4, scale=None, mask=None, sink=None),
    "causal": dict(n=10, m=10, d=4, scale=None, mask="causal", sink=None),
    "sink": dict(n=8, m=9, d=4, scale="1/3", mask=None, sink="7/5"),
    "negative-scale": dict(n=7, m=11, d=9, scale="-2/7", mask="random", sink=None),
    "wide-gaps": dict(n=6, m=16, d=4, scale="3", mask=None, sink="-1/2"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("digits", [7, 30])
def test_problems_agree_with_mpmath_and_take_the_fast_path(name, digits):
    case = CASES[name]
    rng = random.Random(f"{name}-{digits}")
    n, m, d = case["n"], case["m"], case["d"]
    Q, K, V = _decimal_matrix(rng, n, d), _decimal_matrix(rng, m, d), _decimal_matrix(rng, m, 3)
    mask = None
    if case["mask"] == "causal":
        mask = [[j <= i for j in range(m)] for i in range(n)]
    elif case["mask"] == "random":
        mask = [[j == i % m or rng.random() < 0.6 for j in range(m)] for i in range(n)]
    kwargs = dict(Q=Q, K=K, V=V)
    if case["scale"] is not None:
        kwargs["scale"] = case["scale"]
    if mask is not None:
        kwargs["mask"] = [[int(x) for x in row] for row in mask]
    if case["sink"] is not None:
        kwargs["sink"] = case["sink"]
    trace = sa.Trace(sa.Problem(**kwargs))
    rounding = Rounding(digits=digits)
    scale = Fraction(case["scale"]) if case["scale"] is not None else Fraction(1, 2)  # d=4: 1/√4
    if name == "negative-scale":
        scale = Fraction(-2, 7)
    sink = Fraction(case["sink"]) if case["sink"] is not None else None
    exps, sums, weights, output = _mp_reference(Q, K, V, scale, mask, sink)

    fast_e = fixed_point_decimals(trace.engine, "exp", rounding, {i: list(range(m)) for i in range(n)})
    fast_s = fixed_point_decimals(trace.engine, "row_sum", rounding, {i: [0] for i in range(n)})
    fast_w = fixed_point_decimals(trace.engine, "weights", rounding, {i: list(range(m)) for i in range(n)})
    fast_o = fixed_point_decimals(trace.engine, "output", rounding, {i: list(range(3)) for i in range(n)})
    allowed = sum(mask[i][j] if mask else 1 for i in range(n) for j in range(m))
    assert sum(len(r) for r in fast_w.values()) >= 0.9 * allowed
    assert sum(len(r) for r in fast_o.values()) >= 0.9 * 3 * n

    untied = [i for i in range(n) if not trace.engine.softmax_is_rational(i)]
    assert sorted(i for i, r in fast_s.items() if r) == untied   # a tied row's sum is exact
    got_e = trace.step("exp").decimals(rounding)
    got_s = trace.step("row_sum").decimals(rounding)
    for i in range(n):
        assert _agree(got_s[i][0], sums[i], digits)
        if i in untied:
            assert fast_s[i][0][:2] == got_s[i][0][:2]
        for j, d in fast_e.get(i, {}).items():
            assert _agree(d, exps[i][j], digits) and d[:2] == got_e[i][j][:2], (i, j, d)
    got_w = trace.step("weights").decimals(rounding)
    got_o = trace.step("output").decimals(rounding)
    for i in range(n):
        for j in range(m):
            if mask is not None and not mask[i][j]:
                assert got_w[i][j].mantissa == 0
                continue
            assert _agree(got_w[i][j], weights[i][j], digits), (i, j, got_w[i][j], _mp_text(weights[i][j], 40))
            if j in fast_w.get(i, {}):
                assert fast_w[i][j][:2] == got_w[i][j][:2]
        for c in range(3):
            assert _agree(got_o[i][c], output[i][c], digits), (i, c, got_o[i][c], _mp_text(output[i][c], 40))
            if c in fast_o.get(i, {}):
                assert fast_o[i][c][:2] == got_o[i][c][:2]


def test_peaked_rows_take_the_finer_floors_and_agree_with_mpmath():
    """Scale 4 on one-place decimals: logits hundreds apart, weights below 10^−90, far
    under 2^−F; they come from the finer floors, and every entry matches mpmath."""
    rng = random.Random("peaked")
    n, m, d = 6, 12, 16
    Q, K, V = _decimal_matrix(rng, n, d), _decimal_matrix(rng, m, d), _decimal_matrix(rng, m, 3)
    trace = sa.Trace(sa.Problem(Q=Q, K=K, V=V, scale="4"))
    rounding = Rounding(digits=25)
    b, bits = working_bits(25, m)
    assert any(trace.engine.fixed_exps(i, bits, b + 8).fine for i in range(n))
    fast = fixed_point_decimals(trace.engine, "weights", rounding, {i: list(range(m)) for i in range(n)})
    assert sum(len(r) for r in fast.values()) >= n * m - 2
    exps, sums, weights, output = _mp_reference(Q, K, V, Fraction(4), None, None)
    got = trace.step("weights").decimals(rounding)
    assert min(weights[i][j] for i in range(n) for j in range(m)) < mpmath.mpf(10) ** -90
    for i in range(n):
        for j in range(m):
            assert _agree(got[i][j], weights[i][j], 25), (i, j, got[i][j])
            assert fast[i][j][:2] == got[i][j][:2]
    for i, row in enumerate(trace.step("output").decimals(rounding)):
        for c, decimal in enumerate(row):
            assert _agree(decimal, output[i][c], 25), (i, c, decimal)


def test_the_fast_path_stays_out_where_it_does_not_apply():
    rounding = Rounding(digits=30)
    irrational = sa.Trace(sa.Problem(Q=[["1", "2", "0"]], K=[["1", "0", "1"], ["2", "1", "0"]],
                                     V=[["1"], ["2"]]))            # scale 1/√3
    assert fixed_point_decimals(irrational.engine, "weights", rounding, {0: [0, 1]}) == {}
    simple = sa.Trace(sa.Problem(Q=[["1", "2", "0", "1"]], K=[["1", "0", "1", "1"], ["2", "1", "0", "0"]],
                                 V=[["1"], ["2"]]))               # scale 1/√4 = 1/2
    assert list(fixed_point_decimals(simple.engine, "exp", rounding, {0: [0, 1]})[0]) == [0]  # not e^0
    tied = sa.Trace(sa.Problem(Q=[["1", "0", "0", "0"]], K=[["0", "1", "0", "0"], ["0", "0", "1", "0"]],
                               V=[["1"], ["2"]]))                  # both scores 0: weights 1/2
    assert fixed_point_decimals(tied.engine, "weights", rounding, {0: [0, 1]}) == {}
    assert fixed_point_decimals(tied.engine, "row_sum", rounding, {0: [0]}) == {}
    logsink = sa.Trace(sa.Problem(Q=[["1", "2", "0", "1"]], K=[["1", "0", "1", "1"], ["2", "1", "0", "0"]],
                                  V=[["1"], ["2"]], sink="log(3)"))
    assert fixed_point_decimals(logsink.engine, "weights", rounding, {0: [0, 1]}) == {}
    assert fixed_point_decimals(simple.engine, "weights", Rounding(places=30), {0: [0, 1]}) == {}
    assert fixed_point_decimals(simple.engine, "weights", rounding, {0: [0, 1]})


def test_one_precision_of_fixed_rows_is_kept():
    """The engine keeps the fixed-point rows of the last precision only (a 512 × 512 problem
    holds about 20 MB of them), as keep_only does for the balls."""
    rng = random.Random("memory")
    trace = sa.Trace(sa.Problem(Q=_decimal_matrix(rng, 5, 4), K=_decimal_matrix(rng, 6, 4),
                                V=_decimal_matrix(rng, 6, 2)))
    for digits in (5, 30, 12):
        trace.step("weights").decimals(Rounding(digits=digits))
        assert len({key[1:] for key in trace.engine._fixed_rows}) == 1
        b, bits = working_bits(digits, 6)
        assert next(iter(trace.engine._fixed_rows))[1:] == (bits, b + 8)
