"""The self-contained HTML page: shell, inline CSS (screen and print), tables, heat map.

One file that opens offline: no script, font, image or stylesheet is
fetched, everything a reader needs is in the page, and nothing needs
JavaScript.  Math is MathML Core (:mod:`symattn.document.support.mathml`), which
browsers typeset natively.  Tables carry ``<th scope>`` headers and the page
its ``lang`` for screen readers.

The heat map shades each weight on a fixed [0, 1] scale (as the LaTeX heat
map does), from the weight certified to two places; hovering or focusing a
cell (every cell is in the tab order) shows its exact value and certified
decimal in a CSS popup, and the same text is the cell's ``title``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from symattn.numbers.certify import CertifiedDecimal
from symattn.document.support.mathml import escape

__all__ = ["CSS", "HeatCell", "page", "table", "heatmap", "shade_percent", "WHITE_TEXT_FROM"]

WHITE_TEXT_FROM = 55            # percent of colour from which a cell's number is printed in white
INK = (31, 78, 156)             # the darkest shade (weight 1): a blue that prints well in grey too

CSS = """
:root { color-scheme: light; --ink: #1b1b1b; --muted: #555; --rule: #c8c8c8; --accent: rgb(31 78 156); }
* { box-sizing: border-box; }
html { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: #fff; line-height: 1.5; }
body { max-width: 60rem; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { font-size: 1.7rem; margin: 0 0 .5rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 .4rem; border-bottom: 1px solid var(--rule); padding-bottom: .2rem; }
h3 { font-size: 1.08rem; margin: 1.4rem 0 .3rem; }
p, li { max-width: 46rem; }
.formula { color: var(--muted); margin: .1rem 0 .6rem; }
.note { color: var(--muted); font-size: .95rem; }
.scroll { overflow-x: auto; max-width: 100%; }
math { font-size: 1.1em; }
math[display="block"] { margin: .6rem 0; overflow-x: auto; overflow-y: hidden; padding: .2rem 0; }
table { border-collapse: collapse; margin: .6rem 0 1rem; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0 0 .3rem; }
th, td { padding: .3rem .6rem; text-align: center; vertical-align: middle; }
thead th { border-bottom: 1px solid var(--rule); }
th[scope="row"] { text-align: right; border-right: 1px solid var(--rule); font-weight: 600; }
th, .token { font-style: normal; }
.mats { display: flex; flex-wrap: wrap; gap: 0 2.5rem; align-items: flex-start; }
.mat { max-width: 100%; }
.mat > p { margin-bottom: .2rem; }
table.matrix td { border: 0; }
table.matrix th[scope="row"] { border-right: 0; }
table.matrix thead th { border-bottom: 0; }
table.matrix td { position: relative; }
table.matrix td.l::before, table.matrix td.r::after { content: ""; position: absolute; top: 0; bottom: 0;
  width: .35rem; border: 0 solid currentColor; pointer-events: none; }
table.matrix td.l::before { left: 0; border-left-width: 1.5px; }
table.matrix td.r::after { right: 0; border-right-width: 1.5px; }
table.matrix td.t::before, table.matrix td.t::after { border-top-width: 1.5px; }
table.matrix td.b::before, table.matrix td.b::after { border-bottom-width: 1.5px; }
table.matrix math, table.softmax math, .checks math, .pop math { math-style: normal; }
table.matrix td .dec { display: block; color: var(--muted); font-size: .85em; }
ul.steps { padding-left: 1.2rem; }
table.softmax th[scope="row"] { font-weight: 500; color: var(--muted); white-space: nowrap; }
table.softmax td.left { text-align: left; }
.dec math { font-size: .95em; }
ul.steps li { margin: .2rem 0; }
table.heatmap td { position: relative; min-width: 4.2rem; border: 1px solid #fff; cursor: default; }
table.heatmap td:focus { outline: 3px solid #e8a317; outline-offset: -3px; }
table.heatmap td.ink-light, table.heat td.ink-light { color: #fff; }
table.heat td { border: 1px solid #fff; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
table.heatmap .pop { display: none; position: absolute; z-index: 10; left: 50%; top: 100%;
  transform: translateX(-50%); margin-top: .25rem; min-width: 12rem; max-width: 28rem; padding: .45rem .6rem;
  background: #fffbe6; color: var(--ink); border: 1px solid #b8a04a; border-radius: .3rem;
  box-shadow: 0 2px 6px rgb(0 0 0 / .25); text-align: left; white-space: normal; font-size: .9rem; }
table.heatmap td:hover .pop, table.heatmap td:focus .pop, table.heatmap td:focus-visible .pop { display: block; }
.pop math { font-size: 1.25em; }
caption { white-space: nowrap; }
.legend { display: flex; gap: .3rem; align-items: center; font-size: .85rem; margin: .2rem 0 1rem; }
.legend span.sw { display: inline-block; min-width: 2.6rem; text-align: center; padding: .1rem .2rem;
  border: 1px solid var(--rule); }
.checks li { margin: .4rem 0; }
table.verdicts td.left { text-align: left; min-width: 16rem; }
table.results th[scope="row"] { text-align: left; font-weight: 500; }
table.results td, table.results th { text-align: left; }
table.results .num { text-align: right; font-variant-numeric: tabular-nums; }
table.results td.left { max-width: 30rem; white-space: normal; }
table.results tbody tr:nth-child(even) { background: #f5f6f8; }
@media print {
  html { font-size: 10.5pt; }
  body { max-width: none; padding: 0; }
  h2, h3 { break-after: avoid; page-break-after: avoid; }
  table, math[display="block"], .keep { break-inside: avoid; page-break-inside: avoid; }
  table.heatmap td, .legend span.sw { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  table.heatmap .pop { display: none !important; }
  table.heatmap td:focus { outline: none; }
  .scroll, math[display="block"] { overflow: visible; }
  a { color: inherit; text-decoration: none; }
}
"""


def page(title: str, body: str, *, lang: str = "en", description: str | None = None) -> str:
    """A complete, self-contained HTML document around ``body`` (markup, already escaped)."""
    meta = (f'<meta name="description" content="{escape(description)}">\n' if description else "")
    return ("<!doctype html>\n"
            f'<html lang="{escape(lang)}">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="generator" content="symattn">\n'
            f"{meta}<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n"
            f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n")


def table(cells: Sequence[Sequence[str]], row_labels: Sequence[str] | None,
          col_labels: Sequence[str] | None, *, caption: str | None = None, css: str = "matrix",
          corner: str = "", brackets: bool = False) -> str:
    """A data table of markup cells; labels become ``<th scope="col|row">`` (labels are plain text).

    ``brackets`` draws a matrix's [ ] around the data cells (CSS borders, no image)."""
    out = [f'<div class="scroll"><table class="{escape(css)}">']
    if caption:
        out.append(f"<caption>{caption}</caption>")
    if col_labels is not None:
        heads = "".join(f'<th scope="col">{escape(c)}</th>' for c in col_labels)
        lead = f'<td>{escape(corner)}</td>' if row_labels is not None else ""
        out.append(f"<thead><tr>{lead}{heads}</tr></thead>")
    out.append("<tbody>")
    last = len(cells) - 1
    for k, row in enumerate(cells):
        head = f'<th scope="row">{escape(row_labels[k])}</th>' if row_labels is not None else ""
        tds = []
        for j, c in enumerate(row):
            marks = []
            if brackets and j in (0, len(row) - 1):   # l/r: a bracket's side; t/b: its ticks
                marks = [m for m, on in (("l", j == 0), ("r", j == len(row) - 1), ("t", k == 0),
                                         ("b", k == last)) if on]
            tds.append(f'<td class="{" ".join(marks)}">{c}</td>' if marks else f"<td>{c}</td>")
        out.append("<tr>" + head + "".join(tds) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out) + "\n"


def shade_percent(d: CertifiedDecimal) -> int:
    """A weight certified to two places as a whole percentage, clamped to the [0, 1] scale."""
    if d.rounding.places != 2:
        raise ValueError(f"heat-map shades are weights certified to 2 places, got {d.rounding}")
    return max(0, min(100, d.mantissa))


def _background(percent: int) -> str:
    """The fixed-scale colour of a percentage, in integers (white at 0, INK at 100)."""
    r, g, b = (255 - (255 - c) * percent // 100 for c in INK)
    return f"rgb({r} {g} {b})"


def shaded(percent: int) -> str:
    """A table cell's shading attributes on the fixed scale (white ink on the dark shades)."""
    p = max(0, min(100, int(percent)))
    ink = ' class="num ink-light"' if p >= WHITE_TEXT_FROM else ' class="num"'
    return f'{ink} style="background:{_background(p)}"'


@dataclass(frozen=True)
class HeatCell:
    """One weight of the heat map: what it shows, how it is shaded and what its popup says.

    ``shown`` and ``exact_markup`` are markup (MathML or text already escaped);
    ``percent`` is the weight certified to two places, as a whole percentage
    (:func:`shade_percent`); ``title`` is plain text (escaped here) for the
    ``title`` attribute.
    """

    shown: str
    percent: int
    exact_markup: str
    title: str


def heatmap(cells: Sequence[Sequence[HeatCell | None]], row_labels: Sequence[str | None],
            col_labels: Sequence[str | None], *, caption: str | None = None) -> str:
    """The weights as an HTML table shaded on a fixed [0, 1] scale, with a legend.

    ``None`` labels and cells are elided rows/columns (``⋯``, ``⋮``).
    """
    out = ['<table class="heatmap">']   # not in a scrolling box: that would clip the popups
    if caption:
        out.append(f"<caption>{caption}</caption>")
    heads = "".join('<th scope="col" aria-label="more keys">⋯</th>' if c is None
                    else f'<th scope="col">{escape(c)}</th>' for c in col_labels)
    out.append(f"<thead><tr><td></td>{heads}</tr></thead><tbody>")
    for label, row in zip(row_labels, cells):
        if label is None:
            out.append('<tr><th scope="row">⋮</th>' + "".join(
                f"<td>{'⋱' if c is None else '⋮'}</td>" for c in col_labels) + "</tr>")
            continue
        tds = []
        for cell in row:
            if cell is None:
                tds.append("<td>⋯</td>")
                continue
            p = max(0, min(100, cell.percent))
            ink = ' class="ink-light"' if p >= WHITE_TEXT_FROM else ""
            tds.append(f'<td tabindex="0"{ink} style="background:{_background(p)}" '
                       f'title="{escape(cell.title)}">{cell.shown}'
                       f'<span class="pop" role="tooltip">{cell.exact_markup}</span></td>')
        out.append(f'<tr><th scope="row">{escape(label)}</th>{"".join(tds)}</tr>')
    out.append("</tbody></table>")
    legend = "".join(
        f'<span class="sw" style="background:{_background(p)};{"color:#fff" if p >= WHITE_TEXT_FROM else ""}">'
        f"{p // 100 if p in (0, 100) else f'0.{p:02d}'.rstrip('0')}</span>" for p in (0, 25, 50, 75, 100))
    out.append(f'<p class="legend" aria-label="shading scale from 0 (white) to 1 (darkest)">'
               f"scale: {legend}</p>")
    return "\n".join(out) + "\n"
