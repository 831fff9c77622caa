"""A PrairieLearn question folder: info.json, question.html, server.py.

PrairieLearn's question format (docs.prairielearn.com): ``info.json`` (uuid,
title, topic, tags, type "v3"), ``question.html`` (a Mustache template with
elements) and ``server.py`` (``generate(data)``, ``grade(data)``).  Each
question of the sheet is a ``pl-matrix-component-input`` (one box per entry,
per-entry partial credit and marks on the wrong entries), compared with
``sigfig`` or ``decdig`` digits as the sheet rounds, fractions allowed (the sheet asks
whole numbers and short fractions exactly: ``-1/2``).  ``server.py``'s grade() then
scores each question by the sheet's rule, as the self-check page does: an entry is right
when it is exact or the certified rounding at the sheet's rounding; a right value rounded
more coarsely (``0.14`` for 0.136) earns nothing and is told so.  ``server.py`` imports
symattn (install it in the course's Python) and calls
:mod:`symattn.classroom.plruntime`.  The uuid is derived from the content,
so exporting the same worksheet again keeps the question's identity.
"""

from __future__ import annotations

import json
import pprint
import uuid
from html import escape

from symattn.classroom.answers import VersionAnswers
from symattn.classroom.output import MARK
from symattn.trace.steps import step_symbol

__all__ = ["prairielearn_files"]

_NAMESPACE = uuid.UUID("6c1f5e0a-3d0c-4c55-9a51-53796d617474")


def _settings(versions: list[VersionAnswers], random: bool) -> dict:
    v = versions[0]
    r = v.rounding
    settings: dict[str, object] = {"rounding": {"digits": r.digits} if r.digits is not None else {"places": r.places},
                "questions": [q.step for q in v.questions], "random": random, "title": v.title}
    codes = {w.vid: w.code for w in versions if w.code}
    if codes and not random:
        settings["codes"] = codes        # the version a student sees is named as their sheet
    return settings


def _question_html(v: VersionAnswers) -> str:
    r = v.rounding
    comparison = (f'comparison="sigfig" digits="{r.digits}"' if r.digits is not None
                  else f'comparison="decdig" digits="{r.places}"')
    out = ["<pl-question-panel>",
           "  <p><strong>{{params.title}}</strong> (version {{params.version}})</p>",
           "  {{{params.given}}}", "  {{{params.intro}}}", "</pl-question-panel>", ""]
    for q in v.questions:
        out += [f"<p>{q.number}. Compute {escape(q.ask)}, ${q.formula_latex}$ "
                f"(${q.shape[0]} \\times {q.shape[1]}$).</p>",
                f'<pl-matrix-component-input answers-name="{q.step}" {comparison} '
                'allow-partial-credit="true" allow-feedback="true" allow-fractions="true" '
                f'label="${escape(step_symbol(q.step, v.problem))} =$"></pl-matrix-component-input>', ""]
    out += ["<pl-submission-panel>",
            "  {{#feedback.symattn}}<div>{{{feedback.symattn}}}</div>{{/feedback.symattn}}",
            "</pl-submission-panel>", ""]
    return "\n".join(out)


def _server_py(versions: list[VersionAnswers], random: bool) -> str:
    table = "".join(f"    {v.vid!r}: {v.toml!r},\n" for v in versions)
    settings = pprint.pformat(_settings(versions, random), sort_dicts=False)
    return f'''# {MARK}
"""PrairieLearn question server, written by `symattn export --to prairielearn`.

It needs symattn installed in the course's Python.  VERSIONS holds the
teacher's problem files (server side only); generate() picks the version
from data["variant_seed"]{" and draws a fresh hand-friendly version from it" if random else ""},
and grade() names the mistake behind each wrong entry.
"""

from symattn.classroom import plruntime

SETTINGS = {settings}

VERSIONS = {{
{table}}}


def generate(data):
    plruntime.generate(data, VERSIONS, SETTINGS)


def grade(data):
    plruntime.grade(data, VERSIONS, SETTINGS)
'''


def prairielearn_files(versions: list[VersionAnswers], random: bool = False) -> dict[str, str]:
    """The question folder's files, by name."""
    first = versions[0]
    ident = uuid.uuid5(_NAMESPACE, "\0".join([first.title, str(random), *(v.toml for v in versions)]))
    kind = "a fresh random version per variant" if random else f"{len(versions)} version(s)"
    info = {"uuid": str(ident), "title": f"{first.title} ({kind})", "topic": "Attention",
            "tags": ["symattn", "attention", "softmax"], "type": "v3"}
    return {"info.json": json.dumps(info, indent=2, ensure_ascii=False) + "\n",
            "question.html": _question_html(first),
            "server.py": _server_py(versions, random)}
