"""A whole LaTeX document around a body: the one preamble every LaTeX output uses."""

from __future__ import annotations

from symattn.document.support.texutil import tex_escape

PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage[table]{xcolor}
\usepackage{array,booktabs,longtable}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.7ex}
\allowdisplaybreaks
\pagestyle{plain}
"""


#: ``--paper``: the class option of each paper size ("letter" is article's own default, so a
#: letter document is the preamble as it always was).
PAPERS = {"letter": "", "a4": ",a4paper"}


def preamble(paper: str = "letter", *, size: str = "11pt", margin: str = "2cm",
             parskip: str = "0.7ex", extra: str = "") -> str:
    """The preamble for one paper size (A4 or US Letter; geometry keeps the 2 cm margins), and
    a worksheet layout's font size, margins, paragraph skip and extra settings."""
    if paper not in PAPERS:
        raise ValueError(f"no paper {paper!r}; choose from {', '.join(PAPERS)}")
    text = PREAMBLE.replace("[11pt]", f"[{size}{PAPERS[paper]}]", 1)
    text = text.replace("[margin=2cm]", f"[margin={margin}]", 1)
    text = text.replace("{\\parskip}{0.7ex}", f"{{\\parskip}}{{{parskip}}}", 1)
    return text + extra


def document(body: str, title: str | None = None, paper: str = "letter", **layout: str) -> str:
    """A complete LaTeX document around a body (the packages are in texlive-latex-base/-recommended);
    ``layout``: :func:`preamble`'s size, margin, parskip and extra."""
    head = f"\\title{{{tex_escape(title)}}}\n" if title else ""
    return f"{preamble(paper, **layout)}{head}\\begin{{document}}\n{body}\\end{{document}}\n"
