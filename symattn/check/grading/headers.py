"""Header cells that are not targets: refused before grading, with the closest target.

Why before grading: a misspelt header (``weigths[I]``) would otherwise make a
whole column ``invalid`` for every student, and the teacher would find out
from a report full of red.  A header is *not a target* when it cannot be read
as one or names something the problem does not have: a step, a function, a
constant, a row or a column token.  A header that does name the problem's
things but cannot be graded for another reason (``d_k^9999`` is too large to
check, ``weights[7]`` is out of range in one version) stays a column warning,
as before: the other columns are graded.
"""

from __future__ import annotations

import difflib
import re

from symattn.check.checker import Checker
from symattn.check.targets import Index, TargetSpec, nodes, parse_target
from symattn.errors import SymattnError
from symattn.exact.parser import Call, Evaluator, Name

__all__ = ["not_a_target", "refusal", "suggestion"]

_FUNCTIONS = (*Evaluator.functions, "sum", "rowsum")
_SIMPLE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[([^\[\]]*)\])?\s*")
_MAX_CANDIDATES = 5_000       # targets offered to difflib for a header that is an expression


def _names(checker: Checker) -> set[str]:
    """The constants a target may name besides the steps (as targets.py's evaluator has them)."""
    p = checker.trace.problem
    names = {"d_k", "d_v", "n", "m", "scale", *Evaluator.constants}
    if p.d_model is not None:
        names.add("d_model")
    return names


def not_a_target(checker: Checker, header: str) -> str | None:
    """Why ``header`` is not a target of the checker's problem (None when it names only
    things the problem has)."""
    try:
        spec = parse_target(header)
    except SymattnError as exc:
        return str(exc)
    return _unknown(checker, spec)


def _unknown(checker: Checker, spec: TargetSpec) -> str | None:
    trace = checker.trace
    steps = trace.step_names
    constants = _names(checker)
    for node in nodes(spec.node):
        if isinstance(node, Call) and node.name not in _FUNCTIONS:
            return f"no function named {node.name!r}"
        if isinstance(node, Index):
            if node.name not in steps:
                return f"no step named {node.name!r}"
            step = trace.step(node.name)
            for axis, key in enumerate(node.keys):
                labels = step.row_labels if axis == 0 else step.col_labels
                if isinstance(key, str) and key not in labels:
                    kind = "row" if axis == 0 else "column"
                    return f"{node.name} has no {kind} named {key!r}; its {kind}s are {', '.join(labels)}"
        elif isinstance(node, Name) and node.name not in steps and node.name not in constants \
                and node.name not in _FUNCTIONS:
            return f"no step or constant named {node.name!r}"
    return None


def refusal(checker: Checker, header: str) -> str | None:
    """One clause for a header that is not a target: why, and the closest target (or,
    when nothing is close, the steps there are); None for a header that is one."""
    why = not_a_target(checker, header)
    if why is None:
        return None
    near = suggestion(checker, header)
    if near is not None:
        return f"{header!r} is not a target ({why}); did you mean {near!r}?"
    return (f"{header!r} is not a target ({why}); the steps are "
            f"{', '.join(checker.trace.step_names)}, e.g. weights[{checker.trace.scores.row_labels[0]}]")


def _closest(word: str, choices) -> str | None:
    hit = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if hit:
        return hit[0]
    lower = {c.lower(): c for c in choices}
    return lower.get(word.lower())


def suggestion(checker: Checker, header: str) -> str | None:
    """The closest target of the problem to a header that is not one (None if nothing is
    close): a plain ``step[row, column]`` is mended part by part, anything else is matched
    as a whole against the problem's targets (difflib)."""
    trace = checker.trace
    simple = _SIMPLE.fullmatch(header)
    if simple:
        name = simple[1] if simple[1] in trace.step_names else _closest(simple[1], trace.step_names)
        if name is not None:
            step = trace.step(name)
            keys = [k.strip() for k in simple[2].split(",")] if simple[2] is not None else []
            mended = []
            for axis, key in enumerate(keys[:2]):
                labels = step.row_labels if axis == 0 else step.col_labels
                if key.lstrip("-").isdigit() or key in labels:
                    mended.append(key)
                else:
                    mended.append(_closest(key, labels))
            text = name if not mended else \
                f"{name}[{', '.join(mended)}]" if None not in mended else None
            if text is not None and _resolves(checker, text):
                return text
    return _closest(header, _candidates(checker))


def _resolves(checker: Checker, text: str) -> bool:
    try:
        checker.target(text)
    except SymattnError:
        return False
    return True


def _candidates(checker: Checker) -> list[str]:
    """Whole targets to match a header against: steps, their rows and entries (capped), and
    the constants a lesson prints."""
    trace = checker.trace
    out = list(trace.step_names) + ["sqrt(d_k)", "d_k", "scale"]
    for name in trace.step_names:
        step = trace.step(name)
        out += [f"{name}[{r}]" for r in step.row_labels]
    for name in trace.step_names:
        step = trace.step(name)
        for r in step.row_labels:
            out += [f"{name}[{r}, {c}]" for c in step.col_labels]
            if len(out) > _MAX_CANDIDATES:
                return out
    return out
