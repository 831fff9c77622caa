"""What a self-check page knows: salted hashes of answers, never the answers.

The page holds the student to the SHEET'S rounding.  For every answer box (a
``check`` target such as ``weights[I, love]``) it holds SHA-256(salt | target |
canonical text), truncated to 64 bits, of the certified right value at the
sheet's rounding (3 significant digits, say) and of each named mistake's value
there, mapped to a verdict; nothing at any other precision.  Where the exact
value is rational (the sheet asks whole numbers and short fractions exactly) the
page also holds the hash of its canonical exact form (``=-1/2``, ``=16``), and so
for each mistake whose value is rational.  The browser reduces what the student
typed to the same canonical text (:func:`canonical`, :func:`canonical_exact`,
mirrored in the page's script) and looks its hash up.

A coarser answer (``0.14`` or ``0`` for 0.136) is not looked up at its own
precision (nothing is hashed there): the page hashes the few values at the
sheet's precision that round to it (10 per missing place, at most 10^4) and
says "right to 2 decimal places, but the sheet asks for 3 significant digits"
when the right value is among them.  For that it knows each box's number of
decimal places at the sheet's rounding (``p``: 3 for 0.136, 2 for 6.32), and,
where rounding the sheet's value again is not the rounding of the exact value
(a double-rounding case such as 0.1349 → 0.135 → 0.14), the hash of the true
coarser rounding (``~0.13``) at those few places (``a``).

Canonical text: a plain decimal with exactly as many places as written
(``0.136``, ``-1.15``, ``16``, ``16.0``), no leading zeros beyond one before the
point, no sign on zero; ``13.6%`` is ``0.136``; a decimal comma is a point; a
Unicode minus is ``-``.  Canonical exact text: the fraction in lowest terms,
``-1/2``, ``16``, ``0`` (a typed decimal is read as the fraction it is: ``-0.5``
is ``-1/2``).

What this does and does not hide (docs/classroom.md, "How strong is it"): the
page's source holds no answer and no mistake's value in readable form, and
since only the sheet's precision is hashed, an answer can no longer be read
off digit by digit (10 tries a place).  It is still a checker: a search over
every value with the sheet's number of digits finds a box's answer (about 900
three-digit values, plus the handful of magnitudes, a few thousand hashes: well
under a second), a rational answer with a short fraction is as quick, and the
page shows the inputs, from which anyone who works them has the answers.  It
is a self-check, not an exam.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from fractions import Fraction

from symattn.errors import VALUE_FAILURES
from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.classroom.answers import VersionAnswers

__all__ = ["MAX_COARSE", "MAX_PAGE_PLACES", "MAX_PLACES", "PageData", "page_places", "canonical",
           "canonical_decimal", "canonical_exact", "digest", "exact_text", "page_data", "salt_for"]

MAX_PLACES = 6          # kept for callers: the places a page judged before it held students to the sheet
MAX_PAGE_PLACES = 12    # at most, where the sheet's own rounding needs more (3 digits of 1.23e-9 do not fit)
MAX_COARSE = 4          # a coarser answer is recognised up to 4 places short (10^4 hashes in the browser)
HASH_HEX = 16           # 64 bits of SHA-256 per entry: no collisions among a page's few thousand

_NUMERAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,3}))?(%?)")
_APPROX = re.compile(r"^(?:≈|~|≃|=|about\b|approx\.?)\s*", re.IGNORECASE)


def canonical(text: str) -> tuple[str, int] | None:
    """What a student typed as (canonical text, decimal places), or None if it is no decimal."""
    t = text.strip().replace("−", "-").replace("–", "-")
    t = _APPROX.sub("", t)
    t = re.sub(r"[\s\u00a0\u2009\u202f]", "", t)
    if "," in t and "." not in t and t.count(",") == 1:
        t = t.replace(",", ".")
    match = _NUMERAL.fullmatch(t)
    if not match or not (match.group(2) or match.group(3)):
        return None
    sign, whole, frac, exp, percent = match.groups()
    frac = frac or ""
    digits = whole + frac
    places = len(frac) - int(exp or 0) + (2 if percent else 0)
    if places < 0:
        digits += "0" * -places
        places = 0
    return _join(sign, digits, places), places


def _join(sign: str, digits: str, places: int) -> str:
    digits = digits.lstrip("0").rjust(places + 1, "0")
    if set(digits) == {"0"}:
        sign = ""
    sign = "-" if sign == "-" else ""
    return sign + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)


def canonical_decimal(d: CertifiedDecimal) -> str:
    """A certified rounding (at places or significant digits) as canonical text."""
    digits = str(abs(d.mantissa)) + "0" * max(d.exponent, 0)
    return _join("-" if d.mantissa < 0 else "", digits, max(-d.exponent, 0))


def places_of(d: CertifiedDecimal) -> int:
    """The decimal places a rounding is written with (0.136: 3, 16.0: 1, 1.23e4: 0)."""
    return max(-d.exponent, 0)


_FRACTION = re.compile(r"([+-]?)([0-9]+)/([0-9]+)")


def exact_text(value: Fraction) -> str:
    """A rational in its canonical exact form: lowest terms, ``-1/2``, ``16``, ``0``."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def canonical_exact(text: str) -> str | None:
    """What a student typed as an exact rational (``-1/2``, ``−2/4``, ``-0.5``, ``16``) in its
    canonical form, or None when it is neither a fraction of whole numbers nor a decimal."""
    t = re.sub(r"[\s\u00a0\u2009\u202f]", "", text.strip().replace("−", "-").replace("–", "-"))
    match = _FRACTION.fullmatch(t)
    if match:
        sign, num, den = match.groups()
        if int(den) == 0 or len(num) + len(den) > 40:
            return None
        return exact_text(Fraction(int(num) * (-1 if sign == "-" else 1), int(den)))
    decimal = canonical(text)
    if decimal is None:
        return None
    body, places = decimal
    return exact_text(Fraction(int(body.replace(".", "")), 10 ** places))


