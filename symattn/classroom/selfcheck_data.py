"""What a self-check page knows: salted hashes of answers, never the answers.

For every answer box (a ``check`` target such as ``weights[I, love]``) and
every precision a student may write (0 to 6 decimal places), the page holds
SHA-256(salt | target | canonical text) of the certified right rounding and
of each named mistake's rounding there, truncated to 64 bits, mapped to a
verdict.  The browser reduces what the student typed to the same canonical
text (:func:`canonical`, mirrored in the page's script) and looks its hash up.

Canonical text: a plain decimal with exactly as many places as written
(``0.136``, ``-1.15``, ``16``, ``16.0``), no leading zeros beyond one before
the point, no sign on zero; ``13.6%`` is ``0.136``; a decimal comma is a
point; a Unicode minus is ``-``.

What this does and does not hide: the page's source holds no answer and no
mistake's value in readable form.  It is still a checker: anyone may try
values one at a time (as with any self-check), and because every precision
is accepted, 10 tries per extra digit find an answer; the hashes stop reading
the key off the page, not a determined search.  And the page shows the inputs:
anyone who works them (by hand, or with symattn) has the answers.  It is a
self-check, not an exam.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.classroom.answers import VersionAnswers

__all__ = ["MAX_PAGE_PLACES", "MAX_PLACES", "PageData", "page_places", "canonical", "canonical_decimal", "digest", "page_data", "salt_for"]

MAX_PLACES = 6          # places a page judges at least (a student may round to any of 0 … 6)
MAX_PAGE_PLACES = 12    # at most, where the sheet's own rounding needs more (3 digits of 1.23e-9 do not fit)
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
    """A certified rounding at fixed places as canonical text."""
    if d.rounding.places is None:
        raise ValueError("canonical texts are roundings at fixed decimal places")
    return _join("-" if d.mantissa < 0 else "", str(abs(d.mantissa)), d.rounding.places)


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
    mistakes: list[dict]                       # [{"code": ..., "says": ...}]; verdict k ≥ 1 is mistakes[k-1]
    targets: dict[str, dict[str, int]]         # target → {hash: 0 (right) or k}
    places: int = MAX_PLACES                   # the most places the page judges

    def to_json(self) -> dict:
        return {"salt": self.salt, "maxPlaces": self.places, "mistakes": self.mistakes,
                "targets": self.targets}


def page_places(v: VersionAnswers) -> int:
    """The most decimal places the page judges: 6, or what the sheet's rounding needs
    (3 significant digits of 0.0000123 need 7 places), up to MAX_PAGE_PLACES."""
    from symattn.classroom.answers import ClassroomError

    needed = max((-e.right(v.rounding).exponent for q in v.questions for e in q.entries), default=0)
    if needed > MAX_PAGE_PLACES:
        raise ClassroomError(f"version {v.label}: an answer at {v.rounding} needs {needed} decimal "
                             f"places; a self-check page judges at most {MAX_PAGE_PLACES} "
                             "(MAX_PAGE_PLACES): round to fewer digits, or ask other questions")
    return max(MAX_PLACES, needed)


def page_data(v: VersionAnswers) -> PageData:
    """Every box's hashes at 0 … 6 places: the right value, then each mistake that differs."""
    salt = salt_for(v)
    places_max = page_places(v)
    labels: dict[tuple[str, str], int] = {}
    mistakes: list[dict] = []
    targets: dict[str, dict[str, int]] = {}
    for q in v.questions:
        for e in q.entries:
            table: dict[str, int] = {}
            for places in range(places_max + 1):
                answers = e.answers(Rounding(places=places))
                table[digest(salt, e.target, canonical_decimal(answers[0].value))] = 0
                for a in answers[1:]:
                    key = (a.codes[0], a.feedback)
                    if key not in labels:
                        mistakes.append({"code": a.codes[0], "says": a.feedback})
                        labels[key] = len(mistakes)
                    table.setdefault(digest(salt, e.target, canonical_decimal(a.value)), labels[key])
            targets[e.target] = table
    return PageData(salt, mistakes, targets, places_max)
