"""Seeded, hand-friendly random problems for worksheet versions.

A class needs many different problems of the same shape that are each
pleasant to work by hand: small integer entries, no two scores of a row
exactly tied (unless asked for), no weight so small that the hand work is
silly, and optionally d_k a perfect square so the scale 1/√d_k is a plain
fraction.  Candidates are drawn with ``random.Random(seed)`` only and
judged through the engine's own Trace (certified weights), so the same seed
gives the same versions, byte for byte, on every machine.  Each version is
written as a problem TOML that ``Problem.from_toml`` reads back.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.errors import SymattnError, WorksheetError  # noqa: F401 (WorksheetError: its old home)
from symattn.problem.keys.table import version_keys
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

MAX_TRIES = 400   # failed draws in a row before giving up (a typical version needs about 15)
#: From this many keys on, a version's rows need only a unique largest score (not all scores
#: distinct) and X is drawn from 0 to 1: with five keys on small integers, distinct scores in
#: every row are all but never drawn (with d_k = 2 and entries −1..1 there are only five
#: possible scores), and X up to 2 spreads the scores so far that a weight falls under 0.01.
LONG_ROWS = 5


@dataclass(frozen=True)
class RandomSpec:
    """The shape and the hand-friendliness rules of the random versions."""

    n: int = 3
    d_model: int = 4
    d_k: int = 3
    d_v: int = 3
    tokens: tuple[str, ...] = ("I", "love", "cats")
    m: int | None = None                # keys (None: as many as queries)
    key_tokens: tuple[str, ...] | None = None
    cross: bool = False                 # keys and values from their own embeddings X_kv
    projected: bool = True              # X with W_q, W_k, W_v (else Q, K, V directly)
    mask: str | dict | list | None = None   # 'causal', a window table or the 0/1 rows
    scale: str | None = None            # None: the standard 1/√d_k
    x_range: tuple[int, int] = (0, 2)   # entries of X
    w_range: tuple[int, int] = (-1, 1)  # entries of W_q, W_k, W_v (or of Q, K, V given directly)
    square_dk: bool = False             # round d_k up to a perfect square: the scale becomes rational
    allow_ties: bool = False            # allow equal scores in a row
    unique_max_only: bool = False       # only the largest score of a row must be unique (LONG_ROWS)
    min_weight: Fraction = Fraction(1, 100)
    rope: dict | None = None            # a RoPE key as plain values (symattn.problem.keys.rope.Rope.plain_value)
    variants: tuple[tuple[str, object], ...] = ()   # alibi, sink, softcap, tiles, decode: plain values
    title: str = "Scaled dot-product attention"

    @property
    def key_dim(self) -> int:
        if not self.square_dk:
            return self.d_k
        return (math.isqrt(self.d_k - 1) + 1) ** 2  # the smallest perfect square ≥ d_k


def _plain(value: object) -> object:
    """A variant key's value as a problem file writes it: ints, strings for exact numbers."""
    import sympy

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, sympy.Basic):
        return int(value) if value.is_Integer else sympy.sstr(value)
    return value


def variant_values(problem: Problem) -> tuple[tuple[str, object], ...]:
    """The problem's variant keys (other than rope and the mask) as a problem file writes them,
    so a random version keeps ALiBi, the sink, the soft-cap, the tiles and the decode steps."""
    keys: list[tuple[str, object]] = []
    for key in version_keys():          # the key table's rows that versions keep
        written = key.written or key.value
        value = None if written is None else written(problem)
        if value is not None:
            keys.append((key.name, _plain(value)))
    return tuple(keys)


def spec_from_problem(problem: Problem, **options: Any) -> RandomSpec:
    """Random versions shaped like a given problem (its sizes, tokens, mask, scale and variant
    keys: a sliding window stays a window, RoPE, ALiBi, a sink, tiles and decoding are kept)."""
    mask: str | dict | list | None = None
    if problem.prefill is not None:
        mask = None                     # decoding implies the causal mask
    elif problem.window is not None:
        mask = {"window": problem.window[0], **({} if problem.window[1] else {"causal": False})}
    elif problem.mask is not None:
        mask = "causal" if problem.mask_kind == "causal" else [
            [int(problem.mask[i, j]) for j in range(problem.m)] for i in range(problem.n)]
    scale = None if problem.default_scale else str(problem.scale)
    if problem.m >= LONG_ROWS:
        options = {"unique_max_only": True, "x_range": (0, 1), **options}
    return RandomSpec(n=problem.n, d_model=problem.d_model or problem.d_k, d_k=problem.d_k,
                      d_v=problem.d_v, tokens=tuple(problem.tokens), projected=problem.projected,
                      m=problem.m, cross="X_kv" in problem.inputs,
                      key_tokens=None if problem.key_tokens == problem.tokens else tuple(problem.key_tokens),
                      mask=mask, scale=scale, title=problem.title or RandomSpec.title,
                      rope=None if problem.rope is None else problem.rope.plain_value(),
                      variants=variant_values(problem), **options)


def _matrix(rng: random.Random, rows: int, cols: int, bounds: tuple[int, int]) -> list[list[int]]:
    return [[rng.randint(*bounds) for _ in range(cols)] for _ in range(rows)]


