"""A worksheet version → two documents: the student's sheet and the teacher's key.

The sheet shows an opaque version code (never the seed or the problem file), the
given matrices, a short instruction per template (the scaling, the mask, how to
round), and per question its points, working space and answer boxes sized to the
answer.  The key answers the same numbered questions: whole numbers and short
fractions exactly (``−3/8``, ``7/6 ≈ 1.17``), other values as certified decimals
after ``≈``; then what each modelled mistake gives (the values ``check`` names),
then the worked derivation (the derivation document itself).  Both are trees of
blocks (``document.worksheet_blocks``) printed by ``document.printers.worksheet`` (LaTeX
and HTML).  The blocks are document vocabulary; building them from the classroom's questions and
wrong answers is the classroom's job, so this builder lives here.
"""

from __future__ import annotations

import re
from typing import Protocol

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.document import handforms as hf
from symattn.document.blocks import (
    Block, Chain, Decimal, Document, Exact, Exp, Frac, Int, LabelledMatrix, Math, Neg, Note, Section,
    SigmaSum, Sqrt, Sub, Sum, Sym, Words,
)
from symattn.document.build.trace import DocumentOptions, build_document
from symattn.numbers.masked import NEG_INF
from symattn.document.support.texutil import tex_escape, tex_token
from symattn.classroom.worksheets.layouts import LAYOUTS, Layout
from symattn.document.worksheet_blocks import (
    Derivation, Instruction, KeyAnswer, KeyValue, Question, SheetHeader, WrongAnswers,
)
from symattn.trace.trace import Trace
from symattn.vocab import StepName, StepKind
from symattn.classroom.worksheets.wrong_answers import answer_texts, wrong_answers
from symattn.classroom.worksheets.questions import SheetQuestion, ask_text, decode_part, rounding_words
from symattn.classroom.worksheets.backward_sheet import BACKWARD_WORK_CM, backward_givens, loss_rule
from symattn.document.build.backward import KEY_COLUMNS, SYMBOLS as BACKWARD_SYMBOLS

__all__ = ["build_sheet", "build_key", "VersionLike"]

SHORT_FRACTION = 7          # a rational whose p/q has at most this many characters is written exactly
_WORK_CM = {"Q": 3.0, "K": 3.0, "V": 3.0, "scores": 3.5, "scaled": 2.5, "weights": 6.0, "output": 3.5,
            "Q_rot": 4.0, "K_rot": 4.0, "bias": 1.5, "biased": 2.0, "capped": 3.0, "running_max": 2.0,
            "rescale": 2.5, "running_sum": 4.0, "decode_work": 2.5, **BACKWARD_WORK_CM}
_DECODE_WORK_CM = {"q": 2.0, "k": 2.0, "v": 2.0, "K_cache": 1.5, "V_cache": 1.5, "scores": 2.5,
                   "weights": 4.0, "output": 2.5}
_SYMBOL = {"Q": Sym("Q"), "K": Sym("K"), "V": Sym("V"), "scores": Sym("S"), "weights": Sym("A"),
           "output": Sym("O"), "Q_rot": Sym("Q", "rot"), "K_rot": Sym("K", "rot"), "bias": Sym("B"),
           "biased": Sym("S", "bias"), "capped": Sym("S", "cap"), "running_max": Sym("m"),
           "rescale": Sym("r"), "running_sum": Sym("l"), "decode_work": Sym("N"), **BACKWARD_SYMBOLS}
_DECODE_SYMBOL = {"q": "q", "k": "k", "v": "v", "K_cache": "K", "V_cache": "V", "scores": "s",
                  "weights": "a", "output": "o"}
#: Questions whose columns are named (keys, blocks, counts), so the answer boxes are labelled
_LABELLED_COLUMNS = frozenset(s for s in StepName.of_kind(StepKind.SCORE, StepKind.LOGIT, StepKind.MASK,
                                                         StepKind.SOFTMAX, StepKind.ONLINE, StepKind.DECODE)
                               if s is not StepName.ROW_SUM) | frozenset(KEY_COLUMNS)   # row sums: one column, Σ
#: Steps whose rows are the tokens (the data and the projections), not d_model
_TOKEN_ROWS = frozenset(StepName.of_kind(StepKind.EMBEDDING, StepKind.PROJECTION))


