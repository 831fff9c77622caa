"""Trace → Document: the derivation built once, as data, from the Trace's public API.

The outline: the problem summary; the inputs; Q, K, V (a query worked by
hand); the scores with dot products written out; the scaled scores as a
person writes them; the mask; the softmax of the chosen rows with the
max-subtraction trick; the weights as a heat map; the output as blends of the
value rows; the lesson's two sanity checks proved for the instance.  Titles,
formulas and meanings come from the step table (``symattn.trace.steps``); section
numbers from the tree.  Every number is a certified decimal of the Trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from dataclasses import dataclass, field
from typing import cast

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.document import handforms as hf
from symattn.document.build.rope import rope_sections
from symattn.document.blocks import (
    Approx, Blend, Cells, Chain, Check, CheckLine, Decimal, Document, DotProduct, DotProducts, Dots,
    Exact, Exp, Formula, Frac, HeatMap, Indices, Int, LabelledMatrix, Math, Mul, Product, Row,
    ScaledRow, ScaleNote, Section, Seq, SigmaSum, SoftmaxRow, SoftmaxRule, Sqrt, Sub, Sum, Summary,
    Sym, Token, WorkedProjection, Words, elide,
)
from symattn.document.build.backward import backward_sections
from symattn.document.build.online import variant_sections
from symattn.numbers.masked import NEG_INF
from symattn.document.meanings import meaning_parts
from symattn.trace.steps import SECTION_TITLES, spec
from symattn.trace.trace import Trace
from symattn.vocab import StepName, StepKind

Index = int | str
#: every cell of a step, none elided (what ``_Builder.dec`` gives: a Cells with no None)
Full = tuple[tuple[Math, ...], ...]

EVERY_DOT_PRODUCT_MAX = 9   # at most this many scores: every dot product is written out
SHORT_SUM = 10              # a written sum of more terms keeps its first three and last two
WORKED_PROJECTIONS = 3      # at most this many queries are worked by hand

_SYMBOLS = {"X": Sym("X"), "X_kv": Sym("X", "kv"), "W_q": Sym("W", "q"), "W_k": Sym("W", "k"),
            "W_v": Sym("W", "v"), "Q": Sym("Q"), "K": Sym("K"), "V": Sym("V"), "scores": Sym("S"),
            "masked": Sym("S", accent="tilde"), "weights": Sym("A"), "output": Sym("O")}


@dataclass(frozen=True)
class DocumentOptions:
    """What the derivation shows: the rows worked by hand, the rounding, the size shown."""

    rounding: Rounding = field(default_factory=lambda: Rounding(digits=3))
    dot_rows: tuple[Index, ...] | None = None       # dot products, scaled row, projection (default: first)
    softmax_rows: tuple[Index, ...] | None = None   # max-subtraction trick (default: last)
    output_rows: tuple[Index, ...] | None = None    # blends of value rows (default: first)
    every_dot_product: bool = True                  # a small problem writes out every score
    limit: int = 8                                  # larger matrices elide their middle
    sci_digits: int = 3                             # a value that rounds to 0: shown to these digits


def shorten(terms: Sequence[Math]) -> tuple[Math, ...]:
    """A long written sum keeps its first three and last two terms."""
    if len(terms) <= SHORT_SUM:
        return tuple(terms)
    return (*terms[:3], Dots(), *terms[-2:])


def build_document(trace: Trace, options: DocumentOptions | None = None) -> Document:
    """The derivation of a Trace as a document tree."""
    return _Builder(trace, options or DocumentOptions()).document()


def variant_step_sections(trace: Trace, options: DocumentOptions | None = None) -> list[Section]:
    """The sections a variant key adds to a Trace's derivation, as the single-head document shows
    them (RoPE's rotations, ALiBi's bias, the soft-cap, a sliding window's mask, online softmax,
    KV-cache decoding): the multi-head document shows them for each head."""
    b = _Builder(trace, options or DocumentOptions())
    window = [s for s in [b.masked()] if s is not None] if trace.problem.window is not None else []
    return [*rope_sections(b.t, b.matrix, b.formula, b.dot_rows), *b.logits(), *window,
            *variant_sections(b)]


def _built(cell: Math | None) -> Math:
    assert cell is not None, "a shown cell is built (only elided ones are None)"
    return cell


class _Builder:
    def __init__(self, trace: Trace, options: DocumentOptions) -> None:
        self.t, self.o, self.p = trace, options, trace.problem
        scores = trace.step("scores")
        n = self.p.n

        def rows(given: tuple[Index, ...] | None, default: int) -> list[int]:
            if not given:
                return [default]
            return list(dict.fromkeys(scores.row_index(r) for r in given))

        self.dot_rows = rows(options.dot_rows, 0)
        self.softmax_rows = rows(options.softmax_rows, n - 1)
        self.output_rows = rows(options.output_rows, 0)
        self._dec: dict[str, Full] = {}

    # -- numbers: every one certified ----------------------------------------------------
    def numeric(self, name: str) -> bool:
        return not self.t.symbols_of(name)

    def dec(self, name: str) -> Full:
        """A step's certified decimals (its exact entries where symbols allow no decimals)."""
        if name not in self._dec:
            step = self.t.step(name)
            if not self.numeric(name):
                self._dec[name] = tuple(tuple(hf.exact(v) for v in row) for row in step.rows())
            else:
                self._dec[name] = tuple(tuple(self._number(name, i, j, d) for j, d in enumerate(row))
                                        for i, row in enumerate(step.decimals(self.o.rounding)))
        return self._dec[name]

    def _number(self, name: str, i: int, j: int, d: object) -> Math:
        if d is NEG_INF:
            return Decimal(NEG_INF)
        assert isinstance(d, CertifiedDecimal)
        if d.mantissa == 0:
            if d.exact:          # exactly 0 (a masked weight, the shifted maximum)
                return Int(0)
            finer = self.t.step(name).decimal(i, j, Rounding(digits=self.o.sci_digits))  # never 0.00
            return Decimal(finer, scientific=True)
        return Decimal(d)

    def certified(self, value: sympy.Expr) -> Math:
        return Decimal(certify(value, self.o.rounding))

    def bound(self, value: sympy.Expr) -> Math:
        """A bound of the convex-hull check with its decimal when the two differ
        (``7/6 ≈ 1.17``), so ``1.17 ≤ 7/6`` never reads as false."""
        exact = hf.exact(value)
        if value.free_symbols or not value.is_number:
            return exact
        d = certify(value, self.o.rounding)
        return exact if d.exact else Approx(exact, Decimal(d))

    # -- shapes --------------------------------------------------------------------------
    def shown(self, count: int) -> Indices:
        return tuple(elide(list(range(count)), self.o.limit))

    def cells(self, shape: tuple[int, int], rows: Indices, cols: Indices, entry) -> Cells:
        """Full-shape cells with only the shown entries built (elided ones stay None)."""
        r_shown = {r for r in rows if r is not None}
        c_shown = {c for c in cols if c is not None}
        return tuple(tuple(entry(i, j) if i in r_shown and j in c_shown else None for j in range(shape[1]))
                     for i in range(shape[0]))

    def pick(self, values: Sequence[Math | None], order: Sequence[int | None]) -> Row:
        """The shown entries in order (Dots for an elided run); a shown entry is always built."""
        return Row(tuple(Dots() if j is None else _built(values[j]) for j in order))

    def formula(self, name: str, factors: tuple[tuple[int, int], ...] = ()) -> Formula:
        entry, step = spec(name, self.p), self.t.step(name)
        return Formula(name, entry.formula, entry.latex, entry.meaning, step.shape, factors,
                       meaning_parts(entry.meaning))

    def matrix(self, name: str, symbol: Math | None = None, *, row_labels: bool = True,
               col_labels: bool = False, exact=None, decimals: bool = True, caption: str | None = None
               ) -> LabelledMatrix:
        step = self.t.step(name)
        rows, cols = self.shown(step.shape[0]), self.shown(step.shape[1])
        entry = exact or (lambda i, j: hf.exact(step[i, j]))
        exact_cells = self.cells(step.shape, rows, cols, entry)
        integers = all(v.is_Integer for i in rows if i is not None
                       for v in (step[i, j] for j in cols if j is not None))
        return LabelledMatrix(name, symbol or _SYMBOLS.get(name, Sym(name)), exact_cells,
                              self.dec(name) if decimals else None, rows, cols,
                              step.row_labels if row_labels else None,
                              step.col_labels if col_labels else None, step.shape, integers, caption)

    # -- the outline ---------------------------------------------------------------------
    def document(self) -> Document:
        p = self.p
        sections = [self.inputs(), *self.projections(),
                    *rope_sections(self.t, self.matrix, self.formula, self.dot_rows), self.scores(), self.scaled(),
                    *self.logits(), self.masked(),
                    self.softmax(), self.weights(), self.output(), *variant_sections(self), self.checks(),
                    *backward_sections(self)]
        return Document(p.title or "Scaled dot-product attention",
                        (self.summary(), *[s for s in sections if s is not None]),
                        {"problem": p})

    def summary(self) -> Summary:
        p = self.p
        kind = "cross-attention" if "X_kv" in p.inputs else ("self-attention" if p.projected else "given")
        return Summary(p.title or "Scaled dot-product attention", kind, tuple(p.tokens), tuple(p.key_tokens),
                       p.d_k, p.d_v, p.d_model if p.projected else None, hf.exact(p.scale), p.default_scale,
                       p.mask_description if p.mask is not None else None,
                       tuple(sorted(str(x) for x in p.free_symbols)), self.o.rounding, self.o.sci_digits)

    def inputs(self) -> Section | None:
        names = [n for n in StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT) if n in self.t.step_names]
        if not names:
            return None
        blocks = tuple(self.matrix(n, row_labels=n.kind is StepKind.EMBEDDING, caption=self.t.step(n).info.meaning)
                       for n in names)
        return Section("inputs", SECTION_TITLES["inputs"], blocks, numbered=False)

    def projections(self) -> list[Section]:
        t, p = self.t, self.p
        out = []
        for name in StepName.of_kind(StepKind.PROJECTION):
            step = t.step(name)
            factors: tuple[tuple[int, int], ...] = ()
            if p.projected:
                src = t.step("X_kv" if ("X_kv" in p.inputs and name != "Q") else "X")
                factors = (src.shape, (p.d_model, step.shape[1]))
            children: list = [self.matrix(name)]
            if name == "Q" and p.projected:
                children += [self.worked_projection(i) for i in self.dot_rows[:WORKED_PROJECTIONS]]
            out.append(Section(name, spec(name, p).title, tuple(children), formula=self.formula(name, factors)))
        return out

    def worked_projection(self, i: int) -> WorkedProjection:
        t = self.t
        x, W = t.step("X")[i], t.step("W_q")
        terms = [Product((hf.factor(a), Row(tuple(hf.exact(v) for v in W[k]))))
                 for k, a in enumerate(x)]
        return WorkedProjection(self.p.tokens[i], shorten(terms), Row(tuple(hf.exact(v) for v in t.Q[i])))

    def scores(self) -> Section:
        t, p = self.t, self.p
        step = t.step("scores")
        every = self.o.every_dot_product and p.n * p.m <= EVERY_DOT_PRODUCT_MAX
        rows = range(p.n) if every else self.dot_rows
        rotated = p.rope is not None         # RoPE: the dot products of the rotated rows
        K = t.K_rot if rotated else t.K
        worked = []
        for i in rows:
            q = t.Q_rot[i] if rotated else t.Q[i]
            products: list[DotProduct | None] = []
            for j in elide(list(range(p.m)), self.o.limit):
                if j is None:
                    products.append(None)
                    continue
                terms = [Product((hf.factor(a), hf.factor(b))) for a, b in zip(q, K[j])]
                products.append(DotProduct(p.tokens[i], p.key_tokens[j], Row(tuple(hf.exact(v) for v in K[j])),
                                           Sum(shorten(terms)), hf.exact(step[i, j])))
            worked.append((p.tokens[i], Row(tuple(hf.exact(v) for v in q)), tuple(products)))
        return Section("scores", spec("scores", p).title,
                       (self.matrix("scores", col_labels=True), DotProducts(tuple(worked), every)),
                       formula=self.formula("scores"))

    def scaled(self) -> Section:
        t, p = self.t, self.p
        scores = t.step("scores")
        children: list = []
        if p.default_scale:
            root = sympy.sqrt(p.d_k)
            # √4 is exactly 2: a rational root is written as itself, with "=", not as a decimal
            children.append(ScaleNote(p.d_k, hf.factor(root), True) if root.is_Rational
                            else ScaleNote(p.d_k, self.certified(root), False))
        symbol = (Frac(Sym("S"), Sqrt(Sym("d_k"))) if p.default_scale
                  else Product((hf.factor(p.scale), Sym("S"))))
        rows = tuple(sorted({r for r in self.shown(p.n) if r is not None} | set(self.dot_rows)))
        shown_rows, cols = self.shown(p.n), self.shown(p.m)
        exact_cells = self.cells(scores.shape, rows, cols, lambda i, j: hf.scaled(t, scores[i, j]))
        children.append(LabelledMatrix("scaled", symbol, exact_cells, self.dec("scaled"), shown_rows, cols,
                                       scores.row_labels, scores.col_labels, scores.shape, False))
        for i in self.dot_rows:
            children.append(ScaledRow(p.tokens[i],
                                      self.pick([hf.exact(scores[i, j]) if j in cols else None
                                                 for j in range(p.m)], cols),
                                      self.pick(exact_cells[i], cols), self.pick(self.dec("scaled")[i], cols)))
        return Section("scaled", spec("scaled", p).title, tuple(children), formula=self.formula("scaled"))

    def logits(self) -> list[Section]:
        """ALiBi's bias and biased scores, the soft-capped logits: each a matrix and the
        dot rows worked as a person writes them (−1/4·(1 − 0) → −1/4; 50·tanh(x/50) ≈ …)."""
        t, p = self.t, self.p
        sections = []
        for name in StepName.of_kind(StepKind.LOGIT):
            if name not in t.step_names:
                continue
            cols = self.shown(p.m)
            form = hf.LOGIT_FORMS[name]
            mat = self.matrix(name, form.symbol, col_labels=True, exact=partial(form.written, t))
            assert mat.exact is not None           # given just above
            children: list = [mat]
            for i in self.dot_rows:
                children.append(ScaledRow(p.tokens[i],
                                          self.pick([form.worked(t, i, j) if j in cols else None
                                                     for j in range(p.m)], cols),
                                          self.pick(mat.exact[i], cols), self.pick(self.dec(name)[i], cols)))
            sections.append(Section(name, spec(name, p).title, tuple(children),
                                    formula=self.formula(name)))
        return sections

    def masked(self) -> Section | None:
        t, p = self.t, self.p
        if "masked" not in t.step_names:
            return None

        def entry(i: int, j: int) -> Math:
            return hf.logit(t, i, j) if t.is_allowed(i, j) else Exact(t.masked_value)

        mat = self.matrix("masked", col_labels=True, exact=entry)
        return Section("masked", spec("masked", p).title,
                       (LabelledMatrix(mat.step, mat.symbol, mat.exact, mat.decimals, mat.rows, mat.cols,
                                       mat.row_labels, mat.col_labels, mat.shape, False),),
                       sub=True, formula=self.formula("masked"))

    def softmax(self) -> Section:
        rows = [self.softmax_row(i) for i in self.softmax_rows]
        rule = [SoftmaxRule()] if any(r.maximum is not None for r in rows) else []
        return Section("softmax", SECTION_TITLES["softmax"], (*rule, *rows))

    def sink_term(self, i: int) -> Math | None:
        """e^(sink − max): the sink's term of row i's denominator (None without a sink)."""
        t, p = self.t, self.p
        if p.sink is None:
            return None
        r = t.row_max(i)
        x = p.sink if r is None else p.sink - t.logit(i, r)
        return Int(1) if x == 0 else Exact(sympy.exp(x))

    def row_sum(self, i: int) -> Math:
        """Row i's softmax denominator as written, the sink's term last."""
        total = hf.row_sum(self.t, i)
        sink = self.sink_term(i)
        if sink is None:
            return total
        return Sum((*total.terms, sink)) if isinstance(total, Sum) else Sum((total, sink))

    def weight(self, i: int, j: int) -> Math | None:
        """A weight as its fraction of exponentials (the sink in the denominator)."""
        if self.p.sink is None or not self.t.is_allowed(i, j):
            return hf.weight(self.t, i, j)
        if len(self.t.allowed(i)) > hf.SMALL_EXACT:
            return None
        return Frac(hf.exponential(self.t, i, j), self.row_sum(i))

    def softmax_row(self, i: int) -> SoftmaxRow:
        t, p = self.t, self.p
        allowed = list(t.allowed(i))
        r = t.row_max(i)
        shown = allowed if len(allowed) <= self.o.limit else elide(allowed, self.o.limit)
        keys = [j for j in shown if j is not None]

        def row(entry) -> Row:
            return Row(tuple(Dots() if j is None else entry(j) for j in shown))

        dec = self.dec
        scaled = {j: hf.logit(t, i, j) for j in {*keys, *([r] if r is not None else [])}}
        logit = t.logit_step
        exps = tuple(Dots() if j is None else Approx(hf.exponential(t, i, j), dec("exp")[i][j]) for j in shown)
        first = allowed[0]
        return SoftmaxRow(
            token=p.tokens[i], keys=tuple(p.key_tokens[j] for j in allowed),
            blocked=tuple(p.key_tokens[j] for j in range(p.m) if j not in allowed),
            scaled=row(lambda j: scaled[j]), scaled_decimals=row(lambda j: dec(logit)[i][j]),
            maximum=Approx(scaled[r], dec(logit)[i][r]) if r is not None else None,
            maximum_key=p.key_tokens[r] if r is not None else None,
            ties=tuple(p.key_tokens[j] for j in sorted(t.ties(i))),
            shifted=row(lambda j: hf.shifted(t, i, j)), shifted_decimals=row(lambda j: dec("shifted")[i][j]),
            exponentials=exps, row_sum=self.row_sum(i), row_sum_decimal=dec("row_sum")[i][0],
            weights=row(lambda j: dec("weights")[i][j]), exact_key=p.key_tokens[first],
            exact_weight=self.weight(i, first), exact_weight_decimal=dec("weights")[i][first],
            logit=logit)

    def weights(self) -> Section:
        t, p = self.t, self.p
        step = t.step("weights")
        formula = self.formula("weights")
        if not self.numeric("weights"):
            return Section("weights", spec("weights", p).title,
                           (self.matrix("weights", col_labels=True, exact=lambda i, j: self.dec("weights")[i][j],
                                        decimals=False),), formula=formula)
        rows, cols = self.shown(p.n), self.shown(p.m)
        shades = tuple(tuple(max(0, min(100, d.mantissa)) for d in row)   # a masked weight is 0, not −∞
                       for row in cast(list[list[CertifiedDecimal]], step.decimals(Rounding(places=2))))
        exact = self.cells(step.shape, rows, cols, self.weight)
        heat = HeatMap(self.dec("weights"), shades, rows, cols, step.row_labels, step.col_labels, exact)
        return Section("weights", spec("weights", p).title, (heat,), formula=formula)

    def output(self) -> Section:
        t, p = self.t, self.p
        numeric = self.numeric("output")
        symbol = Chain((Sym("O"), Mul((Sym("A"), Sym("V")))), ("=",))
        step = t.step("output")
        rows, cols = self.shown(p.n), self.shown(p.d_v)
        mat = LabelledMatrix("output", symbol, None if numeric else self.dec("output"),
                             self.dec("output") if numeric else None, rows, cols, step.row_labels, None,
                             step.shape, False)
        children: list = [mat]
        V = t.V
        for i in self.output_rows:
            w = self.dec("weights")[i]
            terms = [Product((w[j], Row(tuple(hf.exact(v) for v in V[j])))) for j in t.allowed(i)]
            children.append(Blend(p.tokens[i], shorten(terms), Row(self.dec("output")[i]),
                                  hf.output(t, i, 0) if p.sink is None else None, self.dec("output")[i][0]))
        return Section("output", spec("output", p).title, tuple(children), formula=self.formula("output"))

    def checks(self) -> Section:
        t, p = self.t, self.p
        i = self.softmax_rows[0]
        token = p.tokens[i]
        total = hf.row_sum(t, i)
        sums = self.sink_sums(i) if p.sink is not None else Check(
            "rows-sum-to-one", "Each row of weights sums to exactly 1.",
            "Row i is its exponentials divided by their own sum, so the numerators add up to the denominator.",
            (CheckLine("", Chain((SigmaSum(Sub(Sym("A"), (Token(token), Sym("j")))),
                                              Frac(total, total), Int(1)), ("=", "="))),),
            because=("Row ", Sym("i"), " is ", Exp(Sub(Words("shifted"), (Sym("i"), Sym("j")))),
                     " divided by their own sum, so the numerators add up to the denominator. For row ",
                     Token(token), ":"))
        Vcols = list(zip(*t.V.rows()))
        out = self.dec("output")
        lines = []
        for c in elide(list(range(p.d_v)), self.o.limit):
            if c is None:
                lines.append(CheckLine("", Dots(vertical=True)))
                continue
            values = Seq(tuple(Dots() if r is None else out[r][c] for r in elide(list(range(p.n)), self.o.limit)))
            low, high = min(Vcols[c]), max(Vcols[c])
            if p.sink is not None:      # the weights sum to less than 1: 0 joins the range
                low, high = min(low, sympy.S.Zero), max(high, sympy.S.Zero)
            lines.append(CheckLine(f"column {c}", Chain((self.bound(low), values, self.bound(high)), ("≤", "≤"))))
        if p.sink is not None:
            hull = Check(
                "convex-hull", "Each output lies between the smallest and largest of 0 and the entries "
                "of its V column.", "Every weight is ≥ 0 and each row sums to less than 1 (the sink "
                "takes the rest), so each output is a weighted average of its V column and 0.",
                tuple(lines))
            return Section("checks", SECTION_TITLES["checks"], (sums, hull))
        hull = Check(
            "convex-hull", "Each output lies between the smallest and largest entry of its V column.",
            "Every weight is ≥ 0 (an exponential over a positive sum, or 0 where masked) and each row sums "
            "to 1, so each output is a weighted average of its V column.", tuple(lines),
            because=("Every weight is ", Chain((Sym("A", "ij"), Int(0)), ("≥",)),
                     " (an exponential over a positive sum, or 0 where masked) and each row sums to 1, so ",
                     Chain((Sub(Sym("O"), (Sym("i"), Sym("c"))),
                            SigmaSum(Mul((Sub(Sym("A"), (Sym("i"), Sym("j"))), Sub(Sym("V"), (Sym("j"), Sym("c")))))),
                            ), ("=",)),
                     " is a weighted average of column ", Sym("c"), ":"))
        return Section("checks", SECTION_TITLES["checks"], (sums, hull))


    def sink_sums(self, i: int) -> Check:
        """With a sink: each row's weights sum to its keys' share, less than 1."""
        token = self.p.tokens[i]
        keys, total = hf.row_sum(self.t, i), self.row_sum(i)
        return Check(
            "rows-sum-below-one", "Each row of weights sums to less than 1: the sink takes the rest.",
            "Row i is its exponentials divided by a sum that also holds the sink's term e^(sink − max), "
            "which is dropped after the softmax.",
            (CheckLine("", Chain((SigmaSum(Sub(Sym("A"), (Token(token), Sym("j")))), Frac(keys, total),
                                  Int(1)), ("=", "≤"))),))


def step_decimals(trace: Trace, name: str, options: DocumentOptions | None = None) -> Cells:
    """A step's certified decimals as math nodes, as the document shows them (a value that
    rounds to 0 at the chosen places is shown in scientific notation, never as 0.00)."""
    return _Builder(trace, options or DocumentOptions()).dec(name)
