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
    if step.name not in ("row_sum", "weights", "output"):
        return [[_text(v) for v in row] for row in step.rows()]
    exp, V = trace.step("exp"), trace.V
    out: list[list[str]] = []
    for i in range(step.shape[0]):
        allowed = trace.allowed(i)
        if len(trace.tie_groups(i)) == 1:  # tied row: small exact numbers, print them as SymPy does
            out.append([_text(step[i, j]) for j in range(step.shape[1])])
            continue
        exps = {j: _text(exp[i, j]) for j in allowed}
        terms = [exps[j] for j in allowed]
        if trace.problem.sink is not None:   # the dropped sink column still counts in the sum
            terms.append(_text(trace.sink_term(i)))
        total = " + ".join(terms)
        if step.name == "row_sum":
            out.append([total])
        elif step.name == "weights":
            out.append([f"{exps[j]}/({total})" if j in exps else "0" for j in range(step.shape[1])])
        else:
            row = []
            for c in range(step.shape[1]):
                terms = [f"{_factor(V[j, c])}*{exps[j]}" for j in allowed if V[j, c] != 0]
                row.append(f"({' + '.join(terms) or '0'})/({total})")
            out.append(row)
    return out


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


def render_json(trace: Trace, digits: int, *, decimal_only: bool = False, places: int | None = None,
                worked_rows: list[str] | None = None) -> str:
    """The JSON text of :func:`trace_to_json`."""
    return json.dumps(trace_to_json(trace, digits, decimal_only=decimal_only, places=places,
                                    worked_rows=worked_rows),
                      ensure_ascii=False, indent=1) + "\n"
