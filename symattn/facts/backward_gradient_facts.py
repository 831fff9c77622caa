"""The backward facts that differentiate: the engine's gradient against SymPy's derivative of
the loss written out here, and the certified errors of central finite differences (float32,
float64 and exact arithmetic).  Registered with the identities in ``backward_facts``."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

import flint
import sympy

from symattn.facts.backward_checks import BALL_BITS, Verdict as _Verdict, no_backward as _no_backward, \
    upper_text as _upper_text
from symattn.facts import notation as nt
from symattn.facts.proof import Line, Proof
from symattn.numbers.arb import to_arb
from symattn.numbers.precision import precision
from symattn.problem.keys.backward import Loss
from symattn.trace.trace import Trace

#: the SymPy derivative is built only for problems this small (n, m ≤ MAX_TOKENS and at most
#: MAX_PARAMETERS input entries): each entry is one symbolic forward pass
MAX_TOKENS = 4
MAX_PARAMETERS = 48
#: the step sizes of the finite differences
STEPS = tuple(sympy.Rational(1, 10 ** k) for k in range(1, 8))
#: exact zero tests in gradient-is-sympy-derivative (the rest: certified balls); a count, not
#: seconds, so the fact reads the same on any machine and under any load (each test of a
#: derivative against the engine's entry costs about 0.3-0.6 s; the balls decide the rest to 256 bits)
GRADIENT_BUDGET = 2


# ------------------------------------------------------- the loss, written out here

def _parameters(trace: Trace) -> list[str]:
    """The inputs the loss is differentiated by (those with a gradient step)."""
    names = [n for n in trace.problem.inputs if "d_" + n in trace.step_names]
    if trace.problem.sink is not None:
        names.append("sink")
    return names


def _values(trace: Trace) -> dict[str, list[list[sympy.Expr]]]:
    p = trace.problem
    out = {n: [list(r) for r in m.to_sympy().tolist()] for n, m in p.inputs.items()}
    if p.sink is not None:
        out["sink"] = [[p.sink]]
    return out


Ops = tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any], bool]


def _loss(trace: Trace, v: dict[str, list[list[Any]]], const: Callable[[sympy.Expr], Any],
          exp: Callable[[Any], Any], tanh: Callable[[Any], Any], shift: bool) -> Any:
    """The loss from the definitions, on values of any arithmetic (SymPy or numpy scalars).

    ``const`` turns an exact constant into that arithmetic; ``shift`` subtracts each row's
    largest logit before the exponentials (as float code does)."""
    p = trace.problem

    def mul(A: list[list[Any]], B: list[list[Any]]) -> list[list[Any]]:
        return [[_sum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]

    def _sum(xs: Any) -> Any:
        out = const(sympy.S.Zero)
        for x in xs:
            out = out + x
        return out

    if "X" in v:
        X, Xkv = v["X"], v.get("X_kv", v["X"])
        Q, K, V = mul(X, v["W_q"]), mul(Xkv, v["W_k"]), mul(Xkv, v["W_v"])
    else:
        Q, K, V = v["Q"], v["K"], v["V"]
    if p.rope is not None:
        rope = p.rope

        def rotate(M: list[list[Any]], positions: tuple[int, ...]) -> list[list[Any]]:
            out = []
            for r, row in enumerate(M):
                new = list(row)
                for pair, (a, b) in enumerate(rope.pairs()):
                    phi = rope.angle(positions[r], pair)
                    c, s = const(sympy.cos(phi)), const(sympy.sin(phi))
                    new[a], new[b] = row[a] * c - row[b] * s, row[a] * s + row[b] * c
                out.append(new)
            return out
        Q, K = rotate(Q, rope.positions), rotate(K, rope.key_positions)
    scale = const(p.scale)
    bias = trace.step("bias") if p.alibi is not None else None
    sink = v["sink"][0][0] if p.sink is not None else None
    total = const(sympy.S.Zero)
    for i in range(p.n):
        keys = trace.allowed(i)
        z = {}
        for j in keys:
            x = scale * _sum(Q[i][c] * K[j][c] for c in range(p.d_k))
            if bias is not None:
                x = x + const(bias[i, j])
            if p.softcap is not None:
                cap = const(p.softcap)
                x = cap * tanh(x / cap)
            z[j] = x
        top = max([*z.values(), *([sink] if sink is not None else [])]) if shift and (z or sink is not None) \
            else const(sympy.S.Zero)
        e = {j: exp(x - top) for j, x in z.items()}
        denominator = _sum([*e.values(), *([exp(sink - top)] if sink is not None else [])])
        for c in range(p.d_v):
            o = _sum(e[j] * V[j][c] for j in keys) / denominator if keys else const(sympy.S.Zero)
            spec = p.backward
            assert spec is not None
            if spec.loss is Loss.SUM:
                total = total + o
            elif spec.loss is Loss.GRAD_OUTPUT:
                assert spec.grad_output is not None
                total = total + const(spec.grad_output.exact(i, c)) * o
            else:
                assert spec.target is not None
                r = o - const(spec.target.exact(i, c))
                total = total + const(sympy.Rational(1, 2)) * r * r
    return total


def _sympy_loss(trace: Trace, name: str, r: int, c: int, t: sympy.Expr,
                values: dict[str, list[list[sympy.Expr]]] | None = None) -> sympy.Expr:
    """L with input entry (name, r, c) replaced by t, everything else exact (``values``: the
    inputs' exact values, when already read)."""
    values = {n: [list(row) for row in m] for n, m in (values or _values(trace)).items()}
    values[name][r][c] = t
    return _loss(trace, values, lambda x: x, sympy.exp, sympy.tanh, False)


def _derivative(trace: Trace, name: str, r: int, c: int,
                values: dict[str, list[list[sympy.Expr]]]) -> sympy.Expr:
    """SymPy's ∂L/∂(entry) at the entry's value θ, as d/dt L(θ + t) at t = 0.

    The same number as d/dθ L(θ) at θ (the chain rule with dθ/dt = 1); SymPy differentiates
    the shifted loss faster (measured on the backward example: 0.8 s instead of 1.2 s for its
    48 entries), and substituting 0 is cheaper than substituting θ.  t is declared ≥ 0, which
    lets SymPy settle the signs it asks about while it builds the derivative sooner (0.1-0.3 s
    less again); the loss is smooth in t, so the derivative of a formula valid for t ≥ 0,
    taken at 0, is its derivative (the right derivative of a differentiable function)."""
    t = sympy.Symbol("t", nonnegative=True)
    theta = values[name][r][c]
    return sympy.diff(_sympy_loss(trace, name, r, c, theta + t, values), t).subs(t, 0)


def _refuse_size(trace: Trace) -> Line | None:
    p = trace.problem
    count = sum(len(m) * len(m[0]) for n, m in _values(trace).items() if n in _parameters(trace))
    if p.n > MAX_TOKENS or p.m > MAX_TOKENS or count > MAX_PARAMETERS:
        return Line(f"not checked on this problem: it is too large for SymPy's derivative ({p.n} queries, "
                    f"{p.m} keys, {count} input entries; the cap is {MAX_TOKENS} tokens and {MAX_PARAMETERS} "
                    "entries, each a symbolic forward pass)")
    return None


# ---------------------------------------------------------- gradient-is-sympy-derivative

def _grad_step(name: str) -> str:
    return "d_sink" if name == "sink" else "d_" + name


def gradient_is_sympy_derivative(trace: Trace | None = None) -> Proof:
    """The engine's gradient of each input entry equals SymPy's ∂L/∂(entry) of the loss
    written out from the definitions, symbol by symbol (small problems only)."""
    z = nt.sym("z")
    general = (Line("the chain rule through ", nt.rel(nt.sym("O"), "=", nt.times(nt.sym("P"), nt.sym("V"))), ", ",
                    nt.rel(nt.sym("P"), "=", nt.fn("softmax", z)), ", ",
                    nt.rel(z, "=", nt.dot(nt.words("scale"), nt.times(nt.sym("Q"), nt.T(nt.sym("K"))))),
                    " (+ bias, soft-cap), with the softmax's Jacobian ",
                    nt.minus(nt.fn("diag", nt.p()), nt.times(nt.p(), nt.T(nt.p()))), " (see softmax-jacobian), "
                    "gives the engine's steps; this fact does not re-prove that in general, it checks the "
                    "engine against SymPy's own derivative on the given problem"),)
    ok = True
    checks = _no_backward(trace)
    counter = None
    if checks is None and trace is not None:
        refused = _refuse_size(trace)
        if refused is not None:
            checks = (refused,)
        else:
            lines, values = [], _values(trace)
            left = GRADIENT_BUDGET
            for name in _parameters(trace):
                v = _Verdict(left, formal=True)
                grad = trace.step(_grad_step(name))
                rows, cols = len(values[name]), len(values[name][0])
                for r in range(rows):
                    for c in range(cols):
                        derivative = _derivative(trace, name, r, c, values)
                        mine = grad[0, 0] if name == "sink" else grad[r, c]
                        v.zero(mine - derivative, f"{name}[{r}, {c}]")
                left = v.tests_left
                ok &= v.ok
                if not v.ok and counter is None:
                    counter = {"step": _grad_step(name), "entry": v.failed[0][0]}
                what = _grad_step(name)
                lines.append(Line(f"{what}: all {rows * cols} entries agree with SymPy's ∂L/∂{name} ({v.how()})"))
            checks = (Line("the loss written out here from the definitions (it shares only the problem's data "
                           "with the engine: inputs, mask, scale, sink, RoPE angles, ALiBi's bias), each input entry θ in turn written θ + t, differentiated by SymPy in t and "
                           "evaluated at t = 0"), *lines)
    return Proof("gradient-is-sympy-derivative", ok,
                 Line("the engine's gradient equals SymPy's derivative of the exact loss, entry by entry "
                      "(on small problems; a check of this problem, not a general proof)"),
                 general, checks or (), counter)


# ---------------------------------------------------------- finite-difference-converges

@lru_cache(maxsize=None)
def _general_fd() -> tuple[bool, tuple[Line, ...]]:
    x, h = sympy.symbols("x h", real=True)
    f = sympy.Function("f")
    central = (f(x + h) - f(x - h)) / (2 * h)
    series = sympy.series(central, h, 0, 4).removeO().doit()
    want = sympy.diff(f(x), x) + h ** 2 / 6 * sympy.diff(f(x), x, 3)
    ok = sympy.simplify(series - want) == 0
    xn, hn = nt.sym("x"), nt.sym("h")
    central_node = nt.frac(nt.minus(nt.fn("f", nt.plus(xn, hn)), nt.fn("f", nt.minus(xn, hn))), nt.times(nt.num(2), hn))
    series_node = nt.plus(nt.fn("f'", xn), nt.frac(nt.dot(nt.sup(hn, nt.num(2)), nt.fn("f'''", xn)), nt.num(6)),
                          nt.fn("O", nt.sup(hn, nt.num(4))))
    return ok, (Line(nt.rel(central_node, "=", series_node), " for any smooth f (SymPy's "
                     f"series in h: {'verified' if ok else 'FAILED'}): in exact arithmetic the error falls "
                     "as h²; in floats the two values of f are rounded, so the difference also has an error "
                     "of about ε·|f|/h (ε the format's unit roundoff) that grows as h falls"),)


def _pick(trace: Trace) -> tuple[str, int, int, flint.arb]:
    """The entry of the first input with the largest certified |gradient|."""
    name = _parameters(trace)[0]
    step = _grad_step(name)
    best: tuple[str, int, int, flint.arb] | None = None
    for r in range(len(list(trace.step(step).rows()))):
        for c, ball in enumerate(trace.enclosure(step, r, BALL_BITS)):
            if best is None or abs(ball).mid() > abs(best[3]).mid():
                best = (name, r, c, ball)
    assert best is not None
    return best


def _float_fd(trace: Trace, name: str, r: int, c: int, h: sympy.Rational, dtype: Any) -> Fraction:
    import numpy as np

    def const(x: sympy.Expr) -> Any:
        return dtype(float(sympy.N(x, 30)))

    values = {n: [[const(x) for x in row] for row in m] for n, m in _values(trace).items()}
    base, step = values[name][r][c], const(h)
    with np.errstate(all="ignore"):
        values[name][r][c] = base + step
        up = _loss(trace, values, const, np.exp, np.tanh, True)
        values[name][r][c] = base - step
        down = _loss(trace, values, const, np.exp, np.tanh, True)
        fd = (up - down) / (dtype(2) * step)
    return Fraction(float(fd))


def _arb_of(x: Fraction) -> flint.arb:
    return flint.arb(flint.fmpq(x.numerator, x.denominator))


def finite_difference_converges(trace: Trace | None = None) -> Proof:
    """A central difference converges to the gradient as h² in exact arithmetic; float32 and
    float64 differences do not: their certified errors at h = 1e-1 … 1e-7."""
    ok, general = _general_fd()
    checks = _no_backward(trace)
    data: dict[str, Any] = {}
    if checks is None and trace is not None:
        refused = _refuse_size(trace)
        try:
            import numpy  # noqa: F401
        except ImportError:  # pragma: no cover - numpy is a test dependency
            refused = Line("not checked: numpy is not installed (the float differences need it)")
        if refused is not None:
            checks = (refused,)
        else:
            import numpy as np

            name, r, c, grad = _pick(trace)
            t = sympy.Symbol("t", real=True)
            L = _sympy_loss(trace, name, r, c, t)
            theta = _values(trace)[name][r][c]
            lines = [Line(f"the entry {name}[{r}, {c}] (the first input's largest gradient), whose exact "
                          f"gradient {_grad_step(name)}[{r}, {c}] is in the certified ball "
                          f"{grad.str(12, radius=False)}…; errors are certified upper bounds of "
                          "|difference − exact gradient| (arb balls; float results converted exactly)")]
            rows = []
            for h in STEPS:
                up, down = to_arb(L.subs(t, theta + h), BALL_BITS), to_arb(L.subs(t, theta - h), BALL_BITS)
                floats = {label: _float_fd(trace, name, r, c, h, dtype)
                          for label, dtype in (("float64", np.float64), ("float32", np.float32))}
                with precision(BALL_BITS):
                    exact_fd = (up - down) / _arb_of(Fraction(2 * h.p, h.q))
                    errs = {"exact": _upper_text(abs(exact_fd - grad))}
                    errs.update({label: _upper_text(abs(_arb_of(x) - grad)) for label, x in floats.items()})
                rows.append({"h": f"1e-{len(str(h.q)) - 1}", **errs})
                lines.append(Line(f"h = {rows[-1]['h']}: exact arithmetic ≤ {errs['exact']}, "
                                  f"float64 ≤ {errs['float64']}, float32 ≤ {errs['float32']}"))
            lines.append(Line("(measured on this problem, not proved in general: the exact-arithmetic errors fall "
                              "as h²; the float errors stop falling and grow again once rounding dominates — a "
                              "float32 difference is not a reference for a gradient)"))
            data = {"finite_differences": {"entry": f"{name}[{r}, {c}]", "errors": rows}}
            checks = tuple(lines)
    return Proof("finite-difference-converges", ok,
                 Line("a central finite difference converges to the gradient as h → 0 (error h²·f‴/6 in exact "
                      "arithmetic); in float32 or float64 its error is bounded below by rounding"),
                 general, checks or (), None, data)
