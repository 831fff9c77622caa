"""The JSON view: a stable contract for programs that read symattn's results.

``{"digits": N, "steps": {NAME: {"shape": [r, c], "exact": [[...]],
"decimal": [[...]]}}}``.  ``exact`` entries are SymPy's string syntax, which
``sympy.sympify`` reads back to the same exact value (``"-oo"`` where a mask
blocks); ``decimal`` entries are certified roundings to N significant digits
(``"-inf"`` where masked).

A problem with symbols gives the same object: every ``exact`` entry is its
formula, and ``decimal`` is ``null`` exactly where an entry depends on the
symbols; the top-level ``"symbols"`` lists their names, sorted (``[]`` for
a numeric problem).
"""

from __future__ import annotations

import json
from typing import Any

import sympy
from sympy.printing.str import StrPrinter

from symattn.numbers.certify import Rounding, certify
from symattn.numbers.masked import NEG_INF
from symattn.trace.trace import Step, Trace

# Term order "none": SymPy's default printer sorts the terms of every sum,
# which takes minutes for the 128-term denominators of a 128-token problem.
_PRINTER = StrPrinter({"order": "none"})


def _text(value: sympy.Expr) -> str:
    return _PRINTER.doprint(value)


def _factor(value: sympy.Expr) -> str:
    text = _text(value)
    return text if value.is_Atom and not text.startswith("-") else f"({text})"


def exact_strings(trace: Trace, step: Step) -> list[list[str]]:
    """A step's exact entries as SymPy syntax.

    The softmax steps are written from the row's parts (each denominator is
    printed once per row, not once per entry), so a 128-token problem takes
    seconds; the value is the same exact number SymPy builds.
    """
    return [exact_row(trace, step, i) for i in range(step.shape[0])]


def exact_row(trace: Trace, step: Step, i: int) -> list[str]:
    """Row i of :func:`exact_strings`."""
    if step.name not in ("row_sum", "weights", "output"):
        return [_text(_tidy(step[i, j])) for j in range(step.shape[1])]
    exp, V = trace.step("exp"), trace.V
    allowed = trace.allowed(i)
    if len(trace.tie_groups(i)) == 1:  # tied row: small exact numbers, print them as SymPy does
        return [_text(step[i, j]) for j in range(step.shape[1])]
    exps = {j: _text(exp[i, j]) for j in allowed}
    counts: dict[str, sympy.Expr] = {}   # tied keys share one exponential: 1 + 1 + e^x is 2 + e^x
    for j in allowed:
        counts[exps[j]] = counts.get(exps[j], sympy.S.Zero) + 1
    if trace.problem.sink is not None:   # the dropped sink column still counts in the sum
        sink = _text(trace.sink_term(i))
        counts[sink] = counts.get(sink, sympy.S.Zero) + 1
    total = _combined(counts)
    if step.name == "row_sum":
        return [total]
    if step.name == "weights":
        return [f"{exps[j]}/({total})" if j in exps else "0" for j in range(step.shape[1])]
    row = []
    for c in range(step.shape[1]):
        numerator: dict[str, sympy.Expr] = {}
        for j in allowed:
            numerator[exps[j]] = numerator.get(exps[j], sympy.S.Zero) + V[j, c]
        row.append(f"({_combined(numerator) or '0'})/({total})")
    return row


def _combined(terms: dict[str, sympy.Expr]) -> str:
    """Σ coefficient·exponential, written once per distinct exponential (zero terms left out)."""
    parts = []
    for exp, coefficient in terms.items():
        if coefficient == 0:
            continue
        if exp == "1":
            parts.append(_text(coefficient))
        else:
            parts.append(exp if coefficient == 1 else f"{_factor(coefficient)}*{exp}")
    return " + ".join(parts)


#: an exact entry with at most this many operations is expanded before it is printed
_TIDY_OPS = 40


def _tidy(value: sympy.Expr) -> sympy.Expr:
    """A small algebraic entry expanded, so sqrt(2)*(-1/4 + sqrt(2))/2 prints as 1 - sqrt(2)/8;
    large or symbolic ones are printed as they are (expanding them would cost and not help)."""
    if value.is_Atom or value.free_symbols or sympy.count_ops(value) > _TIDY_OPS or value.has(sympy.exp):
        return value
    expanded = sympy.expand(value)
    return expanded if sympy.count_ops(expanded) <= sympy.count_ops(value) else value