def salt_for(v: VersionAnswers) -> str:
    """A per-page salt, the same for the same version (same seed, same bytes).

    From the problem's own lines only: a worksheet version's first line names its seed,
    and the salt is printed in the page, so comment lines are left out."""
    body = "\n".join(line for line in v.toml.splitlines() if not line.lstrip().startswith("#"))
    return hashlib.sha256(("symattn selfcheck salt\0" + v.vid + "\0" + body).encode()).hexdigest()[:32]


def digest(salt: str, target: str, text: str) -> str:
    return hashlib.sha256(f"{salt}|{target}|{text}".encode()).hexdigest()[:HASH_HEX]


@dataclass
class PageData:
    salt: str
    rounding: str                              # the sheet's rounding, in words (3 significant digits)
    mistakes: list[dict]                       # [{"code": ..., "says": ...}]; verdict k ≥ 1 is mistakes[k-1]
    targets: dict[str, dict]                   # target → {"h": {hash: verdict}, "p": places, "x": 0|1, "a": [...]}
    places: int = 0                            # the most places a box's answer has at the sheet's rounding

    def to_json(self) -> dict:
        return {"salt": self.salt, "rounding": self.rounding, "coarse": MAX_COARSE,
                "mistakes": self.mistakes, "targets": self.targets}


def page_places(v: VersionAnswers) -> int:
    """The most decimal places an answer has at the sheet's rounding (3 significant digits of
    0.0000123 need 7 places), refused past MAX_PAGE_PLACES."""
    from symattn.classroom.answers import ClassroomError

    needed = max((-e.right(v.rounding).exponent for q in v.questions for e in q.entries), default=0)
    if needed > MAX_PAGE_PLACES:
        raise ClassroomError(f"version {v.label}: an answer at {v.rounding} needs {needed} decimal "
                             f"places; a self-check page judges at most {MAX_PAGE_PLACES} "
                             "(MAX_PAGE_PLACES): round to fewer digits, or ask other questions")
    return max(needed, 0)


