"""The terminal printer: a document as Unicode text, bracketed matrices side by side.

Math nodes print to one-line strings (2/√3, e^(−8/√3), negatives in
parentheses inside products); blocks print to lists of lines.
"""

from __future__ import annotations

import textwrap

from symattn.document.blocks import (
    Approx, Blend, Chain, Check, Decimal, Document, DotProducts, Dots, Exact, Exp, Factor, Frac, Func, HeatMap,
    Int, LabelledMatrix, Math, Mul, Neg, Note, Product, Row, ScaledRow, ScaleNote, Section, Seq, SigmaSum,
    SoftmaxRow, SoftmaxRule, Sqrt, Sub, Sum, Summary, Sym, Token, WorkedProjection, Words,
    ProofLines, Report, Sup, Table, Verdicts, Group,
)
from symattn.document.printers.base import Printer
from symattn.exact.sympytext import unicode_text
from symattn.numbers.masked import NEG_INF
from symattn.document.support.layout import grid, indent, side_by_side

WIDTH = 100   # prose wraps here; matrices and formulas are never broken


def _single(node: Math) -> Math:
    """A one-term sum is its term."""
    return node.terms[0] if isinstance(node, Sum) and len(node.terms) == 1 else node


def _compound(node: Math) -> bool:
    """A side of a fraction that needs a spaced slash: a sum, an exponential, a SymPy form."""
    if isinstance(node, Mul):
        return any(_compound(f) for f in node.factors)
    return isinstance(node, (Sum, SigmaSum, Exp, Exact))


def _minus(text: str) -> str:
    """A decimal's ASCII minus as the typographic one (an exponent's e-7 stays ASCII)."""
    return text.replace("e-", "e@").replace("-", "−").replace("e@", "e-")


