"""The precision policy of the numbers layer: one start, one cap, one context.

Every proof symattn makes about a number (a rounding, a sign, an error in
ULPs) is a loop over arb balls of rising precision.  They all share what is
here, so that there is one answer to "how many bits?":

* :func:`start_bits` — the first precision tried for ``digits`` decimal
  digits: ``ceil(digits · log2 10) + GUARD_BITS``.  arb's precision is
  relative, so this is enough for every value that is not close to a
  rounding boundary; the loop doubles it otherwise.
* :func:`cap_bits` — the last precision tried: ``8 · start_bits(digits) +
  2**16``.  A value still undecided there lies within about 2^-65,000 (and
  within a relative 2^-(7 · bits asked for)) of a rounding boundary or of 0.
  That is a true tie or an exact 0 that no ball can decide (they are
  recognised exactly before the cap is reached), or a coincidence built
  on purpose.  The 2^16 also pays for large magnitudes: e^-x needs about
  log2 x extra bits, so scores up to 10^19,000 fit.  At 100,000 digits the
  cap is 2.7 million bits; one attempt there takes seconds, not minutes.
* :func:`precision` — a context manager that sets python-flint's global
  precision and always restores it (flint's context is process-wide, so
  this is not thread-safe; nothing in symattn uses threads).
* :func:`precisions` — the loop itself: start, double, ..., cap.
* :func:`undecided` — the one refusal, a :class:`CertificationError` that
  says what could not be decided, within how many bits, and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import flint

from symattn.errors import CertificationError

__all__ = ["GUARD_BITS", "MAX_BITS", "SIGN_DIGITS", "cap_bits", "precision", "precisions", "start_bits",
           "undecided"]

#: extra bits beyond the digits asked for
GUARD_BITS = 30
#: the digits a sign or order decision is started at (64 bits)
SIGN_DIGITS = 10
#: the fixed part of the cap (see the module docstring)
CAP_EXTRA_BITS = 1 << 16
#: no arb computation runs above this (2^24 bits, 5 million digits: past it
#: arb's memory, and its exponent arithmetic, can fail with a signal)
MAX_BITS = 1 << 24
_LOG2_10 = math.log2(10)


def start_bits(digits: int) -> int:
    """The starting precision (bits) for ``digits`` correct decimal digits."""
    return math.ceil(max(1, digits) * _LOG2_10) + GUARD_BITS


def cap_bits(digits: int) -> int:
    """The largest precision (bits) any loop tries for ``digits`` decimal digits."""
    return 8 * start_bits(digits) + CAP_EXTRA_BITS


def precisions(digits: int, start: int | None = None) -> Iterator[int]:
    """start, 2·start, 4·start, ..., ending exactly at :func:`cap_bits` (digits)."""
    cap = cap_bits(digits)
    prec = min(cap, start_bits(digits) if start is None else max(2, int(start)))
    while True:
        yield prec
        if prec >= cap:
            return
        prec = min(cap, 2 * prec)


@contextmanager
def precision(bits: int) -> Iterator[int]:
    """Run a block at ``bits`` of arb precision; the previous precision is restored.

    Refuses (CertificationError) more than :data:`MAX_BITS`."""
    if bits > MAX_BITS:
        raise CertificationError(
            f"a precision of {bits:,} bits was asked for, past symattn's limit of {MAX_BITS:,} "
            "bits: ask for fewer digits")
    old = flint.ctx.prec
    flint.ctx.prec = int(bits)
    try:
        yield int(bits)
    finally:
        flint.ctx.prec = old


#: what to do when a rounding cannot be decided
ROUNDING_FIX = ("ask for a different number of digits or places, or give the value in a form "
                "whose exact value symattn recognises (a fraction, a root, e^(r·log b))")


def undecided(what: str, goal: str, bits: int, reason: str, fix: str = ROUNDING_FIX) -> CertificationError:
    """The refusal when a loop reaches its cap: what, to what, within how many bits, why, what to do.

    ``what``: the value ("weights[0, 1]"); ``goal``: what was to be proved
    ("the rounding to 3 significant digits", "the sign"); ``reason``: why
    no ball decides it ("it may sit exactly on a rounding boundary").
    """
    return CertificationError(f"could not prove {goal} of {what} within {bits:,} bits: {reason}; {fix}")
