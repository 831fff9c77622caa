"""Small LaTeX building blocks shared by the LaTeX view and the worksheets.

Only layout and escaping live here; every number arrives already certified.
"""

from __future__ import annotations

import re

from collections.abc import Sequence

from symattn.numbers.certify import CertifiedDecimal
from symattn.document.blocks import elide  # noqa: F401 (re-exported)
from symattn.numbers.masked import NEG_INF

_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
            "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}",
            # the Unicode math the text view and step meanings use
            "−": r"\ensuremath{-}", "∞": r"\ensuremath{\infty}", "×": r"\ensuremath{\times}",
            "·": r"\ensuremath{\cdot}", "√": r"\ensuremath{\surd}", "Σ": r"\ensuremath{\Sigma}", "∂": r"\ensuremath{\partial}",
            "∇": r"\ensuremath{\nabla}",
            "≈": r"\ensuremath{\approx}", "ᵀ": r"\ensuremath{^\top}", "≤": r"\ensuremath{\le}",
            "≥": r"\ensuremath{\ge}", "<": r"\ensuremath{<}", ">": r"\ensuremath{>}",
            "⋯": r"\ensuremath{\cdots}", "…": r"\ldots{}", "|": r"\textbar{}", "\"": r"\textquotedbl{}",
            "€": r"\texteuro{}", "∘": r"\ensuremath{\circ}",
            "‖": r"\ensuremath{\|}",
            "ℓ": r"\ensuremath{\ell}", "∈": r"\ensuremath{\in}",
            "⊆": r"\ensuremath{\subseteq}",
            "→": r"\ensuremath{\to}", "←": r"\ensuremath{\leftarrow}", "⇒": r"\ensuremath{\Rightarrow}",
            "↔": r"\ensuremath{\leftrightarrow}", "≠": r"\ensuremath{\ne}", "⟨": r"\ensuremath{\langle}",
            "⟩": r"\ensuremath{\rangle}", "′": r"\ensuremath{^{\prime}}", "″": r"\ensuremath{^{\prime\prime}}",
            "‴": r"\ensuremath{^{\prime\prime\prime}}",
            # verdict marks (a fact's heading, a class's grades)
            "✓": r"\ensuremath{\checkmark}", "✗": r"\ensuremath{\times}",
            "—": r"\textemdash{}", "–": r"\textendash{}"}

# Greek letters by name: the ones LaTeX has as commands, the rest look Latin (Alpha is A)
_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lamda mu nu xi omicron pi rho "
          "final_sigma sigma tau upsilon phi chi psi omega").split()
_GREEK_TEX = {"lamda": "lambda", "final_sigma": "varsigma", "omicron": None}
_GREEK_UPPER = {"gamma", "delta", "theta", "lamda", "xi", "pi", "sigma", "upsilon", "phi", "psi", "omega"}
_LATIN_LOOKALIKE = {"alpha": "A", "beta": "B", "epsilon": "E", "zeta": "Z", "eta": "H", "iota": "I",
                    "kappa": "K", "mu": "M", "nu": "N", "omicron": "O", "rho": "P", "tau": "T", "chi": "X"}


def _greek(ch: str) -> str | None:
    import unicodedata

    name = unicodedata.name(ch, "")
    for case, prefix in (("lower", "GREEK SMALL LETTER "), ("upper", "GREEK CAPITAL LETTER ")):
        if name.startswith(prefix):
            letter = name[len(prefix):].lower().replace(" ", "_")
            if letter not in _GREEK:
                return None
            if case == "upper":
                tex = _GREEK_TEX.get(letter, letter)
                if letter in _GREEK_UPPER and tex is not None:   # omicron (None) has no capital
                    return f"\\ensuremath{{\\{tex[0].upper() + tex[1:]}}}"
                return _LATIN_LOOKALIKE.get(letter)
            tex = _GREEK_TEX.get(letter, letter)
            return "o" if tex is None else f"\\ensuremath{{\\{tex}}}"
    return None


def _char(ch: str) -> str:
    """One character made safe: specials escaped, control characters shown as \\x1b,
    characters pdflatex's T1 fonts lack shown as [U+4E2D] (a name stays readable and
    the document always compiles)."""
    special = _SPECIAL.get(ch)
    if special is not None:
        return special
    code = ord(ch)
    if 0x20 <= code < 0x7F or 0xC0 <= code <= 0x17F and code not in (0xD7, 0xF7, 0x149, 0x17F) \
            or ch in "¡¿«»°±²³µ¶º¹¼½¾ß§©®¬£¥¢":
        return {"±": r"\ensuremath{\pm}", "²": r"\ensuremath{^2}", "³": r"\ensuremath{^3}",
                "¹": r"\ensuremath{^1}", "µ": r"\ensuremath{\mu}", "¬": r"\ensuremath{\neg}",
                "°": r"\ensuremath{^\circ}", "¼": r"\ensuremath{\tfrac14}", "½": r"\ensuremath{\tfrac12}",
                "¾": r"\ensuremath{\tfrac34}", "¢": "c", "¥": "Y", "§": r"\S{}", "¶": r"\P{}",
                "©": r"\copyright{}", "®": r"\textregistered{}", "£": r"\pounds{}",
                "º": r"\textordmasculine{}"}.get(ch, ch)
    if ch in ("×", "÷"):
        return r"\ensuremath{\times}" if ch == "×" else r"\ensuremath{\div}"
    greek = _greek(ch)
    if greek is not None:
        return greek
    if code < 0x20 or 0x7F <= code < 0xA0:
        return f"{{\\ttfamily\\textbackslash x{code:02x}}}"
    if ch.isspace():
        return " "
    return f"{{\\ttfamily[U+{code:04X}]}}"