class VersionLike(Protocol):
    """What a sheet or key is built from (read only: a frozen Version is one)."""

    @property
    def vid(self) -> str: ...

    @property
    def code(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def trace(self) -> Trace: ...

    @property
    def stem(self) -> str: ...


# -- blocks --------------------------------------------------------------------------

def _title(version: VersionLike) -> str:
    return (version.trace.problem.title or "Scaled dot-product attention").split(", version ")[0]


def _points_text(q: SheetQuestion) -> str | None:
    if q.points is None:
        return None
    p = q.points
    text = str(p.numerator) if p.denominator == 1 else f"{float(p):g}" if (p * 100).denominator == 1 else str(p)
    return f"{text} point{'s' if p != 1 else ''}"


def _total(questions: list[SheetQuestion]) -> str | None:
    if not questions or any(q.points is None for q in questions):
        return None
    total = sum(q.points for q in questions)  # type: ignore[misc]
    return str(total.numerator) if total.denominator == 1 else str(total)


def _given(trace: Trace) -> Section:
    names: list[str] = [n for n in StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT) if n in trace.step_names] \
        or list(StepName.of_kind(StepKind.PROJECTION))
    blocks = []
    symbols = {"X": Sym("X"), "X_kv": Sym("X", "kv"), "W_q": Sym("W", "q"), "W_k": Sym("W", "k"),
               "W_v": Sym("W", "v"), "Q": Sym("Q"), "K": Sym("K"), "V": Sym("V")}
    for name in names:
        step = trace.step(name)
        rows, cols = tuple(range(step.shape[0])), tuple(range(step.shape[1]))
        cells = tuple(tuple(hf.exact(v) for v in row) for row in step.rows())
        labels = step.row_labels if name in _TOKEN_ROWS else None
        blocks.append(LabelledMatrix(name, symbols[name], cells, None, rows, cols, labels, None,
                                     step.shape, True, None))
    for name, symbol, matrix, labels in backward_givens(trace):      # dO, or the loss's target
        cells = tuple(tuple(hf.exact(matrix[i, j]) for j in range(matrix.cols)) for i in range(matrix.rows))
        blocks.append(LabelledMatrix(name, Sym(symbol), cells, None, tuple(range(matrix.rows)),
                                     tuple(range(matrix.cols)), labels, None, matrix.shape,
                                     all(v.is_Integer for v in matrix), None))
    return Section("given", "Given", tuple(blocks), numbered=False)


def instructions(trace: Trace, rounding: Rounding, steps: list[str]) -> list[Instruction]:
    """The template's rules in one sentence each: the scaling, the mask, the sink, the rounding."""
    p = trace.problem
    out = []
    if p.default_scale:
        root = sympy.sqrt(p.d_k)
        parts: tuple[Math, ...] = (Sqrt(Sym("d_k")), Sqrt(Int(p.d_k)))
        chain = Chain((*parts, Int(int(root))), ("=", "=")) if root.is_Integer else Chain(parts, ("=",))
        out.append(Instruction("Scaling", ("divide every score by ", chain, " (", Chain((Sym("d_k"), Int(p.d_k)),
                                           ("=",)), " is the length of each query and key row).")))
    if p.prefill is not None:
        out.append(_decode_instruction(trace))
    elif p.window is not None:
        out.append(_window_instruction(p.window))
    if p.mask is not None and p.prefill is None and p.window is None:
        if p.mask_kind == "causal":
            out.append(Instruction("Causal", (
                "each token may attend only to itself and the tokens before it: query ", Sym("i"),
                " uses keys 0 to ", Sym("i"), ". A blocked key gets weight exactly 0 and each row's "
                "softmax runs over its allowed keys only.",)))
        else:
            out.append(Instruction("Mask", (f"{p.mask_description} (1 = may attend). A blocked key gets "
                                            "weight exactly 0; each row's softmax runs over its allowed "
                                            "keys only.",)))
    if p.sink is not None:
        out.append(Instruction("Sink", ("Sink logit ", Chain((Sym("s"), hf.exact(p.sink)), ("=",)),
                                        ": each row's softmax denominator also adds ",
                                        Exp(Sum((Sym("s"), Neg(Words("max"))))),
                                        "; that column is then dropped, so each row sums to less than 1.")))
    if getattr(p, "rope", None) is not None:
        from symattn.problem.keys.rope import rope_statement, rope_text

        out.append(Instruction("RoPE", (rope_text(p),), rope_statement(p).strip()))
        hint = _angle_hint(p)
        if hint is not None:
            out.append(hint)
    if p.alibi is not None:
        out.append(_alibi_instruction(p))
    if p.softcap is not None:
        out.append(Instruction("Soft-cap", ("c = ", hf.exact(p.softcap), ": before the softmax each logit ",
                                            Sym("x"), " becomes c·tanh(x / c), which keeps it inside (−c, c).")))
    if p.tiles is not None:
        out.append(_blocks_instruction(trace))
    if "weights" in steps:
        x_j, x_k = Sub(Sym("x"), (Sym("j"),)), Sub(Sym("x"), (Sym("k"),))
        top = Exp(Sum((x_j, Neg(Words("max")))))
        below: Math = SigmaSum(Exp(Sum((x_k, Neg(Words("max"))))), "k")
        if p.sink is not None:
            below = Sum((below, Exp(Sum((Sym("s"), Neg(Words("max")))))))
        rule = Chain((Sub(Sym("w"), (Sym("j"),)), Frac(top, below)), ("=",))
        logits = {"biased": "biased scores", "capped": "capped logits"}.get(trace.logit_step, "scaled scores")
        out.append(Instruction("Softmax", (f"in each row of {logits} ", Sym("x"), ", ", rule,
                                           " (max: the row's largest entry)"
                                           + ("; each row of weights sums to 1." if p.sink is None else "."))))
    if p.backward is not None:
        out.append(Instruction("Backward", (loss_rule(trace),)))
    extra = ""
    if p.rope is not None:
        extra = " Entries with a root (such as √3/2) are given as decimals."
    if p.tiles is not None:
        extra = (" Keep the exponentials exact in the running sums until the end: rounding them "
                 "first changes the sums.")
    out.append(Instruction("Rounding", (f"give every decimal answer correctly rounded to "
                                        f"{rounding_words(rounding)} (round only at the end); write whole "
                                        "numbers and short fractions exactly." + extra,)))
    return out


