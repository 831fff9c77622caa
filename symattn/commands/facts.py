"""``symattn facts``: prove facts about attention, exactly, on a problem and in general."""

from __future__ import annotations

import argparse
import json

from symattn.commands import Outcome, paper, pdf_or_text
from symattn.commands.explain import add_problem_arguments, load_problem
from symattn.commands.heads import add_format_arguments, chosen_format

ORDER = 40


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "facts", help="prove facts about attention (rows sum to 1, shift invariance, ...) with proofs",
        description="Each fact is proved in general (SymPy on symbols) and checked exactly on the "
                    "problem (default: the lesson 'I love cats'). Exit status 1 when a fact fails "
                    "(only claimed figures can make one fail).")
    add_problem_arguments(parser)
    add_format_arguments(parser, json_help='[{"fact": NAME, "holds": true|false, ...}]',
                         latex_help="the proofs in LaTeX")
    parser.add_argument("--fact", action="append", metavar="NAME",
                        help="only this fact (repeatable); names as in --json")
    parser.add_argument("--claims", metavar="FILE",
                        help="a TOML file with weights = [[...]] and/or output = [[...]] to check the facts on")
    parser.add_argument("--general", action="store_true",
                        help="only the general proofs (no problem)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.errors import SymattnError
    from symattn.facts import FACTS, Claims, check_facts

    fmt = chosen_format(args)
    if args.general and (args.problem or args.example):
        raise SymattnError("--general proves the facts without a problem: leave out the problem")
    for name in args.fact or []:
        if name not in FACTS:
            raise SymattnError(f"--fact {name}: no such fact; the facts are {', '.join(FACTS)}")
    claims = Claims.from_toml(args.claims) if args.claims else None
    problem = None if args.general else _load(args)
    proofs = check_facts(problem, claims, args.fact)
    status = 0 if all(p.holds for p in proofs) else 1
    if fmt == "json":
        return Outcome(json.dumps([p.to_json() for p in proofs], indent=2, ensure_ascii=False) + "\n", status)
    from symattn.document.build.facts import build_facts_document
    from symattn.document.formats import print_document

    title = "Facts about attention" + (f": {problem.title}" if problem is not None and problem.title else "")
    return pdf_or_text(args, print_document(build_facts_document(proofs, title), fmt,
                                            fragment=args.fragment, paper=paper(args)), status)


def _load(args: argparse.Namespace):
    """A problem file (single- or multi-head: it has heads or [[head]]), or an example."""
    if args.problem:
        from symattn.errors import SymattnError
        from symattn.heads.heads import MultiHeadProblem
        from symattn.problem.tomlfile import load_toml

        try:   # the one capped reader: regular files only, at most MAX_FILE_BYTES
            keys = load_toml(args.problem, what="a problem TOML file")
        except SymattnError:
            keys = {}  # the ordinary loader reports the error in its own words
        if "heads" in keys or "head" in keys:
            return MultiHeadProblem.from_toml(args.problem)
    return load_problem(args)
