"""The worksheet download's options: the page's small form, read as ``symattn worksheet``'s flags.

The query of ``/download/worksheet`` names the CLI's flags without their dashes
(``versions``, ``seed``, ``template``, ``questions``, ``points``, ``layout``, ``paper``,
``format``, ``no-derivation``, ``square-dk``, ``allow-ties``, ``min-weight``,
``no-separate``, ``pdf``; ``digits`` or ``places`` from the view).  Each value is read under
the page's caps (at most 10 versions, short texts), then the choices go through the CLI's
own checks (:func:`symattn.classroom.worksheets.choices.refuse_combinations`, and in the
worker the questions' and points' parsers), so the page refuses what the CLI refuses, in
the same words, and its zip is the folder the CLI writes for the same flags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from symattn.classroom.worksheets.choices import SheetChoices, min_weight_value, refuse_combinations
from symattn.errors import ProblemError

__all__ = ["MAX_PAGE_VERSIONS", "SHEET_OPTIONS", "sheet_choices"]

MAX_PAGE_VERSIONS = 10    # random versions of one worksheet from the page (the CLI makes up to 702)
MAX_OPTION_TEXT = 200     # characters of --questions, --points or --min-weight from the page
FLAGS = ("square-dk", "allow-ties", "no-derivation", "no-separate", "pdf")
TEXTS = ("questions", "points", "min-weight")
CHOSEN = ("template", "layout", "paper", "format")
#: every query name the worksheet download reads (``row`` rides along from the view, unused)
SHEET_OPTIONS = ("versions", "seed", "digits", "places", "row", *FLAGS, *TEXTS, *CHOSEN)


def _choices_of(name: str) -> list[str]:
    if name == "template":
        from symattn.classroom.worksheets.templates import template_names

        return template_names()
    if name == "layout":
        from symattn.classroom.worksheets.layouts import LAYOUTS

        return list(LAYOUTS)
    return ["letter", "a4"] if name == "paper" else ["latex", "html"]


def sheet_choices(query: Mapping[str, str], *, tex: bool, digits: int, places: int | None) -> SheetChoices:
    """The worksheet's choices from the download's query (``tex``: the server can compile)."""
    unknown = sorted(set(query) - set(SHEET_OPTIONS))
    if unknown:
        raise ProblemError(f"no worksheet option {unknown[0][:30]!r}; the options are "
                           f"{', '.join(o for o in SHEET_OPTIONS if o != 'row')}")
    flags: dict[str, bool] = {}
    for name in FLAGS:
        value = query.get(name, "0")
        if value not in ("0", "1"):
            raise ProblemError(f"{name} is 1 (on) or 0 (off), got {value[:20]!r}")
        flags[name.replace("-", "_")] = value == "1"
    if flags["pdf"] and not tex:
        from symattn.serve.downloads import NO_TEX

        raise ProblemError(NO_TEX)
    texts = {name: query.get(name) for name in TEXTS}
    for name, text in texts.items():
        if text is not None and len(text) > MAX_OPTION_TEXT:
            raise ProblemError(f"{name} is {len(text):,} characters, over the page's {MAX_OPTION_TEXT}: "
                               "use symattn worksheet")
    chosen: dict[str, str | None] = {name: query.get(name) or None for name in CHOSEN}
    for name, picked in chosen.items():
        if picked is not None and picked not in _choices_of(name):
            raise ProblemError(f"{name} must be one of {', '.join(_choices_of(name))}, got {picked[:30]!r}")
    versions, seed = _versions(query)
    try:
        weight = min_weight_value(texts["min-weight"]) if texts["min-weight"] is not None else None
    except ValueError as exc:
        raise ProblemError(str(exc)) from None
    choices = SheetChoices(
        template=chosen["template"], versions=versions, seed=seed,
        digits=None if places is not None else digits, places=places,
        questions=texts["questions"], points=texts["points"],
        min_weight=weight if weight is not None else SheetChoices().min_weight,
        format=chosen["format"] or "latex", paper=chosen["paper"], layout=chosen["layout"] or "standard",
        square_dk=flags["square_dk"], allow_ties=flags["allow_ties"], no_derivation=flags["no_derivation"],
        no_separate=flags["no_separate"], pdf=flags["pdf"])
    refuse_combinations(choices)
    return choices


def _versions(query: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``versions`` and ``seed`` under the page's caps (None, None: the problem itself)."""
    versions, seed = query.get("versions"), query.get("seed")
    if versions is None:
        if seed is not None:
            raise ProblemError("seed applies to random versions: give versions too")
        return None, None
    if re.fullmatch("[0-9]{1,3}", versions) is None or not 1 <= int(versions) <= MAX_PAGE_VERSIONS:
        raise ProblemError(f"versions must be a whole number from 1 to {MAX_PAGE_VERSIONS}, got "
                           f"{versions[:20]!r}: use symattn worksheet --versions for more")
    if seed is None or re.fullmatch("[0-9]{1,9}", seed) is None:
        raise ProblemError(f"random versions need a seed, a whole number of up to 9 digits, got "
                           f"{(seed or '')[:20]!r}")
    return int(versions), int(seed)
