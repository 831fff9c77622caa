"""The page ``symattn serve`` serves: the inputs as editable grids and the derivation.

The page is the project's HTML shell (:func:`symattn.document.support.page.page`) with the
derivation the HTML printer made; the grids are built by the page's one script
(``static/serve.js``) from the problem, which sits in the page as inert JSON data.  No
script is inline, so the Content-Security-Policy can forbid inline scripts.
"""

from __future__ import annotations

from typing import Any

from symattn.document.support import page as pg
from html import escape
from symattn.output.escaping import script_json
from symattn.serve.derive import MATRIX_KEYS, variant_keys

__all__ = ["downloads_block", "editor_page", "worksheet_form"]


def editor_page(problem: dict[str, Any], fragment: str, *, tex: bool = False) -> str:
    """The whole page for a starting problem (its table) and its derivation (HTML); ``tex``:
    the server can compile PDFs."""
    title = str(problem.get("title") or "symattn")
    body = (
        '<link rel="stylesheet" href="/static/serve.css">\n'
        '<section id="editor" aria-labelledby="editor-h">\n'
        '<h2 id="editor-h">Edit the inputs</h2>\n'
        "<p class=\"note\">Edit any entry, token name, the scale, the mask or a variant: the "
        "derivation below is worked again, exactly. An entry may be an integer, a decimal (read "
        "exactly: 0.1 is 1/10), a fraction such as 2/3 or an expression such as sqrt(2). The "
        "address bar holds the problem, the view and the figures checked below, so the page can be "
        "bookmarked or shared.</p>\n"
        '<div id="grids"></div>\n'
        '<p id="status" role="status" aria-live="polite"></p>\n'
        '<p><button type="button" id="download-toml">Download the problem (TOML)</button> '
        '<span class="help">the last problem derived, for <code>symattn explain problem.toml</code>'
        "</span></p>\n"
        "</section>\n"
        f"{downloads_block(tex)}"
        '<section id="checker" aria-labelledby="checker-h">\n'
        '<h2 id="checker-h">Check my answers</h2>\n'
        '<p class="note">Write a figure for any step (a target such as <code>weights[I]</code>, '
        "<code>scaled[love, love]</code> or <code>sqrt(d_k)</code>, and what you wrote), as "
        "<code>symattn check</code> takes it: each is judged right, rounded, a named mistake or "
        "wrong, against the last problem derived above.</p>\n"
        '<table class="figures"><thead><tr><th scope="col">target</th><th scope="col">written</th>'
        '</tr></thead><tbody id="figure-rows"></tbody></table>\n'
        '<p><button type="button" id="add-figure">+ figure</button> '
        '<button type="button" id="check-figures">Check</button></p>\n'
        '<div id="verdicts"></div>\n'
        "</section>\n"
        f'<script type="application/json" id="problem-data">{script_json(problem)}</script>\n'
        f'<script type="application/json" id="matrix-keys">{script_json(list(MATRIX_KEYS))}'
        "</script>\n"
        f'<script type="application/json" id="variant-keys">{script_json(variant_keys())}</script>\n'
        f'<div id="derivation">{fragment}</div>\n'
        '<script src="/static/serve_keys.js"></script>\n'
        '<script src="/static/serve.js"></script>\n'
        '<script src="/static/downloads.js"></script>\n')
    whole = pg.page(f"{title} (symattn serve)", body, description="An interactive exact derivation "
                    "of attention by symattn")
    return whole.replace("</head>", ICON + "</head>", 1)


#: the page's icon, vendored (static/favicon.svg): a 3×3 heat map of weights
ICON = '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'



def downloads_block(tex: bool) -> str:
    """The download buttons (``static/downloads.js`` drives them): the derivation as LaTeX, PDF
    (only when the server has TeX), HTML and JSON, and a worksheet folder as a zip."""
    pdf = ('<button type="button" data-download="pdf">PDF</button> ' if tex else
           '<button type="button" data-download="pdf" disabled title="the server has no TeX">PDF</button> ')
    return (
        '<link rel="stylesheet" href="/static/downloads.css">\n'
        '<section id="downloads" aria-labelledby="downloads-h">\n'
        '<h2 id="downloads-h">Download</h2>\n'
        '<p>The derivation of the last problem derived, as <code>symattn explain</code> writes it '
        "(at the digits or places and with the rows worked by hand shown above): "
        '<button type="button" data-download="latex">LaTeX</button> '
        f"{pdf}"
        '<button type="button" data-download="html">HTML</button> '
        '<button type="button" data-download="json">JSON</button></p>\n'
        f"{worksheet_form(tex)}"
        '<p id="download-status" role="status" aria-live="polite"></p>\n'
        "</section>\n")


def _select(option: str, choices: list[tuple[str, str]]) -> str:
    items = "".join(f'<option value="{escape(v)}">{escape(label)}</option>' for v, label in choices)
    return f'<select data-option="{option}">{items}</select>'


def _box(option: str, label: str) -> str:
    return (f'<label><input type="checkbox" id="worksheet-{option}" data-option="{option}"> {escape(label)} '
            f"<code>--{option}</code></label> ")


def worksheet_form(tex: bool) -> str:
    """The worksheet's options, as ``symattn worksheet`` takes them (each labelled with its
    flag): the server reads them with the CLI's checks and answers the folder it writes."""
    from symattn.classroom.worksheets.layouts import LAYOUTS
    from symattn.classroom.worksheets.templates import template_names

    templates = _select("template", [("", "this problem"), *((t, f"template {t}") for t in template_names())])
    layouts = _select("layout", [(name, name) for name in LAYOUTS])
    papers = _select("paper", [("", "letter (default)"), ("a4", "a4")])
    formats = _select("format", [("latex", "LaTeX"), ("html", "HTML")])
    sheet_pdf = _box("pdf", "with PDFs") if tex else ""
    return (
        '<fieldset id="worksheet-options"><legend>A worksheet folder (sheets, keys, problem files), as '
        "<code>symattn worksheet</code> writes it</legend>\n"
        f"<p><label>problem {templates} <code>--template</code></label> "
        '<label>versions <input type="number" id="worksheet-versions" min="1" max="10" value="1" '
        'style="width:4em"></label> <label>seed <input type="number" id="worksheet-seed" min="0" '
        'value="1" style="width:7em"></label> <span class="help">1 version: the problem itself; more: '
        "random hand-friendly versions shaped like it, from the seed</span></p>\n"
        '<p><label>questions <input type="text" data-option="questions" placeholder="default" '
        'size="22" maxlength="200"> <code>--questions</code></label> <label>points <input type="text" '
        'data-option="points" placeholder="none" size="14" maxlength="200"> <code>--points</code></label> '
        f"<label>layout {layouts}</label> <label>paper {papers}</label> <label>sheets {formats} "
        "<code>--format</code></label></p>\n"
        f"<p>{_box('no-derivation', 'keys without the derivation')}{sheet_pdf}"
        '</p>\n<p><span class="help">random versions:</span> '
        f"{_box('square-dk', 'd_k a square')}{_box('allow-ties', 'ties allowed')}"
        f"{_box('no-separate', 'mistakes may coincide')}"
        '<label>min weight <input type="text" data-option="min-weight" placeholder="0.01" size="6" '
        'maxlength="40"> <code>--min-weight</code></label></p>\n'
        '<p><button type="button" data-download="worksheet">Worksheet (zip)</button> '
        '<span class="help">the digits or places shown above round the key\'s answers</span></p>\n'
        "</fieldset>\n")