def _draw(spec: RandomSpec, rng: random.Random) -> dict:
    d_k, m = spec.key_dim, spec.m or spec.n
    data: dict = {"title": spec.title, "tokens": list(spec.tokens)}
    if spec.key_tokens is not None:
        data["key_tokens"] = list(spec.key_tokens)
    if spec.projected:
        data["X"] = _matrix(rng, spec.n, spec.d_model, spec.x_range)
        if spec.cross:
            data["X_kv"] = _matrix(rng, m, spec.d_model, spec.x_range)
        data["W_q"] = _matrix(rng, spec.d_model, d_k, spec.w_range)
        data["W_k"] = _matrix(rng, spec.d_model, d_k, spec.w_range)
        data["W_v"] = _matrix(rng, spec.d_model, spec.d_v, spec.w_range)
    else:
        data["Q"] = _matrix(rng, spec.n, d_k, spec.w_range)
        data["K"] = _matrix(rng, m, d_k, spec.w_range)
        data["V"] = _matrix(rng, m, spec.d_v, spec.w_range)
    if spec.scale is not None:
        data["scale"] = spec.scale
    if spec.mask is not None:
        data["mask"] = spec.mask
    if spec.rope is not None:
        if d_k % 2:
            raise WorksheetError(f"RoPE pairs dimensions, but d_k would be {d_k}: use an even d_k "
                                 "(without --square-dk, or a d_k whose square is even)")
        data["rope"] = dict(spec.rope)
    for key, value in spec.variants:
        data[key] = value
    return data


def _tied_max(values: list) -> bool:
    """Is a row's largest value there more than once?  (Exact values: integers or SymPy.)"""
    from symattn.numbers.compare import compare

    top = values[0]
    for v in values[1:]:
        if compare(v, top) > 0:
            top = v
    return sum(1 for v in values if compare(v, top) == 0) > 1


def _hand_friendly(trace: Trace, spec: RandomSpec) -> bool:
    """No exact ties (unless allowed: in the scores, nor in the logits ALiBi makes; from
    LONG_ROWS keys on, no tie for a row's largest), no tiny weight, no query that is all zeros; with tiles, the maximum grows in a later block for
    some query, so the sheet's rescale is not 1 everywhere."""
    p = trace.problem
    scores, Q = trace.step("scores"), trace.step("Q")
    logits = trace.logit_step != "scaled"
    for i in range(p.n):
        if all(Q[i, c] == 0 for c in range(p.d_k)):
            return False
        allowed = trace.allowed(i)
        if spec.allow_ties:
            continue
        if spec.unique_max_only:
            if _tied_max([scores[i, j] for j in allowed]) or \
                    (logits and _tied_max([trace.logit(i, j) for j in allowed])):
                return False
            continue
        if len({scores[i, j] for j in allowed}) < len(allowed):
            return False
        if logits and len({trace.logit(i, j) for j in allowed}) < len(allowed):
            return False
    if p.tiles is not None and all(v == 1 for row in trace.step("rescale").rows() for v in row):
        return False
    weights = trace.step("weights").decimals(Rounding(digits=3))
    for i, row in enumerate(weights):
        for j in trace.allowed(i):
            w = row[j]
            assert isinstance(w, CertifiedDecimal), "a weight is never −∞ (e^−∞ = 0)"
            if w.as_fraction() < spec.min_weight:
                return False
    return True


def random_versions(spec: RandomSpec, seed: int, count: int, *,
                    separate: tuple[tuple[str, ...], Rounding] | None = None,
                    progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """``count`` different hand-friendly problems (as problem-file dicts), the same for the same seed.

    ``separate`` = (questions, rounding): keep only problems where every modelled mistake gives,
    on every asked question, an answer different from the right one and from each other's at
    that rounding (``worksheet_mistakes.separates``), so a wrong answer points to its cause."""
    if separate is not None:
        from symattn.classroom.worksheets.wrong_answers import separates
        from symattn.classroom.worksheets.questions import asked_steps
    rng = random.Random(seed)
    found: list[dict] = []
    seen: set[str] = set()
    misses = 0
    while len(found) < count:
        if misses >= MAX_TRIES:
            raise WorksheetError(
                f"found only {len(found)} of {count} hand-friendly versions ({MAX_TRIES} draws in a row "
                "failed): lower --min-weight, allow ties with --allow-ties"
                + (", allow mistakes that give the same answer with --no-separate" if separate else "")
                + ", or use fewer --versions")
        misses += 1
        data = _draw(spec, rng)
        key = problem_toml(data)
        if key in seen:
            continue
        problem = Problem.from_dict(data, source="random version")
        trace = Trace(problem)
        if not _hand_friendly(trace, spec):
            continue
        if separate is not None and not separates(trace, asked_steps(trace, separate[0]), separate[1]):
            continue
        seen.add(key)
        found.append(data)
        misses = 0
        if progress is not None:
            progress(len(found), count)
    return found


# -- TOML, written by hand: the format is small and must read back exactly ----------

def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, dict):        # an inline table: rope = { layout = "half" }
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):
            return "[\n" + ",\n".join(f"    {_toml_value(row)}" for row in value) + ",\n]"
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to a problem TOML")


def problem_toml(data: dict, comment: str | None = None) -> str:
    """A problem file for a dict of plain values (ints, strings, lists of them)."""
    lines = [f"# {comment}"] if comment else []
    for key, value in data.items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
