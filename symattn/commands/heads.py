"""``symattn heads``: multi-head / grouped-query attention, each head through the engine."""

from __future__ import annotations

import argparse
import json

from symattn.commands import Outcome, digits_argument

ORDER = 45


def add_format_arguments(parser: argparse.ArgumentParser, *, latex_help: str, json_help: str) -> None:
    """``--format text|json|latex|html``, ``--fragment``, ``-o FILE`` and the old ``--json``/``--latex``
    aliases (shared by heads, facts and check; check never had ``--latex``): ``--latex`` keeps printing what it always did, the
    LaTeX body to paste into a lesson (``--format latex --fragment``)."""
    parser.add_argument("--format", choices=("text", "json", "latex", "html"), default=None,
                        help="text (default), json, latex (a complete document) or html (one self-contained page)")
    parser.add_argument("--json", action="store_true", help=f"the same as --format json: {json_help}")
    if latex_help:
        parser.add_argument("--latex", action="store_true",
                            help=f"the same as --format latex --fragment: {latex_help} (the body, to paste)")
    parser.add_argument("--fragment", action="store_true",
                        help="LaTeX: only the body, for pasting into a lesson")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")


def chosen_format(args: argparse.Namespace) -> str:
    """The one format the flags ask for; two different ones are refused."""
    from symattn.errors import SymattnError

    asked = [f for f, on in (("json", args.json), ("latex", getattr(args, "latex", False))) if on]
    if len(asked) > 1:
        raise SymattnError("give --json or --latex, not both")
    if asked and args.format and args.format != asked[0]:
        raise SymattnError(f"--{asked[0]} is --format {asked[0]}: leave out --format {args.format}")
    fmt = args.format or (asked[0] if asked else "text")
    if getattr(args, "latex", False):
        args.fragment = True          # --latex is --format latex --fragment, with or without --format latex
    if getattr(args, "fragment", False) and fmt != "latex":
        raise SymattnError(f"--fragment applies to --format latex, not --format {fmt}")
    return fmt


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "heads", help="multi-head, grouped-query and multi-query attention (default: a two-head demo)",
        description="Works a multi-head problem file (heads = h with split W_q, W_k, W_v, or [[head]] "
                    "tables; kv_heads; W_o): every head step by step, the concatenation, W_o and the "
                    "averaged weights, with certified decimals.")
    parser.add_argument("problem", nargs="?", help="a multi-head problem file (TOML)")
    parser.add_argument("--show", action="store_true", help="print the demo problem file and stop")
    add_format_arguments(parser, json_help="the machine-readable result",
                         latex_help="the LaTeX (amsmath)")
    parser.add_argument("--digits", type=digits_argument, default=3, metavar="N",
                        help="significant digits of every decimal (default 3)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.multihead import DEMO_TOML, MultiHeadProblem, attend_heads

    fmt = chosen_format(args)
    if args.show:
        return Outcome(DEMO_TOML)
    if args.problem:
        problem = MultiHeadProblem.from_toml(args.problem)
    else:
        problem = MultiHeadProblem.from_toml_text(DEMO_TOML, source="the demo")
    result = attend_heads(problem)
    if fmt == "json":
        from symattn.document.build_heads import heads_json

        return Outcome(json.dumps(heads_json(result, args.digits), ensure_ascii=False) + "\n")
    from symattn.document.build_heads import build_heads_document
    from symattn.document.formats import print_document

    return Outcome(print_document(build_heads_document(result, args.digits), fmt, fragment=args.fragment))
