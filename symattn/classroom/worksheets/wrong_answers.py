"""What each modelled mistake gives on a worksheet question, and versions that tell them apart.

A key's "common wrong answers" table and the rule that keeps only versions
whose mistakes are distinguishable read the same values: those of
``symattn check`` itself (:class:`symattn.check.checker.Checker`'s mistakes,
each the one engine run on a changed problem), rounded as the sheet asks.
Nothing here computes attention.

For each question (a step such as ``weights``) a mistake *code* is listed
once, with the first of its variants (in the checker's order) that gives a
different answer from the right one; ``wrong-step`` (another step's value)
is not a computation mistake and is left out.
"""

from __future__ import annotations


from symattn.classroom.worksheets.backward_sheet import BACKWARD_MISTAKES, BACKWARD_ORDER
from symattn.errors import VALUE_FAILURES
from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.check.checker import Checker
from symattn.check.targets import Cell
from symattn.check.codes import MistakeCode, MistakeFamily
from symattn.numbers.masked import NEG_INF
from symattn.trace.trace import Trace
from symattn.document.worksheet_blocks import Grid, WrongAnswer

__all__ = ["WrongAnswer", "wrong_answers", "separates", "answer_texts", "figure", "VARIANT_MISTAKES",
           "variants_of", "separated_codes"]


#: The mistakes a separating version must tell apart.  ``e-as-2.7`` is listed in the key's table
#: but not required: 2.7 for e moves every exponent by 0.7 %, which an answer of two or three
#: digits often cannot show, so requiring it would reject most hand-friendly problems.
SEPARATED = frozenset(c for c in MistakeCode.of_family(MistakeFamily.FORWARD, MistakeFamily.MASK)
                      if c not in (MistakeCode.E_AS_2_7, MistakeCode.WRONG_STEP))   # (wrong-step: not a computation)
#: Which variant mistakes a version of each template must also tell apart (besides SEPARATED),
#: by the variant keys its problem has.  The key's table lists every mistake the checker models
#: where it applies; these are the ones a version is rejected for when two of them (or one and
#: the right answer) would give the same written figure.  ALiBi, the sink and the KV-cache
#: steps have no variant mistake of their own modelled here yet.
VARIANT_MISTAKES: dict[str, frozenset[str]] = {
    "rope": frozenset(MistakeCode.of_family(MistakeFamily.ROPE)),
    "window": frozenset((MistakeCode.WINDOW_OFF_BY_ONE, MistakeCode.MASK_AFTER_SOFTMAX, MistakeCode.MASKED_BY_ZERO)),
    "mask": frozenset((MistakeCode.MASK_AFTER_SOFTMAX, MistakeCode.MASKED_BY_ZERO)),
    "tiles": frozenset((MistakeCode.ONLINE_NO_RESCALE,)),
    "alibi": frozenset((MistakeCode.MASK_AFTER_SOFTMAX, MistakeCode.MASKED_BY_ZERO)),
    "sink": frozenset(),
    "softcap": frozenset(),
    "decode": frozenset(),
    "backward": BACKWARD_MISTAKES,
}
#: (mistake, question) pairs not required to be told apart, though listed in the key's table:
#: on K_rot, angles read as degrees are nearly 0 (cos ≈ 0.9996), so rope-degrees writes almost the
#: unrotated K that rope-query-only writes, and check may name either (both are told apart on the
#: scores and every later question); on rescale, online-no-rescale writes 1 everywhere, a
#: whole number that check also reads as the right factor rounded to 0 places; dP = dO·Vᵀ has no
#: scale in it, so the gradient of the unscaled forward gives the right dP (when dO is given).
NOT_REQUIRED_ON = frozenset(((MistakeCode.ROPE_DEGREES, "K_rot"), (MistakeCode.ROPE_QUERY_ONLY, "K_rot"),
                             (MistakeCode.ONLINE_NO_RESCALE, "rescale"),
                             (MistakeCode.UNSCALED_FORWARD, "d_weights"),   # dP = dO·Vᵀ has no scale in it
                             *((MistakeCode.EARLY_ROUNDING, q) for q in BACKWARD_ORDER)))   # often a slip
#: Mistakes of precision: when the answer rounds the same as the right one, the student is right at
#: the precision asked, so only an answer that differs must be told apart.
PRECISION = frozenset((MistakeCode.EARLY_ROUNDING,))
_ORDER = ("weights", "output", "scaled", "scores")   # the questions that fail most, first


def _text(d: CertifiedDecimal | object) -> str:
    return "-inf" if d is NEG_INF else d.text  # type: ignore[union-attr]


def answer_texts(trace: Trace, step: str, rounding: Rounding) -> Grid:
    """The right answer of a question, rounded as the sheet asks (the certified decimals)."""
    return tuple(tuple(_text(d) for d in row) for row in trace.step(step).decimals(rounding))


def _checker(trace: Trace, cache: dict | None) -> Checker:
    if cache is None:
        return Checker(trace)
    hit = cache.get(id(trace))
    if hit is None:
        hit = cache[id(trace)] = Checker(trace)
    return hit


