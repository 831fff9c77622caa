"""``symattn heads``: multi-head / grouped-query attention, each head through the engine."""

from __future__ import annotations

import argparse
import json

from symattn.commands import Outcome, digits_argument

ORDER = 45


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "heads", help="multi-head, grouped-query and multi-query attention (default: a two-head demo)",
        description="Works a multi-head problem file (heads = h with split W_q, W_k, W_v, or [[head]] "
                    "tables; kv_heads; W_o): every head step by step, the concatenation, W_o and the "
                    "averaged weights, with certified decimals.")
    parser.add_argument("problem", nargs="?", help="a multi-head problem file (TOML)")
    parser.add_argument("--show", action="store_true", help="print the demo problem file and stop")
    parser.add_argument("--json", action="store_true", help="the machine-readable result")
    parser.add_argument("--latex", action="store_true", help="a LaTeX fragment (amsmath)")
    parser.add_argument("--digits", type=digits_argument, default=3, metavar="N",
                        help="significant digits of every decimal (default 3)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.errors import SymattnError
    from symattn.multihead import (DEMO_TOML, MultiHeadProblem, attend_heads, heads_json,
                                   render_heads_latex, render_heads_text)

    if args.json and args.latex:
        raise SymattnError("give --json or --latex, not both")
    if args.show:
        return Outcome(DEMO_TOML)
    if args.problem:
        problem = MultiHeadProblem.from_toml(args.problem)
    else:
        problem = MultiHeadProblem.from_toml_text(DEMO_TOML, source="the demo")
    result = attend_heads(problem)
    if args.json:
        return Outcome(json.dumps(heads_json(result, args.digits), ensure_ascii=False) + "\n")
    if args.latex:
        return Outcome(render_heads_latex(result, args.digits))
    return Outcome(render_heads_text(result, args.digits))
