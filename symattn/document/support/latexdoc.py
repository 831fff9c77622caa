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


def preamble(paper: str = "letter") -> str:
    """The preamble for one paper size (A4 or US Letter; geometry keeps the 2 cm margins)."""
    if paper not in PAPERS:
        raise ValueError(f"no paper {paper!r}; choose from {', '.join(PAPERS)}")
    return PREAMBLE.replace("[11pt]", f"[11pt{PAPERS[paper]}]", 1)


def document(body: str, title: str | None = None, paper: str = "letter") -> str:
    """A complete LaTeX document around a body (the packages are in texlive-latex-base/-recommended)."""
    head = f"\\title{{{tex_escape(title)}}}\n" if title else ""
    return f"{preamble(paper)}{head}\\begin{{document}}\n{body}\\end{{document}}\n"
