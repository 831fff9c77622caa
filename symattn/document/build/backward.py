"""The document's sections for the backward pass (the ``backward`` key).

Built from the Trace's public API like the forward derivation (``document.build.trace``):
after the forward sections, each backward step the Trace holds (lse, loss, dO, dV, dP, D,
dS, dS', dQ, dK, with RoPE, a sink and projections their steps too) gets a section with its
formula, shape, meaning and matrix of certified decimals (exact entries where they are
rational, as a given dO or dP of whole numbers), at the forward's rounding and size limit.
The logit-gradient section then works one row by hand through the softmax's Jacobian: the
weights p and dP of the row, D = Σ_j p_j·dP_j with its numbers (and the same as dO·O),
every dS_j = p_j·(dP_j − D), and why diag(p) − p·pᵀ applied to dP gives that.  The row is
the forward's softmax row (``--rows``; default the last).  Every number is a certified
decimal of the Trace: the sums written out use the rounded factors, the results are the
certified roundings of the exact values.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from symattn.document import handforms as hf
from symattn.document.blocks import (
    Block, Chain, Decimal, Dots, Factor, Frac, Func, Int, LabelledMatrix, Math, Mul, Neg, Note, Product, Row,
    Section, SigmaSum, Sub, Sum, Sym, Token, Words,
)
from symattn.document.build.section import SectionBuilder
from symattn.numbers.certify import CertifiedDecimal
from symattn.trace.steps import spec

#: the symbol each backward step's matrix is shown with
SYMBOLS: dict[str, Math] = {
    "lse": Words("lse"), "loss": Sym("L"), "d_output": Sym("dO"), "d_V": Sym("dV"),
    "d_weights": Sym("dP"), "row_dot": Sym("D"), "d_logits": Sym("dS"), "d_scores": Sym("dS'"),
    "d_Q_rot": Sym("dQ", "rot"), "d_K_rot": Sym("dK", "rot"), "d_Q": Sym("dQ"), "d_K": Sym("dK"),
    "d_sink": Sym("ds"), "d_W_q": Sym("dW", "q"), "d_W_k": Sym("dW", "k"), "d_W_v": Sym("dW", "v"),
    "d_X": Sym("dX"), "d_X_kv": Sym("dX", "kv")}

#: steps whose columns are the keys (their matrices carry the key tokens on top)
KEY_COLUMNS = ("d_weights", "d_logits", "d_scores")

SHORT = 6        # a written dot product of more terms keeps its first three and last two


def backward_sections(b: SectionBuilder) -> list[Section]:
    """The backward pass's sections, after the forward ones (none without a backward key)."""
    t = b.t
    if t.problem.backward is None:
        return []
    from symattn.trace.backward import BACKWARD_STEP_ORDER

    out = [Section("backward", "The backward pass", (Note((_intro(t),)),), numbered=False)]
    for name in BACKWARD_STEP_ORDER:
        if name not in t.step_names:
            continue
        children: list[Block] = [matrix(b, name)]
        if name == "d_logits":
            children += worked_row(b, b.softmax_rows[0])
        out.append(Section(name, spec(name, t.problem).title, tuple(children),
                           formula=b.formula(name, _factors(t, name))))
    return out


def _intro(t) -> str:
    start = {"given": "the output gradient dO = ∂L/∂O given in the problem",
             "half-squared-error": "the loss L = ½‖O − T‖², whose output gradient is dO = O − T",
             "sum": "the loss L = Σ O, whose output gradient is dO = 1 everywhere"}
    loss = t.problem.backward.loss
    kind = "given" if loss is None else getattr(loss, "value", str(loss))
    return ("The backward pass (FlashAttention-2's Algorithm 2, in exact arithmetic) starts from "
            f"{start.get(kind, start['given'])} and runs the forward steps in reverse: dV and dP from dO, "
            "then through the softmax (D and dS), the scaling (dS') and the scores to dQ and dK"
            + (", and through the projections to the weights and embeddings" if t.problem.projected else "")
            + ". The log-sum-exp of each row is what the forward pass saves for it.")


def _factors(t, name: str) -> tuple[tuple[int, int], ...]:
    """The shapes multiplied, for a step that is one matrix product."""
    p = t.problem
    n, m, dk, dv = p.n, p.m, p.d_k, p.d_v
    dm = p.d_model or 0
    return {"d_V": ((m, n), (n, dv)), "d_weights": ((n, dv), (dv, m)), "d_Q": ((n, m), (m, dk)),
            "d_K": ((m, n), (n, dk)), "d_Q_rot": ((n, m), (m, dk)), "d_K_rot": ((m, n), (n, dk)),
            "d_W_q": ((dm, n), (n, dk)), "d_W_k": ((dm, m), (m, dk)), "d_W_v": ((dm, m), (m, dv))
            }.get(name, ())


