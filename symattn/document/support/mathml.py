"""SymPy expressions and certified decimals as MathML Core markup.

MathML Core is the subset that Chromium, Firefox and Safari render natively,
so a page needs no script, font or network to show typeset math.  Only Core
elements are written (``math mrow mi mn mo mtext mfrac msqrt msup msub
mtable mtr mtd mspace``; no ``mfenced``, no ``mathvariant`` except ``normal``
on ``mi``).  Every text node passes through :func:`escape`.

Numbers reach the page only as :class:`~symattn.numbers.certify.CertifiedDecimal`
(``≈ 0.136``, or ``=`` when the rounding is proved exact); this module never
turns an expression into a float.  Exact values are printed from the SymPy
tree: negatives in parentheses where they are factors, ``e^(…)`` as a
superscript, surds under a radical.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Sequence

import sympy

from symattn.numbers.certify import CertifiedDecimal

__all__ = [
    "escape", "math", "mrow", "mi", "mn", "mo", "mtext", "token", "mfrac", "msqrt", "msup", "msub",
    "fenced", "paren", "decimal", "approx", "relation", "matrix", "row_vector", "sum_of",
    "product", "factor", "exact", "MathMLPrinter",
]

MINUS = "\u2212"
INVISIBLE_TIMES = "\u2062"

# C0 controls (but tab and newline) become their visible "control pictures";
# DEL and the C1 block, lone surrogates and noncharacters become U+FFFD: HTML
# forbids them as text, and a token name must still show that it had one.
_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    c = ord(match.group())
    if c < 0x20:
        return chr(0x2400 + c)
    return "\ufffd"


def escape(text: str) -> str:
    """Text safe anywhere in HTML or MathML: ``< > & " '`` escaped, control characters made visible."""
    return html.escape(_BAD.sub(_visible, str(text)), quote=True)


# -- elements ------------------------------------------------------------------------

def math(*children: str, display: bool = False, label: str | None = None) -> str:
    """A ``<math>`` element; ``display`` makes it a block, ``label`` is its spoken alternative."""
    attrs = ' display="block"' if display else ""
    if label is not None:
        attrs += f' aria-label="{escape(label)}"'
    return f"<math{attrs}>{''.join(children)}</math>"


def mrow(*children: str) -> str:
    return children[0] if len(children) == 1 and children[0].startswith("<mrow>") else \
        f"<mrow>{''.join(children)}</mrow>"


def mi(name: str, *, upright: bool = False) -> str:
    """An identifier; ``upright`` for names that are words (token names), as ``\\text{}`` in LaTeX."""
    attr = ' mathvariant="normal"' if upright and len(name) == 1 else ""
    return f"<mi{attr}>{escape(name)}</mi>"


def code_token(name: str) -> str:
    """A token name in running text (HTML, outside math): set apart as code."""
    return f'<code class="token">{escape(name)}</code>'


def token(name: str) -> str:
    """A token name inside math: upright, whatever its length (``I`` is a word, not a variable)."""
    return f'<mi mathvariant="normal">{escape(name)}</mi>' if len(name) == 1 else f"<mi>{escape(name)}</mi>"


def mn(digits: str) -> str:
    return f"<mn>{escape(digits)}</mn>"


def mo(op: str, *, stretchy: bool | None = None, form: str | None = None, tight: bool = False) -> str:
    """An operator; ``tight`` drops its spacing (the slash of ``−8/√3`` in an exponent)."""
    attrs = ' lspace="0" rspace="0"' if tight else ""
    if stretchy is not None:
        attrs += f' stretchy="{"true" if stretchy else "false"}"'
    if form is not None:
        attrs += f' form="{form}"'
    return f"<mo{attrs}>{escape(op)}</mo>"


def mtext(text: str) -> str:
    return f"<mtext>{escape(text)}</mtext>"


def mfrac(top: str, bottom: str) -> str:
    return f"<mfrac>{_group(top)}{_group(bottom)}</mfrac>"


