"""The JSON view: a stable contract for programs that read symattn's results.

``{"digits": N, "steps": {NAME: {"shape": [r, c], "exact": [[...]],
"decimal": [[...]]}}}``.  ``exact`` entries are SymPy's own string form, which
``sympy.sympify`` reads back to the same exact value (``"-oo"`` where a mask
blocks); ``decimal`` entries are certified roundings to N significant digits
(``"-inf"`` where masked).
"""

from __future__ import annotations

import json
from typing import Any

import sympy

from symattn.certify import Rounding
from symattn.trace import Trace


def trace_to_json(trace: Trace, digits: int, *, decimal_only: bool = False) -> dict[str, Any]:
    """The whole trace as a JSON-ready dict."""
    p = trace.problem
    rounding = Rounding(digits=digits)
    steps: dict[str, Any] = {}
    for step in trace.steps:
        entry: dict[str, Any] = {"shape": list(step.shape), "formula": step.info.formula,
                                 "rows": list(step.row_labels), "columns": list(step.col_labels)}
        if not decimal_only:
            entry["exact"] = [[sympy.sstr(v) for v in row] for row in step.rows()]
        entry["decimal"] = [[str(d) for d in row] for row in step.decimals(rounding)]
        steps[step.name] = entry
    return {
        "title": p.title,
        "digits": digits,
        "tokens": list(p.tokens),
        "key_tokens": list(p.key_tokens),
        "d_k": p.d_k,
        "scale": sympy.sstr(p.scale),
        "mask": p.mask_kind,
        "steps": steps,
    }


def render_json(trace: Trace, digits: int, *, decimal_only: bool = False) -> str:
    """The JSON text of :func:`trace_to_json`."""
    return json.dumps(trace_to_json(trace, digits, decimal_only=decimal_only),
                      ensure_ascii=False, indent=1) + "\n"
