"""The attention weights as a heat map: shaded cells on a fixed [0, 1] scale.

A fixed scale (not stretched to each matrix's own range) lets a reader
compare shades across rows, problems and worksheet versions.  Shading comes
from the weights certified to two places (a whole percentage); the numbers
in the cells are the certified decimals of the derivation.
"""

from __future__ import annotations

from collections.abc import Sequence

from symattn.numbers.certify import CertifiedDecimal
from symattn.document.support.texutil import elide, tex_escape

COLOR = "blue"
WHITE_TEXT_FROM = 55
NARROW = 5             # up to this many columns, each is 1.9 cm wide; more share the line   # percent of colour above which the number is printed in white


def _percent(d: object) -> int:
    """A shade: a whole percent, or a weight certified to 2 places."""
    if isinstance(d, int):
        return max(0, min(100, d))
    assert isinstance(d, CertifiedDecimal) and d.rounding.places == 2
    return max(0, min(100, d.mantissa))


def _cell(text: str, percent: int) -> str:
    # ${...}$: one unbreakable formula, so 1.43 × 10^{-21} never wraps at its ×
    math = f"${{{text}}}$" if "\\times" in text else f"${text}$"
    number = f"\\textcolor{{white}}{{{math}}}" if percent >= WHITE_TEXT_FROM else math
    return f"\\cellcolor{{{COLOR}!{percent}}}{number}"


def _ink(value: float, percent: int) -> str:
    text = f"{value:g}"
    return f"\\textcolor{{white}}{{{text}}}" if percent >= WHITE_TEXT_FROM else text


def heatmap(cells: Sequence[Sequence[str]], shades: Sequence[Sequence[object]],
            row_labels: Sequence[str], col_labels: Sequence[str], *, limit: int = 8,
            rows: Sequence[int | None] | None = None, cols: Sequence[int | None] | None = None) -> str:
    """A LaTeX tabular: token labels on both axes, each cell shaded by its weight, plus a legend."""
    rows = list(rows) if rows is not None else elide(list(range(len(cells))), limit)
    cols = list(cols) if cols is not None else elide(list(range(len(cells[0]))), limit)
    if len(cols) <= NARROW:
        width, size = "1.9cm", ""
    else:   # share the line: the row labels get 4em, each column an equal part of the rest
        width = f"\\dimexpr(\\linewidth-4em)/{len(cols)}-2\\tabcolsep\\relax"
        size = "\\footnotesize\\setlength{\\tabcolsep}{2pt}"
    spec = "r|" + "".join(f">{{\\centering\\arraybackslash}}p{{{width}}}" for _ in cols)
    out = ["\\begin{center}" + size, "\\renewcommand{\\arraystretch}{1.5}",
           f"\\begin{{tabular}}{{{spec}}}",
           " & " + " & ".join("$\\cdots$" if c is None else f"\\textbf{{{tex_escape(col_labels[c])}}}"
                              for c in cols) + r" \\ \hline"]
    for r in rows:
        if r is None:
            out.append("$\\vdots$ & " + " & ".join("$\\ddots$" if c is None else "$\\vdots$"
                                                     for c in cols) + r" \\")
            continue
        entries = ["$\\cdots$" if c is None else _cell(cells[r][c], _percent(shades[r][c])) for c in cols]
        out.append(f"\\textbf{{{tex_escape(row_labels[r])}}} & " + " & ".join(entries) + r" \\")
    out += ["\\end{tabular}", "", "\\smallskip", "{\\small scale: " + " ".join(
        f"\\fcolorbox{{black!30}}{{{COLOR}!{p}}}{{\\makebox[2.2em]{{{_ink(p / 100, p)}}}}}" for p in (0, 25, 50, 75, 100)) + "}", "\\end{center}"]
    return "\n".join(out)
