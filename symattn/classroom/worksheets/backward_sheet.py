"""What a worksheet of the backward pass asks and gives (the ``backward`` template; issue 20): its
questions in the order a person works them, each in words, what the sheet gives besides the
inputs (dO, or the loss's target), the one-sentence rule of the loss, and the mistakes a
version must tell apart.

Read by ``questions`` (order, words, default questions), ``wrong_answers`` (separation),
``document`` (the sheet's givens and instructions) and ``answers`` (the exports' givens and
intro), so a sheet and every export give a student the same things; the steps themselves are
``symattn.trace.backward``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

if TYPE_CHECKING:
    from symattn.trace.trace import Trace

__all__ = ["BACKWARD_QUESTIONS", "BACKWARD_ASKABLE", "FORWARD_KEPT", "BACKWARD_ORDER", "BACKWARD_ASK", "BACKWARD_MISTAKES",
           "BACKWARD_WORK_CM", "BACKWARD_SAYS", "backward_questions", "backward_givens", "loss_rule"]

#: the backward questions of a sheet, in the order of the computation (after the forward's)
BACKWARD_QUESTIONS = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")

#: the forward questions a backward sheet keeps (P and O are what the backward starts from)
FORWARD_KEPT = ("scores", "weights", "output")

#: with projections, the queries, keys and values are asked too, and the projections' gradients
PROJECTED_KEPT = ("Q", "K", "V")
PROJECTION_GRADIENTS = ("d_W_q", "d_W_k", "d_W_v")

#: the backward steps ``symattn export --questions`` takes (those of plain attention's backward)
BACKWARD_ASKABLE = ("d_output", *BACKWARD_QUESTIONS, *PROJECTION_GRADIENTS)

#: every backward step a sheet may ask, in order (after ``output``)
BACKWARD_ORDER = ("lse", "loss", "d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores",
                  "d_Q_rot", "d_K_rot", "d_Q", "d_K", "d_sink", "d_W_q", "d_W_k", "d_W_v", "d_X", "d_X_kv")

#: what a question on each backward step asks for, in words (a key writes it capitalised)
BACKWARD_ASK: dict[str, str] = {
    "lse": "the log-sum-exp of each row", "loss": "the loss L",
    "d_output": "the output gradient dO = ∂L/∂O",
    "d_V": "the value gradient", "d_weights": "the gradient of the attention weights",
    "row_dot": "the row dot products D (each row's weights times its dP, summed)",
    "d_logits": "the gradient of the logits, through the softmax",
    "d_scores": "the gradient of the scores, back through the scaling",
    "d_Q_rot": "the gradient of the rotated queries", "d_K_rot": "the gradient of the rotated keys",
    "d_Q": "the query gradient", "d_K": "the key gradient", "d_sink": "the gradient of the sink logit",
    "d_W_q": "the gradient of the query projection", "d_W_k": "the gradient of the key projection",
    "d_W_v": "the gradient of the value projection", "d_X": "the gradient of the embeddings",
    "d_X_kv": "the gradient of the key/value embeddings"}

#: working space (cm) of each backward question on a sheet
BACKWARD_WORK_CM: dict[str, float] = {
    "loss": 2.0, "d_output": 2.0, "d_V": 3.0, "d_weights": 3.0, "row_dot": 3.0, "d_logits": 3.5,
    "d_scores": 2.0, "d_Q": 3.5, "d_K": 3.5, "d_W_q": 3.5, "d_W_k": 3.5, "d_W_v": 3.5}

#: the mistakes a version of a backward sheet must tell apart (besides the forward's)
BACKWARD_MISTAKES = frozenset(("forgot-row-dot", "row-dot-as-row-sum", "dp-not-transposed",
                               "dv-not-transposed", "dk-not-transposed", "backward-unscaled",
                               "backward-scaled-twice", "unscaled-forward", "gradient-ascent"))

#: what a student did, for each backward mistake (the feedback the exports show; no value)
BACKWARD_SAYS: dict[str, str] = {
    "forgot-row-dot": "you forgot the −D term: dS = P ∘ (dP − D), not P ∘ dP",
    "row-dot-as-row-sum": "you took D as the row sum of dP instead of Σ_j P_ij·dP_ij",
    "dp-not-transposed": "you computed dP = dO·V instead of dO·Vᵀ",
    "dv-not-transposed": "you computed dV = P·dO instead of Pᵀ·dO",
    "dk-not-transposed": "you computed dK = dS'·Q instead of dS'ᵀ·Q",
    "backward-unscaled": "you left the scale out of the backward (dS' = dS)",
    "backward-scaled-twice": "you applied the scale twice in the backward",
    "unscaled-forward": "you took the gradient of the forward without the √d_k",
    "gradient-ascent": "your gradient has the wrong sign (−∇L)",
}


def backward_questions(trace: "Trace") -> tuple[str, ...]:
    """A backward sheet's questions when none are chosen: the forward's P and O (with Q, K, V
    when they are projected), dO when it comes from a loss, the gradients down to dQ and dK,
    and the projections' gradients where there are projections."""
    p = trace.problem
    assert p.backward is not None, "only a backward problem has backward questions"
    asked = [*(PROJECTED_KEPT if p.projected else ()), *FORWARD_KEPT,
             *(("d_output",) if p.backward.has_loss else ()), *BACKWARD_QUESTIONS,
             *(PROJECTION_GRADIENTS if p.projected else ())]
    names = set(trace.step_names)
    return tuple(n for n in asked if n in names)


def backward_givens(trace: "Trace") -> list[tuple[str, str, sympy.Matrix, tuple[str, ...]]]:
    """What a backward sheet gives besides the inputs, as (name, symbol, exact matrix, row
    labels): dO when it is given, the target T of a squared-error loss; nothing for L = Σ O
    (the rule says dO is all ones)."""
    p = trace.problem
    if p.backward is None:
        return []
    rows = tuple(trace.step("output").row_labels)
    if p.backward.grad_output is not None:
        return [("d_output", "dO", trace.step("d_output").matrix, rows)]
    if p.backward.target is not None:
        return [("target", "T", p.backward.target.to_sympy(), rows)]
    return []


def loss_rule(trace: "Trace") -> str:
    """The loss in one sentence: where dO comes from, and what the backward pass then does."""
    p = trace.problem
    assert p.backward is not None, "only a backward problem has a loss rule"
    if p.backward.grad_output is not None:
        start = "dO = ∂L/∂O, the gradient of the loss with respect to the output, is given"
    elif p.backward.target is not None:
        start = "the loss is L = ½‖O − T‖² with the target T given, so dO = O − T"
    else:
        start = "the loss is L = Σ O (every output entry added), so dO = 1 in every entry"
    return (f"{start}. Work backward from it: dV and dP from dO, then D and dS through the softmax, "
            "dS' back through the scaling, then dQ and dK"
            + (", then the projections' gradients" if p.projected else "") + ".")
