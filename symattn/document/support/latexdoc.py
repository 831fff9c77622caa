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


def document(body: str, title: str | None = None) -> str:
    """A complete LaTeX document around a body (the packages are in texlive-latex-base/-recommended)."""
    head = f"\\title{{{tex_escape(title)}}}\n" if title else ""
    return f"{PREAMBLE}{head}\\begin{{document}}\n{body}\\end{{document}}\n"