def wrong_answers(trace: Trace, step: str, rounding: Rounding, *,
                  checker: Checker | None = None,
                  codes: frozenset[str] | None = None) -> list[WrongAnswer]:
    """Each modelled mistake's answer to the question ``step`` (at ``rounding``), in the checker's
    order; a mistake that changes nothing at this rounding is listed with the right answer's values
    (so a caller can see it is not separated).  ``codes``: only these mistakes (the others are
    not rounded)."""
    return _wrong_answers(trace, step, rounding, checker, codes)[0]


def _wrong_answers(trace: Trace, step: str, rounding: Rounding, checker: Checker | None,
                   codes: frozenset[str] | None) -> tuple[list[WrongAnswer], set[str]]:
    """:func:`wrong_answers`, and the codes left out because a value of theirs could not be
    certified (an entry on a rounding boundary), so the key could not show them."""
    checker = checker or Checker(trace)
    target = checker.target(step)
    right = answer_texts(trace, step, rounding)
    rows, cols = target.shape
    per_cell = checker.mistakes.cells(target.spec, target.shape, rounding.places, codes)
    variants: dict[tuple[str, str], list[Cell | None]] = {}   # a variant's cell at each place
    for k, cells in enumerate(per_cell):
        for m in cells:
            if m.code == MistakeCode.WRONG_STEP or codes is not None and m.code not in codes:
                continue
            variants.setdefault((m.code, m.detail), [None] * (rows * cols))[k] = m.cell
    chosen: dict[str, WrongAnswer] = {}
    dropped: set[str] = set()
    for (code, detail), places in variants.items():
        covered = [c for c in places if c is not None]
        if len(covered) != len(places):
            continue                       # a variant that does not cover the whole answer
        try:
            flat = [_text(c.rounded(rounding)) for c in covered]
        except VALUE_FAILURES:     # a variant that cannot be certified explains nothing
            dropped.add(code)
            continue
        grid = tuple(tuple(flat[i * cols:(i + 1) * cols]) for i in range(rows))
        previous = chosen.get(code)
        if previous is None or (previous.values == right and grid != right):
            chosen[code] = WrongAnswer(code, detail, grid)
    return list(chosen.values()), dropped - set(chosen)


def figure(values: Grid) -> str:
    """A question's answer written as ``check`` reads a matrix: ``a, b, c; d, e, f``."""
    return "; ".join(", ".join(row) for row in values)


def _differences(wrong: WrongAnswer, right: Grid) -> int:
    return sum(w != r for row_w, row_r in zip(wrong.values, right) for w, r in zip(row_w, row_r))


def variants_of(trace: Trace) -> tuple[str, ...]:
    """The variant keys of a trace's problem, as :data:`VARIANT_MISTAKES` names them."""
    p = trace.problem
    found = [name for name, present in (
        ("rope", p.rope is not None), ("window", p.window is not None),
        ("mask", p.mask is not None and p.window is None and p.prefill is None),
        ("tiles", p.tiles is not None), ("alibi", p.alibi is not None), ("sink", p.sink is not None),
        ("softcap", p.softcap is not None), ("decode", p.prefill is not None),
        ("backward", p.backward is not None)) if present]
    return tuple(found)


def separated_codes(trace: Trace) -> frozenset[str]:
    """The mistakes a version of this problem must tell apart: the plain ones and its variants'."""
    return SEPARATED.union(*(VARIANT_MISTAKES[v] for v in variants_of(trace)))


def separates(trace: Trace, steps: list[str], rounding: Rounding) -> bool:
    """Does every modelled mistake (of :data:`SEPARATED` and the problem's :data:`VARIANT_MISTAKES`) give, on every question, an answer different from the right
    one and from every other mistake's, that ``check`` names as that mistake (not as a slip in
    the last digit), so a wrong answer points to its cause?

    Cheapest and likeliest failures first (the answer is the same in any order): the questions
    that fail most; a precision mistake whose answer is right or one slip in a last digit
    (decided by its entries alone); the comparisons before ``check``; the mistakes whose answer differs
    from the right one in the fewest entries (one entry a unit off is a slip to ``check``)."""
    checker = Checker(trace)
    codes = separated_codes(trace)
    for step in sorted(steps, key=lambda s: _ORDER.index(s) if s in _ORDER else len(_ORDER)):
        right = answer_texts(trace, step, rounding)
        for wrong in wrong_answers(trace, step, rounding, checker=checker, codes=PRECISION & codes):
            if (wrong.code, step) not in NOT_REQUIRED_ON and wrong.values != right \
                    and checker.right_or_slip(step, figure(wrong.values)):
                return False            # a rounding slip that check calls a slip: the usual failure
        seen = {right}
        found, dropped = _wrong_answers(trace, step, rounding, checker, None)
        if dropped & BACKWARD_MISTAKES & codes:
            return False                # a backward mistake the key cannot show (a value of it uncertified)
        wrongs = [w for w in found if w.code in codes
                  and (w.code, step) not in NOT_REQUIRED_ON and not (w.code in PRECISION and w.values == right)]
        for wrong in wrongs:
            if wrong.values in seen:
                return False
            seen.add(wrong.values)
        for wrong in sorted(wrongs, key=lambda w: _differences(w, right)):
            if checker.named_mistake(step, figure(wrong.values)) != wrong.code:
                return False
    return True