def _rational(cell) -> Fraction | None:
    """A cell's exact value when it is rational (None otherwise, or when it cannot be had)."""
    try:
        value = cell.exact
        return Fraction(int(value.p), int(value.q)) if value.is_Rational else None
    except VALUE_FAILURES:      # a value that cannot be had is not hashed exactly
        return None


def _accepted(mantissa: int, shift: int) -> set[int]:
    """The coarser mantissas the page's search accepts for a sheet mantissa ``shift`` places
    finer: those within half a coarse unit (both neighbours at an exact half)."""
    unit = 10 ** shift
    low, high = -((-(2 * mantissa - unit)) // (2 * unit)), (2 * mantissa + unit) // (2 * unit)
    return set(range(low, high + 1))


def _double_rounding(e, right: CertifiedDecimal, salt: str, table: dict[str, int]) -> list[int]:
    """The coarser places where the page must not round the sheet's value again (its search
    would accept a neighbour of the true rounding): the true rounding's hash goes in
    (``~text``), and the places are listed."""
    places = places_of(right)
    if right.exponent > 0:
        return []
    odd = []
    for coarse in range(max(0, places - MAX_COARSE), places):
        true = e.right(Rounding(places=coarse))
        if _accepted(right.mantissa, places - coarse) != {true.mantissa}:
            odd.append(coarse)
            table[digest(salt, e.target, "~" + canonical_decimal(true))] = 0
    return odd


def _tie_neighbours(exact: Fraction, right: CertifiedDecimal) -> list[str]:
    """The other neighbour of an exact value halfway between two numbers at the sheet's
    precision (1/8 at 2 places: 0.12 beside 0.13), as ``check`` accepts either."""
    places = places_of(right)
    if right.exponent > 0:
        return []
    scaled = exact * 10 ** places
    if scaled.denominator != 2:
        return []
    low = scaled.numerator // 2
    other = low if right.mantissa != low else low + 1
    return [_join("-" if other < 0 else "", str(abs(other)), places)]


def page_data(v: VersionAnswers) -> PageData:
    """Every box's hashes at the sheet's rounding (the right value, then each mistake that
    differs), the exact forms of rational values, and what the coarse search needs."""
    from symattn.classroom.worksheets.document import SHORT_FRACTION

    salt = salt_for(v)
    page_places(v)                     # refuse a page whose answers need too many places
    labels: dict[tuple[str, str], int] = {}
    mistakes: list[dict] = []
    targets: dict[str, dict] = {}
    most = 0
    for q in v.questions:
        for e in q.entries:
            table: dict[str, int] = {}
            answers = e.answers(v.rounding)
            right = answers[0].value
            table[digest(salt, e.target, canonical_decimal(right))] = 0
            exact = _rational(e.cell)
            if exact is not None:
                table[digest(salt, e.target, "=" + exact_text(exact))] = 0
                for other in _tie_neighbours(exact, right):      # an exact tie: either is right
                    table[digest(salt, e.target, other)] = 0
            for a in answers[1:]:
                key = (a.codes[0], a.feedback)
                if key not in labels:
                    mistakes.append({"code": a.codes[0], "says": a.feedback})
                    labels[key] = len(mistakes)
                table.setdefault(digest(salt, e.target, canonical_decimal(a.value)), labels[key])
                for m in a.mistakes:
                    value = _rational(m.cell)
                    if value is not None and value != exact:
                        table.setdefault(digest(salt, e.target, "=" + exact_text(value)), labels[key])
            odd = _double_rounding(e, right, salt, table)
            short = exact is not None and len(exact_text(abs(exact))) <= SHORT_FRACTION
            most = max(most, places_of(right))
            targets[e.target] = {"h": table, "p": places_of(right), "x": int(short), "a": odd}
    return PageData(salt, str(v.rounding), mistakes, targets, most)
