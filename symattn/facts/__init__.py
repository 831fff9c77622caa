"""Facts about attention, with proofs: checked exactly on given data and in general.

>>> import symattn as sa
>>> proof = sa.facts.prove("rows-sum-to-one", sa.load_example("i-love-cats"))
>>> proof.holds
True

Every fact has a stable name (used by ``symattn facts --json``).  A fact
is a theorem, so on true attention it holds; it fails only on figures a
person claims (:class:`Claims`), and then the proof carries the
counterexample.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from symattn.errors import SymattnError
from symattn.facts.claims import Claims
from symattn.facts.proof import Line, Proof
from symattn.facts.heads_facts import gqa_equals_repeated_heads
from symattn.facts.softmax_facts import (rows_sum_to_one, shift_invariance, softmax_jacobian,
                                         weights_in_open_interval)
from symattn.facts.structure_facts import (causal_prefix, convex_hull, permutation_equivariance,
                                           temperature_limits, variance_d_k)
from symattn.facts.symbolic import softmax, symbol_matrix, symbol_vector
from symattn.facts.rope_facts import rope_relative_position
from symattn.facts.variant_facts import sink_forms_agree, window_is_a_mask
from symattn.facts.online_facts import kv_cache_equals_causal_row, online_softmax_equals_softmax
from symattn.facts.backward_facts import BACKWARD_FACTS
from symattn.heads.heads import MultiHeadProblem
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

__all__ = ["FACTS", "Claims", "Line", "Proof", "check_facts", "prove", "softmax", "symbol_matrix",
           "symbol_vector"]

#: name -> function(trace, claims) -> Proof, in the order they are reported.
FACTS: dict[str, Callable[[Trace | None, Claims | None], Proof]] = {
    "rows-sum-to-one": rows_sum_to_one,
    "weights-in-open-interval": weights_in_open_interval,
    "shift-invariance": lambda t, c: shift_invariance(t),
    "convex-hull": convex_hull,
    "temperature-limits": lambda t, c: temperature_limits(t),
    "variance-d_k": lambda t, c: variance_d_k(t),
    "softmax-jacobian": lambda t, c: softmax_jacobian(t),
    "causal-prefix": lambda t, c: causal_prefix(t),
    "permutation-equivariance": lambda t, c: permutation_equivariance(t),
    "gqa-equals-repeated-heads": lambda t, c: gqa_equals_repeated_heads(t),
    "window-is-a-mask": lambda t, c: window_is_a_mask(t),
    "sink-forms-agree": lambda t, c: sink_forms_agree(t),
    "online-softmax-equals-softmax": online_softmax_equals_softmax,
    "kv-cache-equals-causal-row": kv_cache_equals_causal_row,
    "rope-relative-position": rope_relative_position,
    **BACKWARD_FACTS,
}


#: facts about the plain softmax (weights summing to 1); a sink logit changes what they say
PLAIN_SOFTMAX = frozenset(("rows-sum-to-one", "shift-invariance", "convex-hull",
                           "temperature-limits", "softmax-jacobian"))


#: facts whose instance check rebuilds the problem on the scores: ALiBi ties the logits to
#: positions (permuting tokens is not permuting rows), soft-capping is not shift-invariant
#: in the scores (c·tanh((s + a)/c) ≠ c·tanh(s/c) + a); the softmax of the logits still is
PLAIN_LOGITS = {"alibi": frozenset(("permutation-equivariance",)),
                "softcap": frozenset(("shift-invariance",))}


def _general_only(name: str, claims: Claims | None, why_text: str | None = None) -> Proof:
    """A plain-softmax fact on a problem with a sink: its general proof, and why the
    problem's own data are not checked against it (they obey the sink's forms instead)."""
    proof = FACTS[name](None, None)
    why = Line(f"not checked on this problem{' or the claims' if claims is not None else ''}: "
               + (why_text or "it has a sink logit, so its weights sum to less than 1 and this "
                  "fact about the plain softmax does not apply (see sink-forms-agree)"))
    return dataclasses.replace(proof, checks=proof.checks + (why,))


def _logit_variant(p: Problem) -> str | None:
    """ "ALiBi", "soft-capping" or both when the softmax takes other logits than scale·scores."""
    names = [n for n, on in (("ALiBi", p.alibi is not None), ("soft-capping", p.softcap is not None)) if on]
    return " and ".join(names) or None


def _trace(subject: Problem | Trace | None) -> Trace | None:
    if subject is None or isinstance(subject, Trace):
        return subject
    if isinstance(subject, Problem):
        return Trace(subject)
    raise SymattnError(f"facts are checked on a Problem or a Trace, not a {type(subject).__name__}")


Subject = Problem | Trace | MultiHeadProblem | None


def prove(name: str, subject: Subject = None, claims: Claims | None = None) -> Proof:
    """Prove one fact in general and, when given, check it exactly on a problem and/or claims.

    A :class:`~symattn.heads.heads.MultiHeadProblem` is checked head by head for
    gqa-equals-repeated-heads; the other facts are checked on its head 0."""
    if name not in FACTS:
        raise SymattnError(f"no fact named {name!r}; the facts are {', '.join(FACTS)}")
    if isinstance(subject, MultiHeadProblem):
        if name == "gqa-equals-repeated-heads":
            return gqa_equals_repeated_heads(subject)
        subject = subject.head_problems[0]
    trace = _trace(subject)
    if claims is not None and trace is not None:
        claims.check_shapes(trace.problem.n, trace.problem.m, trace.problem.d_v)
    if trace is not None and trace.problem.sink is not None and name in PLAIN_SOFTMAX:
        return _general_only(name, claims)
    variant = None if trace is None else _logit_variant(trace.problem)
    if trace is not None and variant is not None and any(getattr(trace.problem, key) is not None and name in facts
                                   for key, facts in PLAIN_LOGITS.items()):
        return _general_only(name, claims, f"it has {variant}, so the softmax takes the "
                             f"{trace.logit_step} logits, not scale·scores of unordered tokens, and "
                             "this fact's instance check (on the scores) does not apply")
    return FACTS[name](trace, claims)


def check_facts(subject: Subject = None, claims: Claims | None = None,
                names: list[str] | None = None) -> list[Proof]:
    """Every fact (or the named ones), in the order of :data:`FACTS`."""
    if not isinstance(subject, MultiHeadProblem):
        subject = _trace(subject)  # one Trace shared by every fact
    wanted = list(FACTS) if names is None else names
    return [prove(name, subject, claims) for name in wanted]