def msqrt(inner: str) -> str:
    return f"<msqrt>{inner}</msqrt>"


def msup(base: str, exponent: str) -> str:
    return f"<msup>{_group(base)}{_group(exponent)}</msup>"


def msub(base: str, subscript: str) -> str:
    return f"<msub>{_group(base)}{_group(subscript)}</msub>"


def _group(markup: str) -> str:
    """One child element: several siblings are wrapped in an ``mrow``."""
    return markup if _is_single(markup) else f"<mrow>{markup}</mrow>"


def _is_single(markup: str) -> bool:
    """Whether markup is exactly one element (so it can be a script's base or a fraction's part)."""
    m = re.match(r"<([a-z]+)[ >]", markup)
    if not m:
        return False
    name, depth = m.group(1), 0
    for tag in re.finditer(r"<(/?)([a-z]+)[^>]*>", markup):
        if tag.group(2) == name:
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                return tag.end() == len(markup)
    return False


def fenced(inner: str, left: str = "(", right: str = ")") -> str:
    """``( inner )`` (MathML Core has no ``mfenced``).  The fences stretch only around
    something tall (a stacked fraction, a table): Chromium pads a stretched fence."""
    tall = "<mfrac" in inner or "<mtable" in inner
    return mrow(mo(left, form="prefix", stretchy=tall), inner, mo(right, form="postfix", stretchy=tall))


def paren(inner: str) -> str:
    return fenced(inner)


# -- numbers -------------------------------------------------------------------------

def decimal(d: CertifiedDecimal, *, scientific: bool = False) -> str:
    """A certified decimal: ``0.136``, ``−4.62``, ``1.43 × 10⁻²¹`` (never a float).

    ``scientific`` writes it as m × 10^e whatever its size (a value that rounds
    to 0 at fixed places, shown to significant digits instead)."""
    text = _scientific_text(d) if scientific and d.mantissa != 0 else d.text
    sign = text.startswith("-")
    body = text[1:] if sign else text
    if "e" in body:
        mantissa, exponent = body.split("e")
        power = msup(mn("10"), mrow(mo(MINUS), mn(exponent[1:])) if exponent.startswith("-") else mn(exponent))
        number = mrow(mn(mantissa), mo("\u00d7"), power)
    else:
        number = mn(body)
    return mrow(mo(MINUS, form="prefix"), number) if sign else number


def _scientific_text(d: CertifiedDecimal) -> str:
    """``8.90e-4`` from the mantissa and exponent (trailing zeros kept: they are significant)."""
    digits = str(abs(d.mantissa))
    lead = d.exponent + len(digits) - 1
    if d.exact:                      # an exact value's trailing zeros say nothing
        digits = digits.rstrip("0") or "0"
    body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if d.mantissa < 0 else "") + body + (f"e{lead}" if lead else "")


def relation(d: CertifiedDecimal) -> str:
    """``=`` when the rounding is proved to be the exact value, else ``≈``."""
    return mo("=") if d.exact else mo("\u2248")


def approx(exact_markup: str, d: CertifiedDecimal) -> str:
    """``exact ≈ decimal`` (or ``=`` when the decimal is the exact value)."""
    return mrow(exact_markup, relation(d), decimal(d))


# -- structures ------------------------------------------------------------------------

def matrix(cells: Sequence[Sequence[str]], left: str = "[", right: str = "]") -> str:
    """A bracketed matrix of markup cells (``⋯``/``⋮`` cells are the caller's to put in)."""
    rows = "".join("<mtr>" + "".join(f"<mtd>{c}</mtd>" for c in row) + "</mtr>" for row in cells)
    return mrow(mo(left, form="prefix"), f"<mtable>{rows}</mtable>", mo(right, form="postfix"))