def _window_instruction(window: tuple[int, bool]) -> Instruction:
    width, causal = window
    if causal:
        band = (f"query i sees the keys j with i − {width} < j ≤ i: the {width} keys ending at itself "
                "(the first queries see fewer)")
    else:
        band = f"query i sees the keys j with |i − j| < {width}, on both sides"
    return Instruction("Window", (f"sliding window W = {width}: {band}. A key outside the window gets "
                                  "weight exactly 0 and each row's softmax runs over its window only.",))


def _alibi_instruction(p) -> Instruction:
    if p.alibi.symmetric:
        rule = "−m·|i − j| for every query i and key j (how far apart they are)"
    else:
        rule = ("−m·(i − j) for every query i and key j (i − j is how many positions back the key "
                "is: 0 for itself; above the diagonal it is positive, where a causal mask blocks the key)")
    return Instruction("ALiBi", ("slope ", Chain((Sym("m"), hf.exact(p.alibi.slope)), ("=",)),
                                 f": the bias is {rule}; biased = scaled + bias is what the softmax takes.",))


def _angle_hint(p) -> Instruction | None:
    """RoPE with angles that are multiples of π/2 or π/3: the cosines and sines a student needs."""
    rope = p.rope
    angles = {q * t for q in (*rope.positions, *rope.key_positions) for t in rope.theta}
    ratios = [a / sympy.pi for a in angles]
    if not all(r.is_Rational and (2 * r).is_Integer or (3 * r).is_Integer for r in ratios):
        return None
    return Instruction("Angles", ("every angle p·θ here is a multiple of π/2 or π/3, so its cosine "
                                  "and sine are exact: cos 0 = 1, cos(π/2) = 0, sin(π/2) = 1, "
                                  "cos(π/3) = 1/2, sin(π/3) = √3/2, cos(2π/3) = −1/2, cos π = −1.",))


def _blocks_instruction(trace: Trace) -> Instruction:
    p = trace.problem
    assert p.tiles is not None, "the blocks are explained only for a tiled problem"
    blocks = ", ".join("(" + ", ".join(map(repr, p.key_tokens[a:b])) + ")" for a, b in p.tiles)
    blocks_tex = ", ".join("(" + ", ".join(map(tex_token, p.key_tokens[a:b])) + ")" for a, b in p.tiles)
    return Instruction("Blocks", (
        f"the online softmax reads the keys in blocks {blocks}, numbered from 0. For each query, after "
        "block b: the running maximum m_b is the largest logit so far; the rescale factor is "
        "r_b = e^(m_(b−1) − m_b) (1 for block 0, and 1 whenever the maximum does not grow); the "
        "running sum is l_b = r_b·l_(b−1) + Σ e^(x_j − m_b) over the keys j of block b. The weights "
        "are e^(x_j − m_last) / l_last.",),
        r"the online softmax reads the keys in blocks " + blocks_tex + r", numbered from 0. "
        r"For each query, after block $b$: the running maximum $m_b$ is the largest logit so far; "
        r"the rescale factor is $r_b = e^{m_{b-1} - m_b}$ ($1$ for block $0$, and $1$ whenever the "
        r"maximum does not grow); the running sum is $l_b = r_b\,l_{b-1} + \sum_{j \in b} "
        r"e^{x_j - m_b}$. The weights are $e^{x_j - m_{\text{last}}} / l_{\text{last}}$.")


