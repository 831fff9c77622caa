"""ExactMatrix: an exact matrix, and the coercion of user matrices into one.

Rational matrices (the common case: integers, decimals, fractions) live in
python-flint's ``fmpq_mat``, so products and entry access are fast and no
SymPy tree is built until someone asks for one; anything else (surds,
symbols) is a SymPy immutable matrix.  Either way ``to_sympy()`` gives the
exact SymPy matrix.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain
from math import gcd
from collections.abc import Collection, Sequence
from fractions import Fraction
from typing import Hashable

import flint
import sympy

from symattn.numbers.certify import to_arb
from symattn.errors import CertificationError, ProblemError
from symattn.exact.coerce import to_exact
from symattn.limits import MAX_ENTRIES, MAX_ENTRY_MAGNITUDE, MAX_SIDE

_MAX_SIDE = MAX_SIDE   # the old private name, kept for importers
# a plain numeral, read straight into a rational: "-2.75", "12", "0.5"
_NUMERAL = re.compile(r"([+-]?)([0-9]{1,60})(?:\.([0-9]{0,60}))?")


def fmpq_to_sympy(q: flint.fmpq) -> sympy.Rational:
    return sympy.Rational(int(q.p), int(q.q))


def _fmpq_to_fraction(q: flint.fmpq) -> Fraction:
    return Fraction(int(q.p), int(q.q))


def sympy_to_fmpq(r: sympy.Rational) -> flint.fmpq:
    return flint.fmpq(int(r.p), int(r.q))


class ExactMatrix:
    """An exact matrix with a fast rational backend (flint) and a general one (SymPy)."""

    def __init__(self, rational: flint.fmpq_mat | None = None,
                 general: sympy.ImmutableMatrix | None = None, largest: flint.fmpq | None = None) -> None:
        self.rational = rational
        self.general = general
        if rational is not None:
            self.rows, self.cols = rational.nrows(), rational.ncols()
        else:             # exactly one backend: rational, or else general
            assert general is not None, "an ExactMatrix needs a rational or a general matrix"
            self.rows, self.cols = general.rows, general.cols
        self._sympy: sympy.ImmutableMatrix | None = general
        #: max |entry| of a rational matrix, when its reader knew it (decimal input)
        self._largest = largest

    @classmethod
    def from_sympy(cls, m: sympy.ImmutableMatrix) -> "ExactMatrix":
        entries = [e for row in m.tolist() for e in row]
        if all(e.is_Rational for e in entries):
            return cls(rational=flint.fmpq_mat(m.rows, m.cols, [sympy_to_fmpq(e) for e in entries]))
        return cls(general=m)

    @property
    def is_rational(self) -> bool:
        return self.rational is not None

    def matmul(self, other: "ExactMatrix", transpose_other: bool = False) -> "ExactMatrix":
        if self.rational is not None and other.rational is not None:
            right = other.rational.transpose() if transpose_other else other.rational
            return ExactMatrix(rational=self.rational * right)
        right = other.to_sympy().T if transpose_other else other.to_sympy()
        product = (self.to_sympy().as_mutable() * right.as_mutable()).applyfunc(sympy.expand)
        return ExactMatrix.from_sympy(sympy.ImmutableMatrix(product))

    def _general(self) -> sympy.ImmutableMatrix:
        """The general backend, where the matrix is not rational (the one backend it has)."""
        assert self.general is not None
        return self.general

    def exact(self, i: int, j: int) -> sympy.Expr:
        if self.rational is not None:
            return fmpq_to_sympy(self.rational[i, j])
        return self._general()[i, j]

    def key(self, i: int, j: int) -> Hashable:
        """An exact, hashable form of an entry (for grouping equal values)."""
        return self.rational[i, j] if self.rational is not None else self._general()[i, j]

    def fraction(self, i: int, j: int) -> Fraction | None:
        return _fmpq_to_fraction(self.rational[i, j]) if self.rational is not None else None

    def ball(self, i: int, j: int, prec: int) -> flint.arb:
        if self.rational is not None:
            return flint.arb(self.rational[i, j])
        return to_arb(self._general()[i, j], prec)

    def entries(self) -> list[sympy.Expr]:
        """Every entry, row by row (SymPy values)."""
        return [e for row in self.to_sympy().tolist() for e in row]

    def max_abs(self) -> flint.arb | None:
        """An upper bound on max |entry| (an arb at 64 bits), None when symbolic or unknown.

        Why: the problem's caps bound the scores' size without computing them."""
        if self._largest is not None:
            return flint.arb(self._largest)
        if self.rational is not None:
            numer, den = self.rational.numer_denom()
            top = max((abs(int(x)) for x in numer.entries()), default=0)
            return flint.arb(flint.fmpq(top, int(den)))
        if self._general().free_symbols:
            return None
        best = flint.arb(0)
        for e in self.entries():
            try:
                ball = to_arb(e, 64)
            except CertificationError:
                return None
            best = best.max(flint.arb(ball.abs_upper()))
        return best

    def denominator(self) -> int:
        """The lcm of the denominators of the rationals in the entries (for digit bounds)."""
        if self.rational is not None:
            return int(self.rational.numer_denom()[1])
        den = 1
        for e in self.entries():
            for r in e.atoms(sympy.Rational):
                den = den * int(r.q) // gcd(den, int(r.q))
        return den

    def to_sympy(self) -> sympy.ImmutableMatrix:
        if self._sympy is None:             # a rational matrix, not yet asked for in SymPy
            assert self.rational is not None
            self._sympy = sympy.ImmutableMatrix(
                self.rows, self.cols, [fmpq_to_sympy(e) for e in self.rational.entries()])
        return self._sympy


def plain_scalar(value: object) -> object:
    """numpy scalars become Python scalars (then read exactly, floats by text)."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (sympy.Basic, str)) and callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            return value
    return value