class TextPrinter(Printer):
    """Prints a document as terminal text."""

    format = "text"
    margin = "   "      # blocks sit under their section's heading; a Report's listing has none

    # -- math -------------------------------------------------------------------------
    def _print_Int(self, node: Int) -> str:
        return str(node.value)

    def _print_Exact(self, node: Exact) -> str:
        return unicode_text(node.value)

    def _print_Decimal(self, node: Decimal) -> str:
        if node.value is NEG_INF:
            return "−∞"
        return _minus(str(node.value))

    def _print_Sym(self, node: Sym) -> str:
        name = node.name + {"tilde": "\u0303", "hat": "\u0302", "bar": "\u0304"}.get(node.accent or "", "")
        return f"{name}_{node.sub}" if node.sub else name

    def _print_Words(self, node: Words) -> str:
        return node.text

    def _print_Token(self, node: Token) -> str:
        return node.name

    def _print_Dots(self, node: Dots) -> str:
        return "⋮" if node.vertical else "⋯"

    def _print_Neg(self, node: Neg) -> str:
        return "−" + self.print(node.operand)

    def _print_Frac(self, node: Frac) -> str:
        num, den = _single(node.numerator), _single(node.denominator)
        if _compound(num) or _compound(den):   # a fraction of sums: spaced, sums in parentheses
            return " / ".join(f"({self.print(x)})" if isinstance(x, (Sum, Mul, Product))
                              or (isinstance(x, SigmaSum) and x is num) else self.print(x)
                              for x in (num, den))
        text = self.print(den)
        if isinstance(den, (Mul, Product, Frac, Neg)):
            text = f"({text})"
        return f"{self.print(num)}/{text}"

    def _print_Sqrt(self, node: Sqrt) -> str:
        inner = self.print(node.radicand)
        return f"√{inner}" if isinstance(node.radicand, (Int, Sym)) else f"√({inner})"

    def _print_Func(self, node: Func) -> str:
        if node.name == "abs":
            return f"|{self.print(node.argument)}|"
        return f"{node.name}({self.print(node.argument)})"

    def _print_Exp(self, node: Exp) -> str:
        return f"e^({self.print(node.exponent)})"

    def _print_Mul(self, node: Mul) -> str:
        text = ""
        for k, f in enumerate(node.factors):
            if k and isinstance(f, (Exp, Exact, Sym, Sub, Func, SigmaSum, Sup)):
                text += "·"
            part = self.print(f)
            text += f"({part})" if k and isinstance(f, (Sum, Neg)) else part
        return text

    def _print_Product(self, node: Product) -> str:
        return "·".join(self.print(f) for f in node.factors)

    def _print_Group(self, node: Group) -> str:
        return f"({self.print(node.operand)})"

    def _print_Factor(self, node: Factor) -> str:
        text = self.print(node.operand)
        if text.startswith("−") or any(op in text[1:] for op in ("+", "−", "/")):
            return f"({text})"
        return text

    def _print_Sum(self, node: Sum) -> str:
        parts = [self.print(t) for t in node.terms]
        text = parts[0] if parts else "0"
        for part in parts[1:]:
            text += f" − {part[1:]}" if part.startswith("−") else f" + {part}"
        return text

    def _print_SigmaSum(self, node: SigmaSum) -> str:
        body = self.print(node.body)
        if isinstance(node.body, (Sum, Frac)) and " " in body:      # Σ_j (e^(s_j) / Σ_k e^(s_k))
            body = f"({body})"
        index = node.index if len(node.index) == 1 else f"({node.index})"
        return f"Σ_{index} {body}"

    def _print_Row(self, node: Row) -> str:
        return "[" + ", ".join(self.print(x) for x in node.items) + "]"

    def _print_Seq(self, node: Seq) -> str:
        return ", ".join(self.print(x) for x in node.items)

    def _print_Sub(self, node: Sub) -> str:
        return f"{self.print(node.base)}[{', '.join(self.print(x) for x in node.indices)}]"

    def _print_Sup(self, node: Sup) -> str:
        base, script = self.print(node.base), self.print(node.script)
        if isinstance(node.base, (Sum, Neg, Frac, Product, Mul)):
            base = f"({base})"
        if script in _SUPERSCRIPTS:                 # pᵀ, x²: a superscript character
            return base + _SUPERSCRIPTS[script]
        return f"{base}^{script}" if len(script) == 1 else f"{base}^({script})"

    def _print_Approx(self, node: Approx) -> str:
        exact, approx = self.print(node.exact), self.print(node.approx)
        return exact if exact == approx else f"{exact} ≈ {approx}"

    def _print_Chain(self, node: Chain) -> str:
        text = self.print(node.parts[0])
        for rel, part in zip(node.relations, node.parts[1:]):
            text += f" {rel} {self.print(part)}"
        return text

    # -- blocks -----------------------------------------------------------------------
    def _print_Document(self, doc: Document) -> str:
        lines = [line for child in doc.children for line in self.print(child)]
        return "\n".join(lines).rstrip() + "\n"

    def _print_Summary(self, s: Summary) -> list[str]:
        kind = {"given": "attention from Q, K, V given directly"}.get(s.kind, s.kind)
        scale = (f"scale = 1/√d_k = 1/√{s.d_k}" if s.default_scale
                 else f"scale = {self.print(s.scale)} (instead of 1/√d_k)")
        lines = [s.title, "═" * len(s.title),
                 f"{kind}: {_count(len(s.tokens), 'query', 'queries')} ({', '.join(s.tokens)}) × "
                 f"{_count(len(s.key_tokens), 'key', 'keys')} ({', '.join(s.key_tokens)})",
                 f"d_k = {s.d_k}, d_v = {s.d_v}" + (f", d_model = {s.d_model}" if s.d_model else "")
                 + f"; {scale}"]
        if s.mask_kind is not None:
            lines.append(f"mask: {s.mask_kind} (1 = may attend, as PyTorch SDPA's boolean mask)")
        if s.symbols:
            lines.append(f"Symbols: {', '.join(s.symbols)}. Steps that depend on them are shown exactly, "
                         "without decimals.")
        r = s.rounding
        precision = (f"{r.digits} significant digits" if r.digits is not None
                     else f"{r.places} decimal places")
        lines.append(f"Decimals are correctly rounded to {precision} (certified with ball arithmetic).")
        return lines

    def _print_Section(self, section: Section) -> list[str]:
        number = self.number(section)
        head = f"{number}. {section.title}" if number else section.title
        lines = [""]
        f = section.formula
        if f is None:
            lines.append(head)
        else:
            extra = ("  = " + "·".join(f"({a}×{b})" for a, b in f.factors)) if f.factors else ""
            lines += [f"{head}: {f.text}    ({f.shape[0]}×{f.shape[1]}){extra}", f"   {f.meaning}"]
        for child in section.children:
            lines += self.print(child)
        return lines

    def _print_Note(self, note: Note) -> list[str]:
        return _wrap("".join(p if isinstance(p, str) else self.print(p) for p in note.parts))

    def _cells(self, cells, rows, cols) -> list[list[str]]:
        r_shown = {r for r in rows if r is not None}
        c_shown = {c for c in cols if c is not None}
        return [[self.print(cells[i][j]) if i in r_shown and j in c_shown else "" for j in range(len(cells[i]))]
                for i in range(len(cells))]

    def _print_LabelledMatrix(self, m: LabelledMatrix) -> list[str]:
        cols = list(m.cols)
        rows = list(m.rows)
        exact = self._cells(m.exact, rows, cols) if m.exact is not None else None
        dec = self._cells(m.decimals, rows, cols) if m.decimals is not None else None
        first = exact if exact is not None else dec
        assert first is not None            # a LabelledMatrix shows exact cells, decimals or both
        block = grid(first, m.row_labels, m.col_labels, rows=rows, cols=cols)
        if exact is not None and dec is not None and not m.integers and exact != dec:
            block = side_by_side(block, grid(dec, None, m.col_labels, rows=rows, cols=cols))
        if m.caption is None:
            return indent(block, 3)
        return ["", f"   {m.step}    ({m.shape[0]}×{m.shape[1]})    {m.caption}", *indent(block, 3)]

    def _print_WorkedProjection(self, w: WorkedProjection) -> list[str]:
        terms = " + ".join(self.print(t) for t in w.terms)
        return ["", f"   By hand, the query of {w.token!r} is its embedding times W_q:",
                f"   Q[{w.token}] = {terms} = {self.print(w.result)}"]

    def _print_DotProducts(self, d: DotProducts) -> list[str]:
        lines = []
        for token, query, products in d.rows:
            lines += ["", f"   The dot products of row {token!r}, query q = {self.print(query)}:"]
            for dp in products:
                if dp is None:
                    lines.append("   ⋮")
                    continue
                lines.append(f"   • vs key of {dp.key_token!r} {self.print(dp.key)}: "
                             f"{self.print(dp.products)} = {self.print(dp.value)}")
        return lines

    def _print_ScaleNote(self, s: ScaleNote) -> list[str]:
        relation = "=" if s.rational else "≈"
        return [f"   d_k = {s.d_k}, so every score is divided by √{s.d_k} {relation} {self.print(s.root)}"]

    def _print_ScaledRow(self, r: ScaledRow) -> list[str]:
        return ["", f"   Row {r.token!r}: {self.print(r.scores)} → "
                + self.print(Approx(r.scaled, r.decimals))]

    def _print_SoftmaxRule(self, rule: SoftmaxRule) -> list[str]:
        return ["   Subtracting the row maximum changes no weight (the factor cancels) but keeps e^z small."]

    def _print_SoftmaxRow(self, r: SoftmaxRow) -> list[str]:
        p = self.print
        blocked = [] if not r.blocked else [
            f"   (the mask blocks {', '.join(repr(b) for b in r.blocked)}: weight exactly 0)"]
        exact = (f"   exactly: weights[{r.token}, {r.exact_key}] = {p(r.exact_weight)}"
                 if r.exact_weight is not None else None)
        if r.maximum is None:
            lines = [*blocked, f"   {r.logit}[{r.token}] = {p(r.scaled)}   (keys {', '.join(map(repr, r.keys))})",
                     "   The symbols leave the row maximum open, so nothing is subtracted:",
                     f"   exp = e^{r.logit} here, which gives the same weights.",
                     f"   row_sum = {p(r.row_sum)}"]
            return lines + ([exact.replace("exactly: ", "")] if exact else [])
        exps = ", ".join(self._exponential(e) for e in r.exponentials)
        lines = [*blocked,
                 f"   {r.logit}[{r.token}] = {p(Approx(r.scaled, r.scaled_decimals))}   (keys {', '.join(map(repr, r.keys))})",
                 f"   row maximum: {p(r.maximum)} (key {r.maximum_key!r})",
                 f"   shifted = {r.logit} − max = {p(Approx(r.shifted, r.shifted_decimals))}",
                 f"   exponentials: {exps}",
                 f"   row_sum = {p(r.row_sum)} ≈ {p(r.row_sum_decimal)}",
                 f"   weights = exp / row_sum ≈ {p(r.weights)}"]
        return lines + ([exact] if exact else [])

    def _exponential(self, e: Math) -> str:
        if not isinstance(e, Approx):
            return self.print(e)
        return "e^0 = 1" if e.exact == Int(1) else f"{self.print(e.exact)} ≈ {self.print(e.approx)}"

    def _print_HeatMap(self, h: HeatMap) -> list[str]:
        return indent(grid(self._cells(h.decimals, h.rows, h.cols), h.row_labels, h.col_labels,
                           rows=list(h.rows), cols=list(h.cols)), 3)

    def _print_Blend(self, b: Blend) -> list[str]:
        lines = ["", f"   Row {b.token!r} blends the value rows with its weights:",
                 f"   {' + '.join(self.print(t) for t in b.terms)} ≈ {self.print(b.result)}"]
        if b.exact_entry is not None:
            lines.append(f"   exactly: output[{b.token}, 0] = {self.print(b.exact_entry)}")
        return lines

    def _print_Check(self, c: Check) -> list[str]:
        lines = ["", *_wrap(f"{c.statement} {c.reason}")]
        for line in c.lines:
            lines.append(f"   {line.label}: {self.print(line.math)}" if line.label else f"   {self.print(line.math)}")
        return lines

    # -- results other than a Trace ---------------------------------------------------
    def _print_ProofLines(self, p: ProofLines) -> list[str]:
        def shown(line) -> str:
            if not line.parts:
                return line.text
            return "".join(x if isinstance(x, str) else self.print(x) for x in line.parts)

        if not p.heading:
            return [f"   {shown(line)}" for line in p.lines]
        return [f"   {p.heading}:", *(f"     {shown(line)}" for line in p.lines)]

    def _print_Verdicts(self, v: Verdicts) -> list[str]:
        """One line per figure (its explanation beneath when it is not right)."""
        width = max((len(r.target) + (len(r.variant) + 3 if r.variant else 0) for r in v.rows), default=0)
        lines = []
        for r in v.rows:
            name = r.target + (f" ({r.variant})" if r.variant else "")
            code = r.code + (f": {r.mistake}" if r.mistake else "")
            lines.append(f"{r.mark} {name.ljust(width)}  {_one_line(r.text):<40}  {code}")
            if not r.right:
                lines.append(f"    {r.message}")
        return lines

    def _print_Table(self, t: Table) -> list[str]:
        """Columns aligned (numbers on the right), the caption above, a blank line before."""
        rows = [list(t.header)] + [[c if isinstance(c, str) else self.print(c) for c in r] for r in t.rows]
        widths = [max(len(r[k]) for r in rows) for k in range(len(t.header))]
        right = [k < len(t.numeric) and t.numeric[k] for k in range(len(t.header))]
        lines = [""] + ([self.margin + t.caption] if t.caption else [])
        for r in rows:
            cells = [c.rjust(w) if right[k] else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))]
            lines.append((self.margin + "  ".join(cells)).rstrip())
        return lines + ([self.margin + t.legend] if t.legend else [])

    def _print_Report(self, doc: Report) -> str:
        """The listing: the title, then every section's blocks without headings; notes unwrapped."""
        self.margin = ""
        lines = [doc.title] if doc.show_title else []
        for section in doc.sections:
            for child in section.children:
                if isinstance(child, Note):
                    lines.append("".join(p if isinstance(p, str) else self.print(p) for p in child.parts))
                else:
                    lines += self.print(child)
        return "\n".join(lines) + "\n"


def _one_line(text: str, limit: int = 60) -> str:
    """A written figure on one line (a pasted numpy matrix spans several)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


_SUPERSCRIPTS = {"T": "ᵀ", "⊤": "ᵀ", "2": "²", "3": "³", "−1": "⁻¹", "n": "ⁿ"}


def _wrap(text: str, width: int = WIDTH) -> list[str]:
    """Prose indented under its section, wrapped to the terminal width."""
    return textwrap.wrap(text, width, initial_indent="   ", subsequent_indent="   ",
                         break_long_words=False, break_on_hyphens=False)


def _count(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def print_text(node: Document | Math) -> str:
    """A document (or one math node) as terminal text."""
    return TextPrinter().doprint(node)