def _decode_instruction(trace: Trace) -> Instruction:
    p = trace.problem
    P = p.prefill
    prompt = ", ".join(map(repr, p.tokens[:P]))
    counts = ("Work counts for the decode steps: rows_cached and rows_recomputed are the rows projected "
              "with the cache (q, k, v of the new token) and without it (every row again); dots_cached "
              "and dots_recomputed are the score dot products with the cache (one row) and without it "
              "(the whole score matrix again); cache_elements is how many numbers the caches hold at the "
              "end, L·(d_k + d_v).")
    text = (f"the first {P} tokens ({prompt}) are the prompt: their keys and values are already in the "
            "caches. A decode step for token t projects only its own row x_t (q_t = x_t·W_q, k_t = x_t·W_k, "
            "v_t = x_t·W_v), appends k_t and v_t to the caches, and lets q_t attend over every cached key "
            "(no mask is needed: the cache holds only earlier tokens and t itself). ")
    latex = (f"the first {P} tokens ({', '.join(map(tex_token, p.tokens[:P]))}) are the prompt: their keys and values are "
             r"already in the caches. A decode step for token $t$ projects only its own row $x_t$ "
             r"($q_t = x_t W_q$, $k_t = x_t W_k$, $v_t = x_t W_v$), appends $k_t$ and $v_t$ to the "
             r"caches, and lets $q_t$ attend over every cached key (no mask is needed: the cache holds "
             r"only earlier tokens and $t$ itself). " + tex_escape(counts))
    return Instruction("KV cache", (text + counts,), latex)


def _key_value(value: sympy.Expr, d: CertifiedDecimal | object) -> KeyValue:
    if d is NEG_INF:
        return KeyValue(Exact(sympy.S.NegativeInfinity), None)
    assert isinstance(d, CertifiedDecimal)
    if value.is_Integer:
        return KeyValue(hf.exact(value), None)
    if value.is_Rational and len(f"{abs(value.p)}/{value.q}") <= SHORT_FRACTION:
        number = Frac(Int(abs(value.p)), Int(value.q))
        return KeyValue(Neg(number) if value < 0 else number, Decimal(d), d.exact)
    return KeyValue(None, Decimal(d))


def _key_cells(trace: Trace, step: str, rounding: Rounding) -> tuple[tuple[KeyValue, ...], ...]:
    s = trace.step(step)
    decimals = s.decimals(rounding)
    return tuple(tuple(_key_value(v, d) for v, d in zip(row, drow)) for row, drow in zip(s.rows(), decimals))


def _box_chars(cells: tuple[tuple[KeyValue, ...], ...]) -> int:
    widest = 1
    for row in cells:
        for c in row:
            if c.decimal is not None:
                text = c.decimal.value.text if isinstance(c.decimal.value, CertifiedDecimal) else "-inf"
            else:
                text = str(c.exact) if not isinstance(c.exact, Int) else str(c.exact.value)
                text = "-inf" if isinstance(c.exact, Exact) else text
            widest = max(widest, len(text))
    return widest


def _scale_note(trace: Trace) -> tuple[str | Math, ...]:
    p = trace.problem
    if not p.default_scale:
        return ("The scale is ", hf.exact(p.scale), ".")
    root = sympy.sqrt(p.d_k)
    if root.is_Integer:
        return (Sqrt(Sym("d_k")), " = ", Sqrt(Int(p.d_k)), " = ", Int(int(root)),
                ", so each score is divided by ", Int(int(root)), ".")
    from symattn.numbers.certify import certify
    return (Sqrt(Sym("d_k")), " = ", Sqrt(Int(p.d_k)), " ≈ ", Decimal(certify(root, Rounding(digits=3))),
            " (kept exact in the working).")


def _what(step: str) -> str:
    return ask_text(step)


def _work_cm(step: str) -> float:
    decode = decode_part(step)
    return _DECODE_WORK_CM[decode[1]] if decode is not None else _WORK_CM.get(step, 3.0)


