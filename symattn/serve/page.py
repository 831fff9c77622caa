"""The page ``symattn serve`` serves: the inputs as editable grids and the derivation.

The page is the project's HTML shell (:func:`symattn.document.support.page.page`) with the
derivation the HTML printer made; the grids are built by the page's one script
(``static/serve.js``) from the problem, which sits in the page as inert JSON data.  No
script is inline, so the Content-Security-Policy can forbid inline scripts.
"""

from __future__ import annotations

from typing import Any

from symattn.document.support import page as pg
from symattn.output.escaping import script_json
from symattn.serve.derive import MATRIX_KEYS, variant_keys

__all__ = ["downloads_block", "editor_page"]


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
        "address bar holds the problem and the view, so the page can be bookmarked.</p>\n"
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
    sheet_pdf = ('<label><input type="checkbox" id="worksheet-pdf"> with PDFs</label> ' if tex else "")
    return (
        '<section id="downloads" aria-labelledby="downloads-h">\n'
        '<h2 id="downloads-h">Download</h2>\n'
        '<p>The derivation of the last problem derived, as <code>symattn explain</code> writes it: '
        '<button type="button" data-download="latex">LaTeX</button> '
        f"{pdf}"
        '<button type="button" data-download="html">HTML</button> '
        '<button type="button" data-download="json">JSON</button></p>\n'
        '<p>A worksheet folder (sheet, key, problem files), as <code>symattn worksheet</code> '
        'writes it: <label>versions <input type="number" id="worksheet-versions" min="1" '
        'max="10" value="1" style="width:4em"></label> <label>seed <input type="number" id="worksheet-seed" '
        'min="0" value="1" style="width:7em"></label> '
        f"{sheet_pdf}"
        '<button type="button" data-download="worksheet">Worksheet (zip)</button> '
        '<span class="help">1 version: this problem; more: random hand-friendly versions shaped '
        "like it, from the seed</span></p>\n"
        '<p id="download-status" role="status" aria-live="polite"></p>\n'
        "</section>\n")
