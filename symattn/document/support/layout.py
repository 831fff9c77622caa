"""Plain-text layout: bracketed matrices with token labels, side by side.

Only layout lives here; every number arrives already certified.
"""

from __future__ import annotations

from collections.abc import Sequence

from symattn.document.blocks import elide

ELLIPSIS_H, ELLIPSIS_V = "⋯", "⋮"


def grid(cells: Sequence[Sequence[str]], row_labels: Sequence[str] | None = None,
         col_labels: Sequence[str] | None = None, *, limit: int = 8,
         rows: Sequence[int | None] | None = None, cols: Sequence[int | None] | None = None) -> list[str]:
    """A matrix of strings between ⎡ ⎤ brackets, labelled, elided beyond ``limit``
    (or showing exactly the ``rows`` and ``cols`` given, None marking an elided run)."""
    n_cols = len(cells[0])
    col_idx = list(cols) if cols is not None else elide(list(range(n_cols)), limit)
    row_idx = list(rows) if rows is not None else elide(list(range(len(cells))), limit)

    def pick(row: Sequence[str]) -> list[str]:
        return [ELLIPSIS_H if c is None else row[c] for c in col_idx]

    body = [[ELLIPSIS_V if c is not None else "" for c in col_idx] if r is None else pick(cells[r])
            for r in row_idx]
    header = pick(col_labels) if col_labels is not None else None
    widths = [max(len(row[k]) for row in body + ([header] if header else [])) for k in range(len(col_idx))]
    labels = ["" if r is None else (row_labels[r] if row_labels is not None else "") for r in row_idx]
    label_w = max((len(x) for x in labels), default=0)
    pad = " " * (label_w + 1) if label_w else ""

    lines = []
    if header:
        lines.append(pad + "  " + "  ".join(h.rjust(w) for h, w in zip(header, widths)))
    count = len(body)
    for k, (label, row) in enumerate(zip(labels, body)):
        if count == 1:
            left, right = "[", "]"
        elif k == 0:
            left, right = "⎡", "⎤"
        elif k == count - 1:
            left, right = "⎣", "⎦"
        else:
            left, right = "⎢", "⎥"
        prefix = (label.ljust(label_w) + " ") if label_w else ""
        lines.append(f"{prefix}{left} " + "  ".join(v.rjust(w) for v, w in zip(row, widths)) + f" {right}")
    return lines


def side_by_side(left: list[str], right: list[str], joiner: str = "≈", gap: int = 2) -> list[str]:
    """Two blocks next to each other, the joiner on the middle line of the right block."""
    width = max(len(x) for x in left)
    height = max(len(left), len(right))
    rows = min(len(left), len(right))
    # align the bottoms so a header line on one side does not shift the rows
    left = [""] * (height - len(left)) + left
    right = [""] * (height - len(right)) + right
    middle = height - rows + (rows - 1) // 2
    out = []
    for k, (a, b) in enumerate(zip(left, right)):
        mid = f" {joiner} " if k == middle and b else " " * (len(joiner) + 2)
        out.append((a.ljust(width) + " " * gap + mid + b).rstrip())
    return out


def indent(lines: list[str], by: int = 3) -> list[str]:
    return [(" " * by + x) if x else x for x in lines]
