"""The derivation as data: blocks of a document and the hand-form nodes inside them.

A :class:`Document` is a tree built once from a Trace (``document.build``)
and printed by one printer per format (``document.printers``), each with one
``_print_<ClassName>`` method per type below, as SymPy's printers do.

Two kinds of node:

* **Math nodes** (subclasses of :class:`Math`, defined in :mod:`symattn.notation.nodes` so
  that results below this layer, such as proofs of facts, can carry them; re-exported
  here): how a person writes a value.
  ``Frac(Int(2), Sqrt(Int(3)))`` is 2/√3, ``Exp(Neg(...))`` is e^(−8/√3),
  ``Factor(x)`` is a factor of a written product (a printer puts negatives and
  sums in parentheses), ``Sum`` joins terms (a ``Neg`` term prints as ``− x``),
  ``SigmaSum`` stands for a sum too long to write, ``Approx`` is ``a ≈ b``
  (a printer drops ``≈ b`` where both read the same), ``Decimal`` is a
  certified decimal, ``Exact`` a SymPy value with no hand form.  The values
  themselves stay in the Trace: these nodes only decide how a value is written.

* **Blocks** (subclasses of :class:`Block`): a :class:`Section` (numbered by
  its position in the tree, never by a hard-coded number), and what a section
  shows: a :class:`LabelledMatrix`, the :class:`DotProducts` of a row, a
  :class:`ScaledRow`, a :class:`SoftmaxRow` (the max-subtraction trick), a
  :class:`Blend` (weights·V for a row), a :class:`Check`, a :class:`Note`,
  a :class:`HeatMap`.

Matrices carry their full shape; ``rows``/``cols`` list the indices shown,
``None`` marking an elided run (⋯, ⋮), and elided cells are ``None`` (their
exact forms are never built).  Every type is a frozen dataclass; this module
only ever gains types and fields, so printers written against it keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

from symattn.notation.nodes import (   # the math nodes live below facts/ and document/
    Approx, Chain, Decimal, Dots, Exact, Exp, Factor, Frac, Func, Int, Math, Mul, Neg, Product, Row,
    Seq, SigmaSum, Sqrt, Sub, Sum, Sup, Sym, Token, Words, Group,
)
from symattn.numbers.certify import Rounding

__all__ = [
    # math nodes
    "Math", "Int", "Exact", "Decimal", "Sym", "Words", "Token", "Dots", "Neg", "Frac", "Sqrt", "Exp",
    "Mul", "Product", "Factor", "Sum", "SigmaSum", "Row", "Seq", "Sub", "Sup", "Approx", "Chain", "Func",
    "Group",
    # blocks
    "Block", "Document", "Section", "Formula", "Summary", "Note", "LabelledMatrix", "WorkedProjection",
    "DotProduct", "DotProducts", "ScaleNote", "ScaledRow", "SoftmaxRule", "SoftmaxRow", "HeatMap",
    "Blend", "CheckLine", "Check", "Cells", "Indices", "elide",
    # results other than a Trace: proofs of facts, verdicts on written figures
    "ProofLine", "ProofLines", "VerdictRow", "Verdicts", "Report",
    # tables of results: a float error report, a class's grades
    "Table",
]


# -- blocks ---------------------------------------------------------------------------

class Block:
    """A block of a document (base class)."""


Cells = tuple[tuple[Union[Math, None], ...], ...]   # full shape; None where elided
Indices = tuple[Union[int, None], ...]              # shown indices; None marks an elided run


def elide(items: Sequence, limit: int) -> list:
    """The first and last items of a long sequence, with None where the middle is left out
    (how every view picks the ``Indices`` of a large matrix)."""
    if len(items) <= limit:
        return list(items)
    head = (limit + 1) // 2
    tail = limit - head - 1
    return [*items[:head], None, *items[len(items) - tail:]]


@dataclass(frozen=True)
class Formula:
    """A step's formula (text and LaTeX), what it means, its shape, and for a
    product of matrices the shapes multiplied (``(3×4)·(4×3)``)."""

    step: str
    text: str
    latex: str
    meaning: str
    shape: tuple[int, int]
    factors: tuple[tuple[int, int], ...] = ()
    meaning_parts: tuple[str | Math, ...] = ()   # the meaning with its math (i, j, d_k), when it has some


@dataclass(frozen=True)
class Section(Block):
    """A section: ``key`` is stable (``scores``, ``softmax``); its number comes from
    its position among the numbered sections (``sub``: a lettered sub-step of the
    previous one, 5a)."""

    key: str
    title: str
    children: tuple[Block, ...]
    numbered: bool = True
    sub: bool = False
    formula: Formula | None = None


@dataclass(frozen=True)
class Summary(Block):
    """What the problem is: the header of a derivation."""

    title: str
    kind: str                              # "self-attention", "cross-attention", "given"
    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    d_k: int
    d_v: int
    d_model: int | None
    scale: Math                            # the scale as written
    default_scale: bool
    mask_kind: str | None
    symbols: tuple[str, ...]
    rounding: Rounding
    sci_digits: int


@dataclass(frozen=True)
class Note(Block):
    """A paragraph: plain strings and inline math nodes."""

    parts: tuple[str | Math, ...]


@dataclass(frozen=True)
class LabelledMatrix(Block):
    """A step's matrix: exact cells, certified decimals beside them (None: not shown),
    token labels; ``caption`` is said before it (the inputs' meanings)."""

    step: str
    symbol: Math
    exact: Cells | None
    decimals: Cells | None
    rows: Indices
    cols: Indices
    row_labels: tuple[str, ...] | None
    col_labels: tuple[str, ...] | None
    shape: tuple[int, int]
    integers: bool = False                 # every exact entry an integer (decimals add nothing)
    caption: str | None = None


@dataclass(frozen=True)
class WorkedProjection(Block):
    """A query worked by hand: its embedding times W_q, a combination of the rows of W_q."""

    token: str
    terms: tuple[Math, ...]                # Product(Factor(x_k), Row(W_q[k]))
    result: Row


@dataclass(frozen=True)
class DotProduct:
    """One score written out: query ``token`` against ``key_token``."""

    token: str
    key_token: str
    key: Row
    products: Sum                          # of Product(Factor(q_k), Factor(k_k))
    value: Math


@dataclass(frozen=True)
class DotProducts(Block):
    """The dot products of some rows; ``every``: all scores of a small problem."""

    rows: tuple[tuple[str, Row, tuple[DotProduct | None, ...]], ...]   # (token, query, products; None = ⋮)
    every: bool = False


@dataclass(frozen=True)
class ScaleNote(Block):
    """``d_k = 3, so every score is divided by √3 ≈ 1.73`` (``rational``: √d_k is rational)."""

    d_k: int
    root: Math
    rational: bool


@dataclass(frozen=True)
class ScaledRow(Block):
    """A row of scores and the same row scaled, in hand form and as decimals."""

    token: str
    scores: Row
    scaled: Row
    decimals: Row


@dataclass(frozen=True)
class SoftmaxRule(Block):
    """Why the row maximum is subtracted: softmax(z) = e^(z−max) / Σ e^(z−max)."""


@dataclass(frozen=True)
class SoftmaxRow(Block):
    """The softmax of one row, worked with the max-subtraction trick.

    Lists run over the row's allowed keys (``Dots`` where elided).  ``maximum``
    is None when symbols leave the row maximum open (nothing is subtracted).
    ``exact_weight`` is one weight as the fraction of exponentials it is."""

    token: str
    keys: tuple[str, ...]
    blocked: tuple[str, ...]
    scaled: Row                            # the row's logits (the scaled scores in plain attention)
    scaled_decimals: Row
    maximum: Approx | None
    maximum_key: str | None
    ties: tuple[str, ...]                  # every key sharing the maximum
    shifted: Row
    shifted_decimals: Row
    exponentials: tuple[Approx | Dots, ...]  # e^(…) ≈ 0.00986 (Dots where elided)
    row_sum: Math
    row_sum_decimal: Math
    weights: Row
    exact_key: str | None
    exact_weight: Math | None
    exact_weight_decimal: Math | None
    logit: str = "scaled"                  # the step the softmax takes: scaled, biased or capped


@dataclass(frozen=True)
class HeatMap(Block):
    """The weights shaded on a fixed [0, 1] scale: ``shades`` are whole percents
    (the weight certified to 2 places); ``exact`` the exact weights where small."""

    decimals: tuple[tuple[Math, ...], ...]     # every weight (none elided)
    shades: tuple[tuple[int | None, ...], ...]
    rows: Indices
    cols: Indices
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    exact: Cells | None = None


@dataclass(frozen=True)
class Blend(Block):
    """A row of the output as a blend of the value rows, weights·V."""

    token: str
    terms: tuple[Math, ...]                # Product(weight decimal, Row(V_j)), Dots where elided
    result: Row
    exact_entry: Math | None               # output[token, 0] as a fraction of exponentials
    exact_decimal: Math | None


@dataclass(frozen=True)
class CheckLine:
    """One line of a check: a label (``column 0``) and its math."""

    label: str
    math: Math


@dataclass(frozen=True)
class Check(Block):
    """One of the lesson's sanity checks, proved for the instance: ``name`` is stable
    (``rows-sum-to-one``, ``convex-hull``), ``statement`` what holds, ``reason`` why."""

    name: str
    statement: str
    reason: str
    lines: tuple[CheckLine, ...]
    because: tuple[str | Math, ...] = ()   # the reason with its math, when it has some (preferred)


@dataclass(frozen=True)
class Document(Block):
    """A whole derivation: a title, then its blocks (a Summary, then Sections)."""

    title: str
    children: tuple[Block, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def sections(self) -> tuple[Section, ...]:
        return tuple(b for b in self.children if isinstance(b, Section))


# -- results other than a Trace ------------------------------------------------------

@dataclass(frozen=True)
class ProofLine:
    """One line of a proof, as the fact wrote it: words and math nodes (``parts``), and the
    line as plain text (``text``: the terminal's form, and what JSON and search read).
    ``latex`` is kept for lines built before proofs were nodes: LaTeX math for the whole line."""

    text: str
    latex: str = ""
    parts: tuple[str | Math, ...] = ()


@dataclass(frozen=True)
class ProofLines(Block):
    """A labelled run of proof lines: ``In general (SymPy, on symbols)``, ``On the given data``."""

    heading: str
    lines: tuple[ProofLine, ...]


@dataclass(frozen=True)
class VerdictRow:
    """The verdict on one written figure: ``mark`` is ✓ (right), ✗ (not) or ! (unreadable);
    ``expected`` the certified rounding at the written precision (entries joined by ", ").
    ``says`` is ``message`` as words and math nodes and ``expected_math`` the rounding as a
    node, for the printers that typeset math (LaTeX, HTML); the terminal keeps the strings."""

    target: str
    variant: str | None
    text: str
    code: str
    mark: str
    right: bool
    message: str
    expected: str | None = None
    mistake: str | None = None
    says: tuple[str | Math, ...] = ()
    expected_math: Math | None = None


@dataclass(frozen=True)
class Verdicts(Block):
    """A table of verdicts, one row per figure, in the order written."""

    rows: tuple[VerdictRow, ...]


@dataclass(frozen=True)
class Table(Block):
    """A table of results that are not a matrix (a float report's histogram, a class's counts).

    ``header`` names the columns; each row's first cell names the row (a row header for
    screen readers).  Cells are plain strings (already certified or exact where they are
    numbers) or math nodes.  ``numeric`` marks the columns aligned on the right; ``prose``
    is a column of sentences that a printer may wrap (LaTeX: a paragraph column)."""

    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str | Math, ...], ...]
    numeric: tuple[bool, ...] = ()
    prose: int | None = None
    #: a heat map: each body cell's shade in whole percents (0 white .. 100 darkest; None unshaded,
    #: the row header included), on the scale ``legend`` states; HTML shades, text and LaTeX show the values
    shades: tuple[tuple[int | None, ...], ...] | None = None
    legend: str = ""


@dataclass(frozen=True)
class Report(Document):
    """A document the terminal prints as a listing: its sections' blocks one after another,
    without headings (one line per item, as ``symattn check`` has always printed, for grep and
    CI logs); LaTeX, JSON and HTML show the sections as for any document.  ``show_title``:
    the terminal listing starts with the title (False when the title is only a default)."""

    show_title: bool = True
