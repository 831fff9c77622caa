"""What a PrairieLearn question written by ``symattn export --to prairielearn`` runs.

The question's ``server.py`` holds the teacher's problem files (server side
only: PrairieLearn never sends ``server.py`` to a browser) and calls these
two functions, so the grading logic lives in symattn, tested, not in a
generated file.

- :func:`generate` picks the version — ``data["variant_seed"]`` modulo the
  number of versions, or, for ``--random``, a fresh hand-friendly version
  drawn with that seed — and fills ``data["params"]`` (the inputs to show)
  and ``data["correct_answers"]`` (one matrix per question, certified
  decimals; PrairieLearn compares floats with ``sigfig``/``decdig``).
- :func:`grade` judges every typed entry again with symattn's own checker
  (the text as typed, exactly), scores each question by the sheet's rule (an
  entry is right when exact, or the certified rounding at the sheet's rounding:
  PrairieLearn's float tolerance would also take 0.1363 for 0.136, or a
  fraction near an irrational value), and adds feedback naming each mistake
  that reproduces an entry and each right value rounded more coarsely than the
  sheet asks, in ``data["feedback"]["symattn"]``; it never shows a right value.
"""

from __future__ import annotations

from html import escape

from symattn.numbers.certify import Rounding
from symattn.classroom.answers import VersionAnswers, describe, plausible, version_answers
from symattn.classroom.fragments import given_html, intro_html
from symattn.classroom.numbers import plain
from symattn.check.codes import Verdict
from symattn.problem.problem import Problem

__all__ = ["generate", "grade", "pick"]


def _rounding(settings: dict) -> Rounding:
    r = settings["rounding"]
    return Rounding(digits=r["digits"]) if "digits" in r else Rounding(places=r["places"])


def _ids(versions: dict[str, str]) -> list[str]:
    return sorted(versions, key=lambda k: (len(k), k))


def pick(data: dict, versions: dict[str, str], settings: dict) -> VersionAnswers:
    """The version this variant shows (the same for generate and grade)."""
    seed = int(data["variant_seed"])
    rounding, questions = _rounding(settings), tuple(settings["questions"])
    if settings.get("random"):
        from symattn.classroom.worksheets.versions import problem_toml, random_versions, spec_from_problem

        base = Problem.from_toml_text(versions[_ids(versions)[0]], source="the base problem")
        drawn = random_versions(spec_from_problem(base), seed, 1)[0]
        toml = problem_toml(drawn)
        return version_answers(Problem.from_toml_text(toml, source="a random version"), rounding,
                               questions, f"R{seed % 10**8}", toml)
    ids = _ids(versions)
    vid = ids[seed % len(ids)]
    return version_answers(Problem.from_toml_text(versions[vid], source=f"version {vid}"), rounding,
                           questions, vid, versions[vid])


def generate(data: dict, versions: dict[str, str], settings: dict) -> None:
    """Fill ``data["params"]`` and ``data["correct_answers"]`` for this variant."""
    v = pick(data, versions, settings)
    data["params"]["title"] = settings.get("title") or v.title
    data["params"]["version"] = settings.get("codes", {}).get(v.vid, v.vid)
    data["params"]["given"] = given_html(v)
    data["params"]["intro"] = intro_html(v)
    for q in v.questions:
        rows = []
        for i in range(q.shape[0]):
            rows.append([float(plain(q.entry(i, j).right(v.rounding))) for j in range(q.shape[1])])
        data["correct_answers"][q.step] = rows


def grade(data: dict, versions: dict[str, str], settings: dict) -> None:
    """Name the mistake behind each wrong entry (``data["feedback"]["symattn"]``)."""
    v = pick(data, versions, settings)
    raw = data.get("raw_submitted_answers") or {}
    submitted = data.get("submitted_answers") or {}
    lines = []
    right: dict[str, int] = {}
    for q in v.questions:
        for k, e in enumerate(q.entries):
            name = f"{q.step}{k + 1}"          # pl-matrix-component-input's name for entry k
            text = raw.get(name, submitted.get(name))
            if text is None or not str(text).strip():
                continue
            verdict = e.checker.check(e.target, str(text))
            sheet = sheet_verdict(v, e, str(text), verdict)
            right[q.step] = right.get(q.step, 0) + (sheet == "right")
            if sheet in ("coarse", "finer"):
                lines.append(f"<li><code>{escape(e.target)}</code>: {escape(_precision_note(v, e, str(text), sheet))}</li>")
            elif verdict.code == Verdict.MISTAKE and verdict.mistake is not None \
                    and plausible(verdict.mistake, verdict.mistake_detail):   # a mistake is named
                lines.append(f"<li><code>{escape(e.target)}</code>: "
                             f"{escape(describe(verdict.mistake, verdict.mistake_detail))}</li>")
            elif verdict.code == Verdict.LAST_DIGIT:
                how = "cut instead of rounded" if verdict.entries and verdict.entries[0].truncation \
                    else "one unit off in the last place: check the rounding"
                lines.append(f"<li><code>{escape(e.target)}</code>: {how}</li>")
    _score(data, v, right)
    data.setdefault("feedback", {})
    if lines:
        data["feedback"]["symattn"] = "<p>What went wrong, where symattn can tell:</p><ul>" + \
            "".join(lines) + "</ul>"


def sheet_verdict(v: VersionAnswers, e, text: str, verdict) -> str:
    """The sheet's rule, as the self-check page applies it: ``right`` (exact, or the certified
    rounding at the sheet's rounding), ``coarse`` (right at fewer places than the sheet's),
    ``finer`` (right at more places), or ``not-right``."""
    from symattn.classroom.selfcheck_data import canonical, canonical_decimal, places_of

    if verdict.code == Verdict.EXACT:
        return "right"
    if not verdict.right:
        return "not-right"
    sheet = e.right(v.rounding)
    typed = canonical(text)
    if typed is None:
        return "not-right"
    if typed[0] == canonical_decimal(sheet) or typed[1] == places_of(sheet):
        return "right"            # the sheet's rounding (or, at an exact tie, its other neighbour)
    return "coarse" if typed[1] < places_of(sheet) else "finer"


def _precision_note(v: VersionAnswers, e, text: str, sheet: str) -> str:
    from symattn.classroom.selfcheck_data import canonical, places_of

    typed = canonical(text)
    assert typed is not None, "a precision note is only for a decimal typed (coarse or finer)"
    places = typed[1]
    here = places_of(e.right(v.rounding))
    at = f"{places} decimal place{'s' if places != 1 else ''}"
    asked = f"the sheet asks for {v.rounding} ({here} decimal place{'s' if here != 1 else ''} here)"
    return f"right to {at}, but {asked}" if sheet == "coarse" else f"rounded to {at}: {asked}"


def _score(data: dict, v: VersionAnswers, right: dict[str, int]) -> None:
    """Each question's score by the sheet's rule (its right entries over its entries), and the
    total as PrairieLearn weighs the questions."""
    scores = data.get("partial_scores")
    if not isinstance(scores, dict):
        return
    for q in v.questions:
        if isinstance(scores.get(q.step), dict):
            scores[q.step]["score"] = right.get(q.step, 0) / len(q.entries)
    parts = [(s.get("score", 0) or 0, s.get("weight", 1)) for s in scores.values() if isinstance(s, dict)]
    total = sum(w for _, w in parts)
    if total:
        data["score"] = sum(x * w for x, w in parts) / total