def row_vector(items: Sequence[str]) -> str:
    """``[a, b, c]`` on one line."""
    parts: list[str] = []
    for k, item in enumerate(items):
        if k:
            parts.append(mo(","))
        parts.append(item)
    tall = any("<mfrac" in item for item in items)      # brackets grow only around fractions
    return mrow(mo("[", form="prefix", stretchy=tall), *parts, mo("]", form="postfix", stretchy=tall))


def sum_of(terms: Iterable[str]) -> str:
    """Terms joined by ``+`` (a term that starts with a minus is written ``− rest``)."""
    out: list[str] = []
    for term in terms:
        if out:
            neg = f"<mo form=\"prefix\">{MINUS}</mo>"
            if term.startswith("<mrow>" + neg):
                out += [mo(MINUS), mrow(term[len("<mrow>" + neg):-len("</mrow>")])]
                continue
            out.append(mo("+"))
        out.append(term)
    return mrow(*out) if out else mn("0")


def product(a: str, b: str) -> str:
    """A written product ``a · b`` (factors already parenthesised by :func:`factor`)."""
    return mrow(a, mo("\u00b7"), b)


# -- SymPy -----------------------------------------------------------------------------

_GREEK = {n: unicodedata.lookup(f"GREEK SMALL LETTER {n.upper()}") for n in (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa mu nu xi omicron rho sigma "
    "tau upsilon phi chi psi omega").split()} | {"lambda": "\u03bb", "pi": "\u03c0"}
_GREEK |= {n.capitalize(): unicodedata.lookup(f"GREEK CAPITAL LETTER {n.upper()}") for n in (
    "gamma delta theta xi sigma phi psi omega").split()} | {"Lambda": "\u039b", "Pi": "\u03a0"}
_SUBSCRIPTED = re.compile(r"^([A-Za-z]+)_?(\d+)$")