def rows_of(name: str, value: object) -> list[list[object]]:
    """Turn a matrix-like input into a list of rows, with clear shape errors."""
    if isinstance(value, sympy.MatrixBase):
        return value.tolist()   # (row by row through value.row(i) is 20× slower)
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (str, bytes)):
        value = tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ProblemError(
            f"{name} must be a matrix (a list of rows such as [[1, 0], [0, 1]]), "
            f"got {type(value).__name__}"
        )
    if len(value) == 0:
        raise ProblemError(f"{name} is empty: give at least one row with at least one entry")
    if len(value) > MAX_SIDE:   # before looking at any entry: a flat list of 10^5 numbers too
        kind = "rows" if isinstance(value[0], Sequence) and not isinstance(value[0], (str, bytes)) \
            else "numbers in one flat list"
        raise ProblemError(f"{name} has {len(value):,} {kind}; symattn handles at most "
                           f"{MAX_SIDE:,} rows or columns (MAX_SIDE): {name} must be a list of "
                           "rows such as [[1, 0], [0, 1]]")
    is_row = [isinstance(r, Sequence) and not isinstance(r, (str, bytes)) for r in value]
    if not any(is_row):
        return [list(value)]  # a flat list is one row
    if not all(is_row):
        raise ProblemError(f"{name} mixes rows and single numbers: write every row as a list")
    width = len(value[0])
    if width > MAX_SIDE:
        raise ProblemError(f"{name} has {width:,} columns; symattn handles at most "
                           f"{MAX_SIDE:,} (MAX_SIDE)")
    if len(value) * width > MAX_ENTRIES:
        raise ProblemError(f"{name} is {len(value):,}×{width:,} = {len(value) * width:,} entries; "
                           f"symattn handles at most {MAX_ENTRIES:,} per matrix (MAX_ENTRIES)")
    rows = [list(r) for r in value]
    for i, row in enumerate(rows):
        if len(row) == 0:
            raise ProblemError(f"{name} row {i} is empty: every row needs at least one entry")
        if len(row) != width:
            raise ProblemError(
                f"{name} row {i} has {len(row)} entries but row 0 has {width}: "
                "every row needs the same length"
            )
    return rows


_MAGNITUDE = flint.fmpq(MAX_ENTRY_MAGNITUDE)


def magnitude_error(where: str, shown: str) -> ProblemError:
    return ProblemError(
        f"{where} is {shown}, over the magnitude cap of {MAX_ENTRY_MAGNITUDE:,} "
        "(MAX_ENTRY_MAGNITUDE): rescale the inputs (attention sees only score differences "
        "times the scale)")