def matrix(b: SectionBuilder, name: str) -> LabelledMatrix:
    """A backward step's matrix: exact where every shown entry is rational (a given dO, a dP of
    whole numbers), else its certified decimals (exact forms where symbols allow none)."""
    t = b.t
    step = t.step(name)
    rows, cols = b.shown(step.shape[0]), b.shown(step.shape[1])
    shown = [(i, j) for i in rows if i is not None for j in cols if j is not None]
    col_labels = step.col_labels if name in KEY_COLUMNS else None
    symbol = SYMBOLS.get(name, Sym(name))
    rational = all(step[i, j].is_Rational for i, j in shown)
    if rational:
        exact = tuple(tuple(hf.number(step[i, j]) if (i in rows and j in cols) else None
                            for j in range(step.shape[1])) for i in range(step.shape[0]))
        integers = all(step[i, j].is_Integer for i, j in shown)
        return LabelledMatrix(name, symbol, exact, b.dec(name), rows, cols, step.row_labels, col_labels,
                              step.shape, integers)
    numeric = not t.symbols_of(name)
    return LabelledMatrix(name, symbol, None if numeric else b.dec(name), b.dec(name) if numeric else None,
                          rows, cols, step.row_labels, col_labels, step.shape, False)


def _rel(x: Math) -> str:
    """= where the shown decimal is the exact value (proved), else ≈."""
    exact = isinstance(x, Int) or (isinstance(x, Decimal) and isinstance(x.value, CertifiedDecimal)
                                   and x.value.exact)
    return "=" if exact else "≈"


def _negated(x: Math) -> tuple[bool, Math]:
    """(True, |x|) when x is a negative certified decimal, else (False, x): so dP − D reads
    6 + 0.5 rather than 6 − −0.5."""
    if isinstance(x, Decimal) and isinstance(x.value, CertifiedDecimal) and x.value.mantissa < 0:
        return True, Decimal(x.value._replace(mantissa=-x.value.mantissa), x.scientific)
    return False, x


def _minus(a: Math, c: Math) -> Sum:
    """a − c written out."""
    negative, size = _negated(c)
    return Sum((a, size if negative else Neg(size)))


def _shorten(terms: Sequence[Math]) -> tuple[Math, ...]:
    return tuple(terms) if len(terms) <= SHORT else (*terms[:3], Dots(), *terms[-2:])


def _entry(value: sympy.Basic, decimal: Math) -> Math:
    """A factor as written: the exact rational when it is one, else the certified decimal."""
    return hf.number(value) if value.is_Rational else decimal


