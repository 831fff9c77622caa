"""One verdict per figure: which named mistake, if any, explains what was written.

Why a module of its own: a diagnosis is a claim about the WHOLE figure.  A
mistake that gives 6.31 for one entry of ``1.86, 6.31, 1.70`` but 1.71 for
the third does not explain the answer, and naming it would contradict the
figure itself.  The rules, in order:

1. Every entry right: ``exact`` or ``rounded``, and nothing else is said (a
   right answer that a mistake would also give needs no remark).
2. A single entry one unit off in the last place: ``last-digit`` (saying
   whether it is a truncation).  A slip of one digit explains it as well as
   any mistake could; a mistake that also reproduces every entry is listed
   in ``also`` and named in the message, since it could change the verdict.
   Except early rounding to the places the figure is written at: rounding the
   intermediates to those places first is *how* a last digit comes out one off
   (1.51 for e^(−1) + e^(−2) + 1 = 1.5032… from 0.37 + 0.14 + 1), so when it
   reproduces every entry it is the verdict.
3. Otherwise, a mistake that reproduces EVERY entry, each at the precision
   it is written: ``mistake``.  When several do, the first is the verdict
   and the others are named too (they cannot be told apart here).
4. Otherwise the worst entry's code (``last-digit`` or ``wrong``), with no
   mistake named anywhere.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from symattn.check.verdict import EntryVerdict, FigureVerdict, MistakeCell, name_mistake, worst

__all__ = ["summarise", "settled_by_entries"]

_LIST = 12   # values shown in a figure's message
#: the mistake that explains a last-digit slip by its cause (rule 2)
_EARLY_ROUNDING = "early-rounding"
_PLACES = re.compile(r"rounded to (\d+) place")


def _common(entries: Sequence[EntryVerdict]) -> list[MistakeCell]:
    """The mistakes that reproduce every entry, in the first entry's order."""
    names = [{m.name for m in e.matches} for e in entries]
    common = set.intersection(*names) if names else set()
    seen: dict[str, MistakeCell] = {}
    for m in entries[0].matches:
        if m.name in common and m.name not in seen:
            seen[m.name] = m
    return list(seen.values())


def _named(ms: Sequence[MistakeCell]) -> str:
    """Mistake names for a message: early roundings (often several) are counted."""
    plain = [m.name for m in ms if m.code != "early-rounding"]
    early = [m.name for m in ms if m.code == "early-rounding"]
    if early:
        more = len(early) - 1
        plain.append(early[0] if not more else
                     f"{early[0][:-1]}, or {more} other early rounding{'s' if more > 1 else ''})")
    return ", ".join(plain)


def _values(entries: Sequence[EntryVerdict], attr: str) -> str:
    shown = [getattr(e, attr) or e.exact or e.written for e in entries[:_LIST]]
    return ", ".join(shown) + (", …" if len(entries) > _LIST else "")


def _one_slip(wrong: Sequence[EntryVerdict]) -> bool:
    return len(wrong) == 1 and wrong[0].code == "last-digit"


def _rounded_as_written(m: MistakeCell, entries: Sequence[EntryVerdict]) -> bool:
    """Early rounding to exactly the decimal places every entry is written with."""
    found = _PLACES.search(m.detail or "")
    if m.code != _EARLY_ROUNDING or found is None:
        return False
    places = {len(e.written.split(".", 1)[1]) if "." in e.written else 0 for e in entries}
    return places == {int(found.group(1))}


def settled_by_entries(entries: Sequence[EntryVerdict]) -> bool:
    """Rules 1 and 2: every entry right, or one slip in a last digit.  Then no mistake is
    named whatever the mistakes give (the entries alone decide the verdict)."""
    wrong = [e for e in entries if not e.right]
    return not wrong or _one_slip(wrong)


def summarise(target: str, text: str, variant: str | None, shape: tuple[int, int],
              entries: list[EntryVerdict]) -> FigureVerdict:
    """The figure's verdict from its entries' (the entries are updated to agree)."""
    base: dict[str, Any] = dict(target=target, text=text, variant=variant, entries=entries, shape=shape)
    one = len(entries) == 1
    wrong = [e for e in entries if not e.right]
    if not wrong:
        code = "exact" if all(e.code == "exact" for e in entries) else "rounded"
        message = entries[0].message if one else \
            f"all {len(entries)} entries are right ({_values(entries, 'expected')})"
        return FigureVerdict(code=code, message=message, **base)
    common = _common(entries)
    names = [m.name for m in common]
    early = [m for m in common if _rounded_as_written(m, entries)]
    if _one_slip(wrong) and not early:
        slip = wrong[0]
        slip.also = names
        message = slip.message if one else \
            f"1 of {len(entries)} entries is not right; {slip.label}: {slip.message}"
        if common:
            message += (f"; {_named(common)} would also give "
                        f"{'this figure' if one else 'every entry written'}, but one slip "
                        "in the last digit explains it as well")
        return FigureVerdict(code="last-digit", message=message, also=names, **base)
    if common:
        if _one_slip(wrong):      # early rounding first: it is why the last digit is off
            common = [*early, *(m for m in common if m not in early)]
            names = [m.name for m in common]
        first, others = common[0], names[1:]
        for e in wrong:
            name_mistake(e, first, others)
        same = f"; {_named(common[1:])} give{'s' if len(common) == 2 else ''} it too" \
            if others else ""
        if one:
            message = wrong[0].message + same
        else:
            message = (f"every entry is what the mistake {first.name} gives; the right values "
                       f"are {_values(entries, 'expected')}" + same)
        return FigureVerdict(code="mistake", mistake=first.code,
                             mistake_detail=first.detail or None, also=others, message=message,
                             **base)
    code = worst([e.code for e in entries])
    message = wrong[0].message if one else \
        f"{len(wrong)} of {len(entries)} entries {'is' if len(wrong) == 1 else 'are'} not right; " \
        + _each(wrong)
    return FigureVerdict(code=code, message=message, **base)


def _each(wrong: Sequence[EntryVerdict]) -> str:
    """Every wrong entry's own message (the first _LIST of them), each after its label: a
    student with two slips in a row is told about both, not only the first."""
    told = "; ".join(f"{e.label}: {e.message}" for e in wrong[:_LIST])
    more = len(wrong) - _LIST
    return told + (f"; and {more} more not right (see the entries)" if more > 0 else "")
