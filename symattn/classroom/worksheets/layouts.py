"""Sheet layouts (``symattn worksheet --layout``): how much paper a sheet and its key take.

A layout is data: the LaTeX preamble's font size, margins and paragraph skip, how much of
each question's working space is kept, the height of an answer box, the space after a
question, the column separation of matrices and the space between two common wrong
answers.  Adding a layout is one entry in :data:`LAYOUTS`; the printers read only these
plain values (they sit in the document blocks and in the preamble), never a layout's name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Layout", "LAYOUTS", "layout"]


@dataclass(frozen=True)
class Layout:
    name: str
    about: str
    font: str = "11pt"                # the document class's size
    margin: str = "2cm"               # geometry's margin on every side
    parskip: str = "0.7ex"
    work_scale: float = 1.0           # × each question's working space
    box_em: float = 2.1               # the height of an answer box
    after_question: str = r"\bigskip"
    arraycolsep: str | None = None    # matrices' column separation (None: LaTeX's 5pt)
    wrong_gap: str = "0.8ex"          # between two common wrong answers in the key
    display_skip: str | None = None   # the space above and below a display (None: the class's)
    wrong_per_line: int = 1           # common wrong answers side by side in the key
    wrong_words: str = "6.2cm"        # the width of a mistake's name and description there

    def preamble(self) -> dict[str, str]:
        """The preamble's settings, as :func:`symattn.document.support.latexdoc.document` takes them."""
        extra = f"\\setlength{{\\arraycolsep}}{{{self.arraycolsep}}}\n" if self.arraycolsep else ""
        if self.display_skip:       # \normalsize sets the display skips again: set them there
            skip = self.display_skip
            extra += ("\\makeatletter\\g@addto@macro\\normalsize{"
                      f"\\setlength\\abovedisplayskip{{{skip}}}\\setlength\\belowdisplayskip{{{skip}}}"
                      "\\setlength\\abovedisplayshortskip{0pt plus 2pt}"
                      f"\\setlength\\belowdisplayshortskip{{{skip}}}}}\\makeatother\n")
        return {"size": self.font, "margin": self.margin, "parskip": self.parskip, "extra": extra}


LAYOUTS: dict[str, Layout] = {item.name: item for item in (
    Layout("standard", "room to work on the sheet: 11 pt, 2 cm margins, full working space"),
    Layout("compact", "for printing: 10 pt, margins of 1.5 cm (1.2 cm top and bottom), half the working space, lower answer "
                      "boxes and tighter matrices, so a sheet and its key take fewer pages",
           font="10pt", margin="1.5cm,vmargin=1.2cm", parskip="0.3ex", work_scale=0.35, box_em=1.5,
           after_question=r"\medskip", arraycolsep="3pt", wrong_gap="0.6ex",
           display_skip="4pt plus 2pt minus 2pt", wrong_per_line=2, wrong_words="3.4cm"),
)}


def layout(name: str) -> Layout:
    """The layout called ``name`` (a one-line error naming the layouts otherwise)."""
    from symattn.errors import WorksheetError

    if name not in LAYOUTS:
        raise WorksheetError(f"no layout {name!r}; the layouts are {', '.join(LAYOUTS)}")
    return LAYOUTS[name]