def tex_token(name: str) -> str:
    """A token name in running text, set apart as code (``the weight of \\texttt{the}``), so a
    token that is an English word does not read as part of the sentence."""
    return f"\\texttt{{{tex_escape(name)}}}"


def tex_escape(text: str) -> str:
    """Plain text made safe for LaTeX (token names, titles): it always compiles.  A run of
    hyphens stays hyphens (``--max-ulp``, not an en dash)."""
    return "".join(_char(ch) for ch in text).replace("--", "-{}-").replace("--", "-{}-")


def decimal_latex(d: CertifiedDecimal | object, scientific: bool = False) -> str:
    """A certified decimal in LaTeX: ``0.136``, ``-4.62``, ``1.14 \\times 10^{-7}``."""
    if d is NEG_INF:
        return r"-\infty"
    assert isinstance(d, CertifiedDecimal)
    if scientific and d.mantissa != 0:
        digits = str(abs(d.mantissa))
        power = d.exponent + len(digits) - 1
        sign = "-" if d.mantissa < 0 else ""
        lead = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{lead} \\times 10^{{{power}}}"
    text = d.text
    if "e" in text:
        lead, exponent = text.split("e")
        return f"{lead} \\times 10^{{{int(exponent)}}}"
    return text


def cell_text(d: object) -> str:
    """A decimal for a matrix cell (``-\\infty`` where masked)."""
    return decimal_latex(d)


def _label(text: str) -> str:
    return f"\\text{{{tex_escape(text)}}}"


def matrix_latex(cells: Sequence[Sequence[str]], row_labels: Sequence[str] | None = None,
                 col_labels: Sequence[str] | None = None, *, limit: int = 8,
                 rows: Sequence[int | None] | None = None, cols: Sequence[int | None] | None = None) -> str:
    """A matrix: bracketed when unlabelled, a ruled array with token labels otherwise.

    Beyond ``limit`` rows or columns the middle is elided with ⋯, ⋮ and ⋱ (or
    exactly ``rows`` and ``cols`` are shown, None marking an elided run).
    """
    rows = list(rows) if rows is not None else elide(list(range(len(cells))), limit)
    cols = list(cols) if cols is not None else elide(list(range(len(cells[0]))), limit)

    def entry(r: int | None, c: int | None) -> str:
        if r is None:
            return r"\ddots" if c is None else r"\vdots"
        return r"\cdots" if c is None else cells[r][c]

    body = [[entry(r, c) for c in cols] for r in rows]
    # stacked fractions in neighbouring rows touch at the default row height: open the rows up
    # (an extra gap after each row, which MathJax and KaTeX read too, unlike \arraystretch)
    stretch = any("\\frac" in cell for row in body for cell in row)
    gap = " \\\\[1ex]" if stretch else " \\\\"
    if row_labels is None and col_labels is None:
        lines = (gap + " ").join(" & ".join(row) for row in body)
        return f"\\left[\\begin{{array}}{{{'c' * len(cols)}}} {lines} \\end{{array}}\\right]"
    spec = ("r|" if row_labels is not None else "") + "c" * len(cols)
    out = []
    if col_labels is not None:
        head = ["" if c is None else _label(col_labels[c]) for c in cols]
        out.append((" & " if row_labels is not None else "") + " & ".join(head) + r" \\ \hline")
    for k, (r, row) in enumerate(zip(rows, body)):
        label = "" if row_labels is None else ((r"\vdots" if r is None else _label(row_labels[r])) + " & ")
        out.append(label + " & ".join(row) + (gap if k < len(rows) - 1 else r" \\"))
    return f"\\begin{{array}}{{{spec}}}\n" + "\n".join(out) + "\n\\end{array}"


#: a symbol of the lesson's notation inside prose: √d_k, W_q, Kᵀ, Q·Kᵀ
_SYMBOL = r"√?[A-Za-z]+(?:_[A-Za-z0-9]+)?ᵀ?"
_NOTATION = re.compile(rf"(?<![\w√]){_SYMBOL}(?:·{_SYMBOL})*(?!\w)")


def _notation_latex(run: str) -> str:
    parts = []
    for factor in run.split("·"):
        root = factor.startswith("√")
        factor = factor.lstrip("√")
        top = factor.endswith("ᵀ")
        factor = factor.rstrip("ᵀ")
        base, _, sub = factor.partition("_")
        tex = base + (f"_{{{sub}}}" if sub else "")
        tex = rf"\sqrt{{{tex}}}" if root else tex
        parts.append(tex + (r"^\top" if top else ""))
    return "$" + r" \cdot ".join(parts) + "$"


def prose_latex(text: str) -> str:
    r"""Prose for LaTeX with the lesson's notation set as math (``no division by √d_k`` →
    ``no division by $\sqrt{d_{k}}$``; ``W_q and W_k``, ``K·Qᵀ``); the rest escaped as text.
    A plain word is left a word: only runs with ``_``, ``√``, ``ᵀ`` or ``·`` are math."""
    out, last = [], 0
    for found in _NOTATION.finditer(text):
        run = found.group()
        if not any(mark in run for mark in "_√ᵀ·"):
            continue
        out += [tex_escape(text[last:found.start()]), _notation_latex(run)]
        last = found.end()
    out.append(tex_escape(text[last:]))
    return "".join(out)