class MathMLPrinter(sympy.printing.printer.Printer):
    """Exact values as MathML Core presentation markup (SymPy's ``_print_<Class>`` dispatch).

    SymPy's own MathML printer writes ``mfenced`` and other elements
    browsers dropped, so this small printer covers what attention produces:
    rationals, surds, exponentials, sums, products, powers, Max/Min, ±∞
    and symbols.  Floats are refused: an exact path never holds one.
    """

    printmethod = "_mathml_core"
    _default_settings = {"order": None}

    def __init__(self, settings: dict | None = None) -> None:
        super().__init__(settings)
        self._script = 0          # inside an exponent: fractions are written with a slash

    def _exponent(self, expr: sympy.Expr) -> str:
        self._script += 1
        try:
            return self._print(expr)
        finally:
            self._script -= 1

    def _fraction(self, top: sympy.Expr, bottom: sympy.Expr) -> str:
        """A stacked fraction, or ``top/bottom`` on one line inside an exponent (as by hand)."""
        if not self._script:
            return mfrac(self._print(top), self._print(bottom))
        t, b = self._print(top), self._print(bottom)
        if isinstance(top, (sympy.Add, sympy.Mul)) and not top.is_Number:
            t = paren(t) if isinstance(top, sympy.Add) else t
        if isinstance(bottom, (sympy.Add, sympy.Mul)):
            b = paren(b)
        return mrow(t, mo("/", stretchy=False, tight=True), b)

    # atoms
    def _print_Integer(self, expr: sympy.Integer) -> str:
        return mrow(mo(MINUS, form="prefix"), mn(str(-expr.p))) if expr.p < 0 else mn(str(expr.p))

    def _print_Rational(self, expr: sympy.Rational) -> str:
        frac = self._fraction(sympy.Integer(abs(expr.p)), sympy.Integer(expr.q))
        return mrow(mo(MINUS, form="prefix"), frac) if expr.p < 0 else frac

    def _print_Half(self, expr: sympy.Rational) -> str:
        return self._print_Rational(expr)

    def _print_Float(self, expr: sympy.Float) -> str:
        raise TypeError("a Float reached the exact MathML printer; exact values only (certify for decimals)")

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        name = expr.name
        m = _SUBSCRIPTED.match(name)
        if m:
            return msub(mi(_GREEK.get(m.group(1), m.group(1))), mn(m.group(2)))
        if "_" in name:
            base, _, sub = name.partition("_")
            return msub(mi(_GREEK.get(base, base)), mi(sub))
        return mi(_GREEK.get(name, name))

    _print_Dummy = _print_Symbol

    def _print_Exp1(self, expr: sympy.Expr) -> str:
        return mi("e")

    def _print_Pi(self, expr: sympy.Expr) -> str:
        return mi("\u03c0")

    def _print_Infinity(self, expr: sympy.Expr) -> str:
        return mi("\u221e")

    def _print_NegativeInfinity(self, expr: sympy.Expr) -> str:
        return mrow(mo(MINUS, form="prefix"), mi("\u221e"))

    # operations
    def _print_Add(self, expr: sympy.Add) -> str:
        return sum_of(self._print(t) for t in expr.as_ordered_terms())

    def _print_Mul(self, expr: sympy.Mul) -> str:
        if expr.could_extract_minus_sign():
            return mrow(mo(MINUS, form="prefix"), self._mul_body(-expr))
        return self._mul_body(expr)

    def _mul_body(self, expr: sympy.Expr) -> str:
        top, bottom = sympy.fraction(expr, exact=True)
        if bottom != 1:
            return self._fraction(top, bottom)
        if not isinstance(expr, sympy.Mul):
            return self._print(expr)
        factors = list(expr.as_ordered_factors())
        parts: list[str] = []
        for k, f in enumerate(factors):
            text = self._print(f)
            if isinstance(f, sympy.Add) or (k and f.could_extract_minus_sign()):
                text = paren(text)
            if parts:
                both_numbers = factors[k - 1].is_Number and f.is_Number
                parts.append(mo("\u00b7") if both_numbers else mo(INVISIBLE_TIMES))
            parts.append(text)
        return mrow(*parts)

    def _print_Pow(self, expr: sympy.Pow) -> str:
        base, ex = expr.as_base_exp()
        if ex == sympy.S.Half:
            return msqrt(self._print(base))
        if ex.is_Rational and ex.p < 0:
            return self._fraction(sympy.S.One, base ** (-ex))
        b = self._print(base)
        if not (base.is_Atom and not (base.is_Number and base < 0)) and not isinstance(base, sympy.Function):
            b = paren(b)
        return msup(b, self._exponent(ex))

    def _print_exp(self, expr: sympy.Expr) -> str:
        return msup(mi("e"), self._exponent(expr.args[0]))

    def _print_Function(self, expr: sympy.Function) -> str:
        name = getattr(expr.func, "__name__", str(expr.func))
        args: list[str] = []
        for k, a in enumerate(expr.args):
            if k:
                args.append(mo(","))
            args.append(self._print(a))
        return mrow(mi(name.lower() if name in ("Max", "Min") else name), paren(mrow(*args)))

    def _print_Max(self, expr: sympy.Expr) -> str:
        return self._print_Function(expr)

    _print_Min = _print_Max

    def emptyPrinter(self, expr: object) -> str:  # noqa: N802 (SymPy's name)
        return mtext(str(expr))


def exact(expr: sympy.Expr, *, script: bool = False) -> str:
    """An exact SymPy value as MathML (no ``<math>`` around it); ``script``: inside an exponent."""
    printer = MathMLPrinter()
    printer._script = int(script)
    return printer.doprint(sympy.Integer(expr) if isinstance(expr, int) else expr)


def factor(expr: sympy.Expr) -> str:
    """A factor in a written product: ``(−3)``, ``(1 + √2)``, as by hand."""
    value = sympy.Integer(expr) if isinstance(expr, int) else expr
    text = exact(value)
    if value.could_extract_minus_sign() or isinstance(value, sympy.Add):
        return paren(text)
    return text