def check_magnitude(value: flint.fmpq | sympy.Expr, where: str) -> None:
    """Refuse |value| > MAX_ENTRY_MAGNITUDE (symbolic values are not bounded here)."""
    if isinstance(value, flint.fmpq):
        if abs(value) > _MAGNITUDE:
            shown = str(value) if len(str(value.p)) + len(str(value.q)) < 30 else "too large"
            raise magnitude_error(where, shown)
        return
    if value.free_symbols:
        return
    try:
        ball = to_arb(value, 64)
    except CertificationError:
        return   # functions the balls do not know: nothing to bound here
    if not ball.is_finite() or ball.abs_lower() > MAX_ENTRY_MAGNITUDE \
            or ball.abs_upper() > 2 * MAX_ENTRY_MAGNITUDE:
        raise magnitude_error(where, f"about {ball.mid().str(3, radius=False)}")
    if ball.abs_upper() > MAX_ENTRY_MAGNITUDE:   # near the cap: decide exactly
        from symattn.numbers.compare import compare

        if compare(abs(value), sympy.Integer(MAX_ENTRY_MAGNITUDE)) > 0:
            raise magnitude_error(where, f"about {ball.mid().str(3, radius=False)}")


def _entry(value: object, where: str, symbols: bool | Collection[str],
           bounded: bool = True) -> flint.fmpq | sympy.Expr:
    """One exact entry within the caps: an fmpq on the fast paths, else a SymPy number.

    ``bounded``: the entry feeds the scores, so its magnitude is capped too."""
    value = plain_scalar(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if bounded and abs(value) > MAX_ENTRY_MAGNITUDE:
            raise magnitude_error(where, f"{value:.3e}" if value.bit_length() < 1000
                                  else "too large")
        return flint.fmpq(value)
    if isinstance(value, str):  # also a TOML float's DecimalText
        match = _NUMERAL.fullmatch(str.__str__(value))
        if match:
            sign, whole, frac = match.groups()
            frac = frac or ""
            q = flint.fmpq(int(whole + frac), 10 ** len(frac))
            q = -q if sign == "-" else q
            if bounded and len(whole) > 6:   # under 10^6 whatever its decimals: no check
                check_magnitude(q, where)
            return q
    if isinstance(value, sympy.Rational):   # a variant's exact entries: no parsing to do
        q = flint.fmpq(int(value.p), int(value.q))
        if bounded:
            check_magnitude(q, where)
        return q
    direct = isinstance(value, sympy.Basic)  # a SymPy value may hold symbols: that is intent
    exact = to_exact(value, where=where, symbols=bool(symbols) or direct, symbol_hint=True)
    if exact.is_Rational:
        q = flint.fmpq(int(exact.p), int(exact.q))
        if bounded:
            check_magnitude(q, where)
        return q
    if not direct:
        check_symbols(exact, where, symbols)
    if bounded:
        check_magnitude(exact, where)
    return exact


def _decimal_numerals(rows: list[list[object]]) -> tuple[flint.fmpq_mat, flint.fmpq] | None:
    """The common case of :func:`exact_matrix`, in bulk: every entry a short decimal numeral
    ("-1.25", "3") with at most 6 digits before the point (under every magnitude cap), read as
    integers over one power of ten; None for anything else (the entry-by-entry path).  With
    it, the largest |entry| (for :meth:`ExactMatrix.max_abs`: read here from the integers)."""
    flat = list(chain.from_iterable(rows))
    found = _uniform_numerals(flat)
    if found is None:
        found = _mixed_numerals(flat)
        if found is None:
            return None
    scaled, places = found
    r, c = len(rows), len(rows[0])
    top = flint.fmpq(max(map(abs, scaled)), 10 ** places)
    return flint.fmpq_mat(flint.fmpz_mat(r, c, scaled)) / 10 ** places, top


def _uniform_numerals(flat: list[object]) -> tuple[list[int], int] | None:
    """Numerals that all have the first one's number of decimals ("0.5", "-1.0", ...): one
    regular expression over the joined text looks for a line that is not such a numeral (with
    at most 6 digits before the point), and then the text without its points is the
    integers, read by C loops (a third of the entry-by-entry time).  None when any entry is
    another kind."""
    try:
        text = "\n".join(flat)            # type: ignore[arg-type]   # a TypeError: not all str
    except TypeError:
        return None
    first = str.__str__(flat[0])          # type: ignore[arg-type]   # join took it: a str
    dot = first.find(".")
    places = 0 if dot < 0 else len(first) - dot - 1
    if places > 60 or _not_uniform(places).search(text) is not None:
        return None
    parts = text.replace(".", "").split("\n")
    if len(parts) != len(flat):         # an entry held a newline: the search saw two numerals
        return None
    return list(map(int, parts)), places


@lru_cache(maxsize=64)
def _not_uniform(places: int) -> re.Pattern[str]:
    """The start of a line that is not a numeral with exactly ``places`` decimals (0: none,
    or a bare point).  A search, not a repeated match: the engine keeps no state per line."""
    numeral = r"[+-]?[0-9]{1,6}" + (r"\.?" if places == 0 else r"\.[0-9]{%d}" % places)
    return re.compile(rf"^(?!{numeral}$)", re.MULTILINE)


def _mixed_numerals(flat: list[object]) -> tuple[list[int], int] | None:
    """Numerals with different numbers of decimals ("1", "0.25"), one at a time."""
    parts, places = [], 0
    fullmatch = _NUMERAL.fullmatch
    for v in flat:
        match = fullmatch(str.__str__(v)) if isinstance(v, str) else None
        if match is None:
            return None
        sign, whole, frac = part = match.groups("")
        if len(whole) > 6:
            return None
        if len(frac) > places:
            places = len(frac)
        parts.append(part)
    return [int(whole + frac) * 10 ** (places - len(frac)) * (-1 if sign == "-" else 1)
            for sign, whole, frac in parts], places


def check_symbols(value: sympy.Expr, where: str, allowed: bool | Collection[str]) -> None:
    """Names in a string must be declared: a typo must not become a symbol."""
    if isinstance(allowed, bool) or not value.free_symbols:
        return
    unknown = sorted(str(x) for x in value.free_symbols if str(x) not in allowed)
    if unknown:
        names = ", ".join(f'"{x}"' for x in [*allowed, unknown[0]])
        raise ProblemError(
            f"{where} uses the name {unknown[0]!r}, which is not declared: declare it with "
            f"symbols = [{names}] in the problem file (symbols=[{names}] in Python) "
            "or write a number")


def symbol_matrix(prefix: str, rows: int, cols: int) -> sympy.ImmutableMatrix:
    """A matrix of real symbols named ``{prefix}{i}{j}`` (``q00``, ``q01``, ...)."""
    sep = "_" if rows > 9 or cols > 9 else ""
    return sympy.ImmutableMatrix(rows, cols, lambda i, j: sympy.Symbol(
        f"{prefix}{i}{sep}{j}", real=True))


def exact_matrix(name: str, value: object, *, symbols: bool | Collection[str] = False,
                 bounded: bool = False) -> "ExactMatrix":
    """Coerce a matrix-like input entry by entry to an :class:`ExactMatrix`.

    ``symbols``: True allows any name in strings, a collection allows those
    names; SymPy expressions passed directly may always hold symbols.  ``bounded``:
    cap every entry's magnitude (MAX_ENTRY_MAGNITUDE), for the matrices that make
    the scores; values (V, W_v) only scale the outputs and meet the digit caps."""
    rows = rows_of(name, value)
    r, c = len(rows), len(rows[0])
    decimals = _decimal_numerals(rows)
    if decimals is not None:
        return ExactMatrix(rational=decimals[0], largest=decimals[1])
    entries = [_entry(v, f"{name}[{i}][{j}]", symbols, bounded)
               for i, row in enumerate(rows) for j, v in enumerate(row)]
    if all(isinstance(e, flint.fmpq) for e in entries):
        return ExactMatrix(rational=flint.fmpq_mat(r, c, entries))
    values = [fmpq_to_sympy(e) if isinstance(e, flint.fmpq) else e for e in entries]
    return ExactMatrix(general=sympy.ImmutableMatrix(r, c, values))
