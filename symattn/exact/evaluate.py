"""The evaluator of the safe parser: a parsed tree to an exact SymPy value, each node's
domain checked and its size capped as it is built."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import ClassVar

import sympy
from flint import arb, ctx, fmpq

from symattn.errors import ParseError
# the caps: one table in symattn.limits and docs/limits.md
from symattn.limits import (MAX_ALGEBRAIC_DEGREE, MAX_ALGEBRAIC_DIGITS, MAX_BITS,
                            MAX_POWER_EXPONENT, MAX_ROOT_BITS)
from symattn.exact.grammar import _HELP, Call, Name, Node, Num, Power, Product, Sum, Unary, _fail
from symattn.exact.values import (_ALGEBRAIC_HEIGHT, _ALGEBRAIC_LIMIT, _VALUE_BITS, _height_bits, _over,
                                  _rationals, _too_many_digits, _value_problem, algebraic_degree)


# -------------------------------------------------------------- evaluator

def _bits(expr: sympy.Expr) -> int:
    """A generous estimate of the bits of the rationals in ``expr`` (not its exponents)."""
    total, stack = 0, [expr]
    while stack:
        item = stack.pop()
        if item.is_Rational:
            total += abs(item.p).bit_length() + item.q.bit_length()
        else:
            stack.extend([item.base] if item.is_Pow else item.args)
    return max(1, total)


def _ball(x: sympy.Expr) -> arb | None:
    """An arb ball around an expression the Evaluator built (None if it cannot)."""
    if x.is_Rational:
        return arb(fmpq(x.p, x.q))
    if x in _ARB_CONSTANTS:
        return _ARB_CONSTANTS[x]()
    args = [b for a in x.args if (b := _ball(a)) is not None]
    if not args or len(args) < len(x.args):
        return None
    if x.is_Add or x.is_Mul:
        return functools.reduce(operator.add if x.is_Add else operator.mul, args)
    if x.is_Pow:
        base, exponent = args
        return base ** int(x.exp) if x.exp.is_Integer else (base ** exponent if base > 0 else None)
    function = _ARB_FUNCTIONS.get(type(x))
    return function(args[0]) if function and len(args) == 1 else None


_ARB_CONSTANTS = {sympy.pi: arb.pi, sympy.E: arb.const_e}
_ARB_FUNCTIONS = {sympy.exp: arb.exp, sympy.log: arb.log, sympy.tanh: arb.tanh,
                  sympy.cos: arb.cos, sympy.sin: arb.sin}


def _approx(x: sympy.Expr, decide_sign: bool = False) -> arb | None:
    """A certified ball around a number, narrow enough to show its sign if asked.

    Why not ``x.is_positive``: SymPy's assumption system may, in random
    order, run a primality test on a big integer (minutes), and ``evalf``
    is slow on huge rationals; flint's balls are fast and rigorous.
    """
    if x.free_symbols:
        return None
    for prec in (64, 256, 1024, 4096):
        with ctx.workprec(prec):
            ball = _ball(x)
        if ball is None or not ball.is_finite():
            return None
        if not decide_sign or ball.is_exact() or not ball.contains(0):
            return ball
    return None


def _sign(x: sympy.Expr) -> int | None:
    """-1, 0 or 1 for a number; None when symbolic or not decided (see _approx)."""
    if x.is_Rational:
        return (x.p > 0) - (x.p < 0)
    ball = _approx(x, decide_sign=True)
    return None if ball is None else (ball > 0) - (ball < 0)


class Evaluator:
    """Turn an AST into a SymPy expression, checking domains and caps.

    Names and calls resolve through the ``constants`` and ``functions``
    tables; a subclass may extend them or add ``eval_<NodeClass>`` methods.
    """

    constants: ClassVar[dict[str, sympy.Expr]] = {"pi": sympy.pi, "e": sympy.E}
    # name: (SymPy function, signs a numeric argument may have (() = any), problem, guard)
    functions: ClassVar[dict[str, tuple[Callable[..., sympy.Expr], tuple[int, ...], str, str]]] = {
        "sqrt": (sympy.sqrt, (0, 1), "the square root of a negative number", "guard_root"),
        "exp": (sympy.exp, (), "", "guard_exp"),
        "log": (sympy.log, (1,), "the logarithm of a number that is not positive", "guard_root"),
        "ln": (sympy.log, (1,), "the logarithm of a number that is not positive", "guard_root"),
        # soft-capping (tanh) and RoPE rotations (cos, sin); arguments are bounded as e^x's
        "tanh": (sympy.tanh, (), "", "guard_argument"),
        "cos": (sympy.cos, (), "", "guard_argument"),
        "sin": (sympy.sin, (), "", "guard_argument"),
    }

    def __init__(self, text: str, where: str = "input", symbols: bool = False,
                 symbol_hint: bool = False) -> None:
        self.text, self.where, self.symbols = text, where, symbols
        self.symbol_hint = symbol_hint   # say how to declare an unknown name as a symbol
        self.bits = self.root_bits = 0

    def __call__(self, node: Node) -> sympy.Expr:
        return getattr(self, f"eval_{type(node).__name__}")(node)

    def fail(self, problem: str, node: Node, fix: str) -> ParseError:
        return _fail(self.text, self.where, problem, node.pos, fix)

    def spend(self, bits: int, node: Node) -> None:
        self.bits += bits
        if self.bits > MAX_BITS:
            raise self.fail(f"its numbers would exceed {MAX_BITS:,} bits (MAX_BITS)",
                            node, "use smaller numbers or exponents")

    def guard_root(self, base: sympy.Expr, node: Node) -> None:
        self.root_bits += _bits(base)
        if self.root_bits > MAX_ROOT_BITS:
            raise self.fail(f"the numbers under roots, logs and fractional powers exceed "
                            f"{MAX_ROOT_BITS:,} bits (MAX_ROOT_BITS)", node,
                            "use smaller numbers there")

    def guard_fraction(self, base: sympy.Expr, q: int, node: Node) -> None:
        """Before SymPy builds base^(p/q): it factors the base (a 120,000-bit integer for
        (1/7244)^(1/9827)), so the degree and the numbers under the root are capped first."""
        degree = algebraic_degree(base) * q
        if degree > MAX_ALGEBRAIC_DEGREE:
            raise self.fail(f"a root of index {q:,} here makes its algebraic degree "
                            f"{degree:,}, over the cap of {MAX_ALGEBRAIC_DEGREE} "
                            "(MAX_ALGEBRAIC_DEGREE)", node,
                            "use fewer or simpler roots, such as sqrt(2) or 2^(1/3)")
        if _height_bits(base) > _ALGEBRAIC_HEIGHT or any(
                _over(r, _ALGEBRAIC_LIMIT) for r in _rationals(base)):
            raise self.fail(f"a number under a root has over {MAX_ALGEBRAIC_DIGITS} digits "
                            "(MAX_ALGEBRAIC_DIGITS)", node, "use shorter numbers under roots")
        self.guard_root(base, node)

    def checked(self, value: sympy.Expr, node: Node) -> sympy.Expr:
        """``value`` when within the digit and degree caps (see check_value)."""
        problem = _value_problem(value, whole=False)
        if problem:
            raise self.fail(problem[0], node, problem[1])
        return value

    def guard_exp(self, x: sympy.Expr, node: Node) -> None:
        if not x.free_symbols:
            self.guard_size(_approx(x), node)

    def guard_argument(self, x: sympy.Expr, node: Node) -> None:
        """tanh, cos, sin of a bounded number: cos(10^999) would need 1,000 digits of π."""
        if x.free_symbols:
            return
        size = _approx(x)
        if size is None or not size.is_finite() or size.abs_upper() > MAX_POWER_EXPONENT:
            raise self.fail(f"its argument is over {MAX_POWER_EXPONENT:,} in size or cannot be "
                            "bounded (MAX_POWER_EXPONENT)", node, "use a smaller argument")

    def guard_size(self, log_size: arb | None, node: Node) -> None:
        """Refuse e^x for huge |x|: SymPy could take minutes to compare the result."""
        if log_size is None or not log_size.is_finite() or log_size.abs_upper() > MAX_POWER_EXPONENT:
            problem = "its size cannot be bounded" if log_size is None else "it exceeds"
            raise self.fail(f"{problem} e^{MAX_POWER_EXPONENT:,} (MAX_POWER_EXPONENT)",
                            node, "use a smaller exponent")

    def eval_Num(self, node: Num) -> sympy.Expr:
        self.spend(_bits(node.value), node)
        return node.value

    def eval_Name(self, node: Name) -> sympy.Expr:
        if node.name in self.constants:
            return self.constants[node.name]
        if node.name in self.functions:
            raise self.fail(f"{node.name} needs an argument", node, f"write {node.name}(...)")
        if self.symbols:
            return sympy.Symbol(node.name, real=True)
        if self.symbol_hint:
            raise ParseError(
                f"unknown name {node.name!r} in {self.where}: declare it as a symbol "
                f"(symbols = [\"{node.name}\"] in the problem file, symbols=[\"{node.name}\"] "
                f"in Python) or {_HELP}")
        raise ParseError(f"unknown name {node.name!r} in {self.where}: {_HELP}")

    def eval_Call(self, node: Call) -> sympy.Expr:
        if node.name not in self.functions:
            raise ParseError(f"unknown function {node.name!r} in {self.where}: {_HELP}")
        function, signs, problem, guard = self.functions[node.name]
        if len(node.args) != 1:
            raise self.fail(f"{node.name} takes 1 argument, not {len(node.args)}", node,
                            f"write {node.name}(x)")
        arg = self(node.args[0])
        if signs and not arg.free_symbols and _sign(arg) not in signs:
            raise self.fail(problem, node, "only real numbers are allowed")
        if guard:
            getattr(self, guard)(arg, node)
        if function is sympy.sqrt:
            self.guard_fraction(arg, 2, node)
        return self.checked(function(arg), node)

    def eval_Unary(self, node: Unary) -> sympy.Expr:
        value = self(node.operand)
        return -value if node.op == "-" else value

    def eval_Sum(self, node: Sum) -> sympy.Expr:
        return self.checked(sympy.Add(*[self(t) if op == "+" else -self(t)
                                        for op, t in node.terms]), node)

    def eval_Product(self, node: Product) -> sympy.Expr:
        factors = []
        for op, child in node.factors:
            value = self(child)
            if op == "/":
                self.check_divisor(value, child)
                value = sympy.Pow(value, -1)
            factors.append(value)
        return self.checked(sympy.Mul(*factors), node)

    def check_divisor(self, value: sympy.Expr, node: Node) -> None:
        # with symbols only a literal 0 is known to be zero
        sign = (0 if value == 0 else 1) if value.free_symbols else _sign(value)
        if sign == 0:
            raise self.fail("division by zero", node, "change the divisor")
        if sign is None:
            raise self.fail("the divisor cannot be shown to be non-zero", node,
                            "simplify the divisor")

    def eval_Power(self, node: Power) -> sympy.Expr:
        base, exponent = self(node.base), self(node.exponent)
        if exponent.is_Rational:
            self.check_rational_power(base, exponent, node)
        elif not (base.free_symbols or exponent.free_symbols):
            self.check_irrational_power(base, exponent, node)
        if exponent.is_Rational and not exponent.is_Integer:
            self.guard_fraction(base, int(exponent.q), node)
        elif not exponent.is_Integer:
            self.guard_root(base, node)   # SymPy factors the base of b^x
        return self.checked(sympy.Pow(base, exponent), node)

    def check_rational_power(self, base: sympy.Expr, exponent: sympy.Rational, node: Node) -> None:
        p, q = exponent.p, exponent.q
        if q > MAX_ALGEBRAIC_DEGREE:
            raise self.fail(f"a root of index {q:,} is over the algebraic-degree cap of "
                            f"{MAX_ALGEBRAIC_DEGREE} (MAX_ALGEBRAIC_DEGREE)", node,
                            "use a simpler root, such as x^(1/2) or x^(1/3)")
        if abs(p) > MAX_POWER_EXPONENT:
            raise self.fail(f"the exponent is over the cap of {MAX_POWER_EXPONENT:,} "
                            "(MAX_POWER_EXPONENT)", node, "use a smaller exponent")
        self.spend(_bits(base) * abs(p), node)
        if q == 1 and _height_bits(base) * abs(p) > 2 * _VALUE_BITS:
            raise self.fail(_too_many_digits(), node, "use a smaller exponent")
        sign = None if base.free_symbols else _sign(base)
        if sign == 0 and p < 0:
            raise self.fail("division by zero (0 to a negative power)", node,
                            "change the base or the exponent")
        if q != 1 and not base.free_symbols and sign not in (0, 1):
            raise self.fail("a fractional power of a negative number is not real", node,
                            "take the root of a positive number, e.g. -(8^(1/3))")

    def check_irrational_power(self, base: sympy.Expr, exponent: sympy.Expr, node: Node) -> None:
        if _sign(base) != 1:
            raise self.fail("an irrational power needs a positive base", node,
                            "only real numbers are allowed")
        size, base_ball = _approx(exponent), _approx(base)
        self.guard_size(None if size is None or base_ball is None else size * base_ball.log(), node)