#: bytes of JSON syntax and indentation around one string of a matrix (`  "...",\n`)
_ENTRY_OVERHEAD = 10


def estimate_json_bytes(trace: Trace, digits: int, *, decimal_only: bool = False) -> int:
    """About how many bytes :func:`render_json` would write, from three sample rows per step.

    Why: the exact strings of the softmax steps grow like n·m² (every weight
    spells its row's whole denominator): at n = 512 that is 2.4 GB, 11 GiB of
    memory and minutes, so the size is known before anything is built.  Rows of
    one problem are alike (a causal mask's grow linearly: first, middle and
    last average them); decimals take at most ``digits`` + 7 characters."""
    total = 0
    for step in trace.steps:
        rows, cols = step.shape
        total += rows * cols * (digits + 7 + _ENTRY_OVERHEAD)
        if decimal_only:
            continue
        sample = sorted({0, rows // 2, rows - 1})
        sizes = [sum(len(s) + _ENTRY_OVERHEAD for s in exact_row(trace, step, i)) for i in sample]
        total += rows * sum(sizes) // len(sizes)
    return total


def decimal_strings(trace: Trace, step: Step, rounding: Rounding) -> list[list[str | None]]:
    """A step's certified decimals; None for an entry that depends on symbols."""
    if not trace.symbols_of(step.name):
        return [[str(d) for d in row] for row in step.decimals(rounding)]
    out: list[list[str | None]] = []
    for row in step.rows():
        cells: list[str | None] = []
        for value in row:
            if value is NEG_INF or value == sympy.S.NegativeInfinity:
                cells.append("-inf")
            elif value.free_symbols:
                cells.append(None)
            else:
                cells.append(str(certify(value, rounding)))
        out.append(cells)
    return out


def trace_to_json(trace: Trace, digits: int, *, decimal_only: bool = False, places: int | None = None,
                  worked_rows: list[str] | None = None) -> dict[str, Any]:
    """The whole trace as a JSON-ready dict.  ``places``: decimals to that many places (the
    object then has "places" where it had "digits"); ``worked_rows``: the rows --rows asked to
    work by hand, by token (JSON lists every row in full, so it only names them)."""
    p = trace.problem
    rounding = Rounding(places=places) if places is not None else Rounding(digits=digits)
    steps: dict[str, Any] = {}
    for step in trace.steps:
        entry: dict[str, Any] = {"shape": list(step.shape), "formula": step.info.formula,
                                 "rows": list(step.row_labels), "columns": list(step.col_labels)}
        if not decimal_only:
            entry["exact"] = exact_strings(trace, step)
        entry["decimal"] = decimal_strings(trace, step, rounding)
        steps[step.name] = entry
    precision = {"places": places} if places is not None else {"digits": digits}
    extra = {"worked_rows": worked_rows} if worked_rows is not None else {}
    return {
        "title": p.title,
        **precision,
        **extra,
        "tokens": list(p.tokens),
        "key_tokens": list(p.key_tokens),
        "d_k": p.d_k,
        "scale": _text(p.scale),
        "mask": p.mask_kind,
        "symbols": sorted(str(x) for x in p.free_symbols),
        "steps": steps,
    }


def backward_json_terms(trace: Trace) -> int:
    """About how many exponential terms the exact strings of the backward steps would spell,
    from the shapes alone (no gradient is built: sampling one d_K entry of a 512-token problem
    would already spell 262,144 of them).

    Why: every weight e^x_ij/Z_i is written with its row's denominator, so a row-local entry
    (dP, D, dS) spells about 2m terms, d_Q (a row of dS times K) about m²/2 (the products
    e^x_ij·e^x_ik, like ones combined), and a sum over rows (d_V, d_K, d_sink, d_W, d_X) the
    terms of every row it sums; with ``loss = "half-squared-error"`` dO = O − T is itself m
    terms over Z.  Measured against what is written: 5 to 25 bytes a term (a scale with a root
    writes longer exponents), in proportion from 4 to 16 tokens (tests/test_json_backward_budget.py)."""
    p, names = trace.problem, {step.name for step in trace.steps}
    n, m, dk, dv, dm = p.n, p.m, p.d_k, p.d_v, p.d_model or 0
    local, row_pairs, over_rows = 2 * m + dv, m * m // 2 + m, 2 * n * m
    per_step = {
        "lse": n * m, "loss": n * dv * m, "d_output": n * dv * m, "d_weights": n * m * dv,
        "row_dot": n * local, "d_logits": n * m * local, "d_scores": n * m * local,
        "d_Q": n * dk * row_pairs, "d_Q_rot": n * dk * row_pairs, "d_V": m * dv * n * (m + 1),
        "d_K": m * dk * over_rows, "d_K_rot": m * dk * over_rows, "d_sink": over_rows,
        "d_W_q": dm * dk * n * row_pairs, "d_W_k": dm * dk * m * over_rows,
        "d_W_v": dm * dv * m * n * (m + 1),
        "d_X": n * dm * (row_pairs + (0 if "d_X_kv" in names else 2 * over_rows)),
        "d_X_kv": m * dm * 2 * over_rows}
    # dO = O − T spells a row's exponentials over Z itself: every step after it m times longer
    grows = p.backward is not None and p.backward.loss == "half-squared-error"
    return sum(terms * (m if grows and name not in ("lse", "loss") else 1)
               for name, terms in per_step.items() if name in names)


def check_json_size(trace: Trace, digits: int, *, decimal_only: bool = False) -> None:
    """Refuse a JSON view over MAX_JSON_BYTES, with its estimated size and what would fit; and,
    before any exact gradient is built, one whose backward steps would spell more than
    MAX_JSON_BACKWARD_TERMS exact terms (their cost is time long before it is bytes)."""
    from symattn.errors import ProblemError
    from symattn.limits import MAX_JSON_BACKWARD_TERMS, MAX_JSON_BYTES

    if not decimal_only and (terms := backward_json_terms(trace)) > MAX_JSON_BACKWARD_TERMS:
        small = estimate_json_bytes(trace, digits, decimal_only=True)
        hint = (f"add --decimal-only (the certified decimals alone, about {_size(small)})"
                if small <= MAX_JSON_BYTES else "add --decimal-only and use fewer --digits")
        raise ProblemError(
            f"the JSON view's exact gradients would spell about {terms:,} exponential terms (the "
            f"backward steps grow like n·m²·d), over the cap of {MAX_JSON_BACKWARD_TERMS:,} "
            f"(MAX_JSON_BACKWARD_TERMS): {hint}, or use a smaller problem")
    size = estimate_json_bytes(trace, digits, decimal_only=decimal_only)
    if size <= MAX_JSON_BYTES:
        return
    what = "the certified decimals" if decimal_only else \
        "the exact strings of the weights and outputs grow like n·m²"
    hint = "use fewer --digits or a smaller problem"
    if not decimal_only:
        small = estimate_json_bytes(trace, digits, decimal_only=True)
        if small <= MAX_JSON_BYTES:
            hint = f"add --decimal-only (the certified decimals alone, about {_size(small)}) or use a smaller problem"
        else:
            hint = "add --decimal-only and use fewer --digits, or use a smaller problem"
    raise ProblemError(f"the JSON view would be about {_size(size)} ({what}), over the cap of "
                       f"{_size(MAX_JSON_BYTES)} (MAX_JSON_BYTES): {hint}")


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def render_json(trace: Trace, digits: int, *, decimal_only: bool = False, places: int | None = None,
                worked_rows: list[str] | None = None) -> str:
    """The JSON text of :func:`trace_to_json` (refused past MAX_JSON_BYTES: check_json_size)."""
    check_json_size(trace, digits, decimal_only=decimal_only)
    return json.dumps(trace_to_json(trace, digits, decimal_only=decimal_only, places=places,
                                    worked_rows=worked_rows),
                      ensure_ascii=False, indent=1) + "\n"