def _symbol(trace: Trace, step: str) -> Math:
    if step == "scaled":
        return Frac(Sym("S"), Sqrt(Sym("d_k"))) if trace.problem.default_scale else Sym("scaled")
    decode = decode_part(step)
    if decode is not None:
        t, part = decode
        return Sym(_DECODE_SYMBOL[part], f"{t}, cache" if part.endswith("cache") else str(t))
    found = re.fullmatch(r"running_output_(\d+)", step)
    if found:
        return Sym("O", f"({found.group(1)})")
    return _SYMBOL.get(step, Sym(step))


def _columns(q: SheetQuestion) -> tuple[str, ...] | None:
    """The column labels of a question's answer boxes (keys, blocks or counts), where they help."""
    decode = decode_part(q.step)
    if q.step in _LABELLED_COLUMNS or (decode is not None and decode[1] in ("scores", "weights")):
        if q.step in ("running_max", "rescale", "running_sum"):
            return tuple(f"block {c}" for c in q.col_labels)
        return q.col_labels
    return None


def _formula(trace: Trace, step: str) -> str:
    return trace.step(step).info.latex


def build_sheet(version: VersionLike, questions: list[SheetQuestion], *,
                layout: Layout = LAYOUTS["standard"]) -> Document:
    """The student's sheet of one version (no seed, no file name: only the version code), in
    ``layout``'s working space, answer boxes and spacing."""
    trace = version.trace
    rounding = questions[0].rounding if questions else Rounding(digits=3)
    steps = [q.step for q in questions]
    header = SheetHeader(_title(version), "worksheet", version.code, name_line=True,
                         total_points=_total(questions))
    rules = Section("instructions", "Instructions", tuple(instructions(trace, rounding, steps)),
                    numbered=False)
    asked = []
    for q in questions:
        cells = _key_cells(trace, q.step, rounding)
        asked.append(Question(q.number, q.step, _what(q.step), _formula(trace, q.step), q.shape,
                              q.row_labels, _columns(q), _points_text(q), _box_chars(cells),
                              round(_work_cm(q.step) * layout.work_scale, 1), layout.box_em,
                              layout.after_question))
    return Document(_title(version), (header, _given(trace), rules,
                                      Section("questions", "Questions", tuple(asked), numbered=False)),
                    {"kind": "worksheet", "code": version.code})


def build_key(version: VersionLike, questions: list[SheetQuestion], *, derivation: bool = True,
              mistakes: bool = True, layout: Layout = LAYOUTS["standard"]) -> Document:
    """The teacher's key of one version: the sheet's questions answered, the common wrong answers,
    the worked derivation."""
    trace = version.trace
    rounding = questions[0].rounding if questions else Rounding(digits=3)
    facts = [f"Version {version.vid}",
             f"seed {version.seed}" if version.seed is not None else "no seed (a given problem)",
             f"problem file {version.stem}.toml"]
    header = SheetHeader(_title(version), "answer key", version.code, tuple(facts),
                         total_points=_total(questions))
    answers: list[Block] = [Note((f"Whole numbers and short fractions are exact; every other decimal is "
                                  f"correctly rounded to {rounding_words(rounding)} and certified with ball "
                                  "arithmetic (≈).",))]
    for q in questions:
        cells = _key_cells(trace, q.step, rounding)
        approx = any(c.exact is None for row in cells for c in row)
        note = _scale_note(trace) if q.step == "scaled" else ()
        answers.append(KeyAnswer(q.number, q.step, _what(q.step), _formula(trace, q.step), _points_text(q),
                                 _symbol(trace, q.step), approx, cells, q.row_labels, _columns(q), note))
    children: list[Block] = [header, Section("answers", "Answers", tuple(answers), numbered=False)]
    if mistakes:
        from symattn.check.checker import Checker

        checker = Checker(trace)
        # a mistake that gives the right answer at this rounding is no "wrong answer" (on the
        # lesson's symmetric scores, transposed-scores is the key itself): left out
        table = tuple((q.number, q.step, tuple(w for w in wrong_answers(trace, q.step, rounding, checker=checker)
                                               if w.values != answer_texts(trace, q.step, rounding)))
                      for q in questions)
        table = tuple(row for row in table if row[2])
        if table:
            children.append(Section("wrong-answers", "Common wrong answers",
                                    (Note(("What each modelled mistake gives, rounded as the sheet asks; "
                                           "symattn check and grade name these mistakes.",)),
                                     WrongAnswers(table, rounding, layout.wrong_gap,
                                                  layout.wrong_per_line, layout.wrong_words)), numbered=False))
    if derivation:
        doc = build_document(trace, DocumentOptions(rounding=rounding))
        children.append(Section("derivation", "Worked derivation", (Derivation(doc),), numbered=False))
    return Document(_title(version), tuple(children), {"kind": "key", "code": version.code})