def worked_row(b: SectionBuilder, i: int) -> list[Block]:
    """Row i of dS worked by hand through the softmax's Jacobian."""
    t, p = b.t, b.p
    token = p.tokens[i]
    allowed = list(t.allowed(i))
    shown = [None if k is None else allowed[k] for k in b.shown(len(allowed))]
    keys = [j for j in shown if j is not None]
    A, dP, dS, D = b.dec("weights")[i], b.dec("d_weights")[i], b.dec("d_logits")[i], b.dec("row_dot")[i][0]
    dO = t.step("d_output")
    V = t.V
    tok = Token(token)

    def row(entry) -> Row:
        return Row(tuple(Dots() if j is None else entry(j) for j in shown))

    def sub(name: str, *index: Math) -> Sub:
        return Sub(Sym(name), index)

    out: list[Block] = [Note((
        f"Row '{token}' by hand, through the softmax's Jacobian. Its weights (section Attention weights) "
        "and its row of dP are ", Chain((Sym("p"), row(lambda j: A[j])), ("=" if all(_rel(A[j]) == "=" for j in keys) else "≈",)), " and ",
        Chain((sub("dP", tok), row(lambda j: dP[j])), ("=" if _rational_row(t, "d_weights", i, keys)
                                                     else "≈",)),
        f" (keys {', '.join(p.key_tokens[j] for j in keys)}).",
        *((" The mask blocks " + ", ".join(p.key_tokens[j] for j in range(p.m) if j not in allowed)
           + ": their weight is 0, so their dS is exactly 0.",) if len(allowed) < p.m else ())))]
    exact_dO = all(dO[i, c].is_Rational for c in range(p.d_v))
    if exact_dO and all(V[j, c].is_Rational for j in keys for c in range(p.d_v)):
        dots = []
        for j in keys:
            terms = [Product((Factor(hf.number(dO[i, c])), Factor(hf.number(V[j, c])))) for c in range(p.d_v)]
            dots.append(Chain((sub("dP", tok, Token(p.key_tokens[j])), Sum(_shorten(terms)), dP[j]), ("=", "=")))
        out.append(Note(("Each entry of dP is the row's output gradient ", sub("dO", tok), " = ",
                         Row(tuple(hf.number(dO[i, c]) for c in range(p.d_v))),
                         " dotted with that key's value row: ", *_joined(dots), ".")))
    products = [Product((Factor(A[j]), Factor(dP[j]))) for j in keys]
    out.append(Note((
        "First the row dot product D, the weighted mean of dP: ",
        Chain((sub("D", tok), SigmaSum(Mul((Sym("p", "j"), Sym("dP", "j")))), Sum(_shorten(products)), D),
              ("=", "=", _rel(D))), ".", *_same_as_output(b, i, exact_dO))))
    worked = []
    for j in keys:
        worked.append(Chain((sub("dS", tok, Token(p.key_tokens[j])),
                             Product((Factor(A[j]), Factor(_minus(dP[j], D)))), dS[j]), ("=", _rel(dS[j]))))
    out.append(Note(("Then each entry ", Chain((Sym("dS", "j"), Product((Sym("p", "j"), Factor(
        Sum((Sym("dP", "j"), Neg(Sym("D")))))))), ("=",)), ": ", *_joined(worked), ".")))
    pj, dPj, D_ = Sym("p", "j"), Sym("dP", "j"), Sym("D")
    jac = Product((pj, Factor(Sum((Sym("δ", "jk"), Neg(Sym("p", "k")))))))
    out.append(Note((
        "Why: the softmax's Jacobian on a row is ", Chain((_partial(pj, Sym("z", "k")), jac), ("=",)),
        " (", Sym("δ", "jk"), " is 1 when j = k, else 0), the matrix ",
        Sum((Func("diag", Sym("p")), Neg(Mul((Sym("p"), Sym("pᵀ")))))),
        ". It is symmetric, so the gradient of the logits is that matrix applied to the row of dP: ",
        Chain((Sym("dS", "j"), SigmaSum(Product((jac, Sym("dP", "k"))), "k"),
               Sum((Product((pj, dPj)), Neg(Product((pj, SigmaSum(Product((Sym("p", "k"), Sym("dP", "k"))),
                                                                  "k")))))),
               Product((pj, Factor(Sum((dPj, Neg(D_))))))), ("=", "=", "=")),
        ". The diagonal keeps ", Product((pj, dPj)), "; the rank-one part ", Mul((Sym("p"), Sym("pᵀ"))),
        " takes away ", pj, " times the row's weighted mean of dP, which is D. Entry by entry that is "
        "dS = p ∘ (dP − D): one product per entry instead of a matrix per row.", *_row_sums(b))))
    return out


def _partial(num: Sym, den: Sym) -> Math:
    """∂num/∂den: ∂p_j/∂z_k."""
    return Frac(Sym("∂" + num.name, num.sub), Sym("∂" + den.name, den.sub))


def _joined(items: Sequence[Math]) -> tuple[str | Math, ...]:
    parts: list[str | Math] = []
    for k, item in enumerate(items):
        if k:
            parts.append("; ")
        parts.append(item)
    return tuple(parts)


def _rational_row(t, name: str, i: int, keys: list[int]) -> bool:
    step = t.step(name)
    return all(step[i, j].is_Rational for j in keys)


def _same_as_output(b: SectionBuilder, i: int, exact_dO: bool) -> tuple[str | Math, ...]:
    """D is also dO_i·O_i (the weights sum to 1: without a sink)."""
    t, p = b.t, b.p
    if p.sink is not None:
        return ()
    dO, out = t.step("d_output"), b.dec("output")[i]
    dO_dec = b.dec("d_output")[i]
    terms = [Product((Factor(_entry(dO[i, c], dO_dec[c]) if exact_dO else dO_dec[c]), Factor(out[c])))
             for c in range(p.d_v)]
    return (" It is also the output row's dot product with its gradient (the weights sum to 1): ",
            Chain((Product((Sub(Sym("dO"), (Token(p.tokens[i]),)), Sub(Sym("O"), (Token(p.tokens[i]),)))),
                   Sum(_shorten(terms)), b.dec("row_dot")[i][0]), ("=", _rel(b.dec("row_dot")[i][0]))), ".")


def _row_sums(b: SectionBuilder) -> tuple[str | Math, ...]:
    """Without a sink, each row of dS sums to 0: Σ p_j dP_j − D Σ p_j = D − D."""
    if b.p.sink is not None:
        return ()
    pj = Sym("p", "j")
    return (" Each row of dS sums to 0 (",
            Chain((Sum((SigmaSum(Product((pj, Sym("dP", "j")))), Neg(Product((Sym("D"), SigmaSum(pj)))))),
                   Sum((Sym("D"), Neg(Sym("D")))), Int(0)), ("=", "=")), ", the weights summing to 1",
            "): the gradient moves the logits of a row against each other, never all together.")
