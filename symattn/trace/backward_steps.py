"""The step table of the backward pass: each step's formula (text and LaTeX), meaning and title.

Read by ``symattn.trace.steps.spec`` like the forward table; the problem fills in the loss,
the soft-cap's chain factor and where d_X's paths go."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from symattn.problem.problem import Problem

#: a step-table entry (symattn.trace.steps.StepSpec; not imported here, which would be a cycle)
StepSpec = Any


def backward_table(make: Callable[..., StepSpec]) -> dict[str, StepSpec]:
    S = make
    return {
        "lse": S("lse = max_j logit + log row_sum", r"\mathrm{lse}_i = \max_j z_{ij} + \log \sum_j e^{z_{ij} - \max_k z_{ik}}",
                 "the log-sum-exp of each row's logits, as FlashAttention saves it for the backward pass",
                 "Log-sum-exp"),
        "loss": S("loss = L", "L", "the loss the gradient is taken of", "Loss"),
        "d_output": S("d_output = dL/dO", r"dO = \frac{\partial L}{\partial O}",
                      "how the loss changes with each output entry: where the backward pass starts",
                      "Output gradient"),
        "d_V": S("d_V = weightsᵀ·d_output", r"dV = A^\top dO",
                 "each value row collects the output gradient of every query, weighted by its attention",
                 "Value gradient"),
        "d_weights": S("d_weights = d_output·Vᵀ", r"dP = dO\, V^\top",
                       "how the loss changes with each attention weight", "Weight gradient"),
        "row_dot": S("row_dot = Σ_j weights·d_weights (= d_output·output, row by row)",
                     r"D_i = \sum_j A_{ij}\, dP_{ij} = dO_i \cdot O_i",
                     "the weighted mean of each row's weight gradient: the softmax subtracts it",
                     "Row dot products"),
        "d_logits": S("d_logits = weights ∘ (d_weights − row_dot)", r"dS = A \circ (dP - D)",
                      "the gradient through the softmax: diag(p) − p·pᵀ applied to each row of dP; "
                      "0 where the mask blocks", "Logit gradient"),
        "d_scores": S("d_scores = scale · d_logits", r"dS' = \text{scale} \cdot dS",
                      "the gradient of the scores QKᵀ: back through the scaling", "Score gradient"),
        "d_Q_rot": S("d_Q_rot = d_scores·K_rot", r"dQ_{\text{rot}} = dS' K_{\text{rot}}",
                     "the gradient of the rotated queries", "Rotated-query gradient"),
        "d_K_rot": S("d_K_rot = d_scoresᵀ·Q_rot", r"dK_{\text{rot}} = dS'^\top Q_{\text{rot}}",
                     "the gradient of the rotated keys", "Rotated-key gradient"),
        "d_Q": S("d_Q = d_scores·K", r"dQ = dS' K", "how the loss changes with each query entry",
                 "Query gradient"),
        "d_K": S("d_K = d_scoresᵀ·Q", r"dK = dS'^\top Q", "how the loss changes with each key entry",
                 "Key gradient"),
        "d_sink": S("d_sink = −Σ_i p_sink,i · row_dot_i", r"\frac{\partial L}{\partial s} = -\sum_i p_{i,s} D_i",
                    "the gradient of the sink logit: its column has no value row, so only −D pulls on it",
                    "Sink gradient"),
        "d_W_q": S("d_W_q = Xᵀ·d_Q", r"dW_q = X^\top dQ", "the gradient of the query projection",
                   "Query-projection gradient"),
        "d_W_k": S("d_W_k = {src}ᵀ·d_K", r"dW_k = {src_tex}^\top dK", "the gradient of the key projection",
                   "Key-projection gradient"),
        "d_W_v": S("d_W_v = {src}ᵀ·d_V", r"dW_v = {src_tex}^\top dV", "the gradient of the value projection",
                   "Value-projection gradient"),
        "d_X": S("d_X = d_Q·W_qᵀ + d_K·W_kᵀ + d_V·W_vᵀ", r"dX = dQ\, W_q^\top + dK\, W_k^\top + dV\, W_v^\top",
                 "the gradient of the embeddings: the three paths (query, key, value) added",
                 "Embedding gradient"),
        "d_X_kv": S("d_X_kv = d_K·W_kᵀ + d_V·W_vᵀ", r"dX_{kv} = dK\, W_k^\top + dV\, W_v^\top",
                    "the gradient of the key/value embeddings: the key and value paths",
                    "Key/value-embedding gradient"),
    }


def backward_on(entry: StepSpec, name: str, problem: "Problem", make: Callable[..., StepSpec]) -> StepSpec:
    """A backward step's entry on this problem: its loss, soft-cap and cross-attention."""
    from symattn.problem.keys.backward import Loss

    backward = problem.backward
    if name == "loss" and backward is not None:
        if backward.loss is Loss.SUM:
            return make("loss = Σ output", r"L = \sum_{i,c} O_{ic}", "the sum of every output entry",
                        entry.title)
        return make("loss = ½ Σ (output − target)²", r"L = \tfrac12 \lVert O - T \rVert^2",
                    "half the squared distance of the output from the target", entry.title)
    if name == "d_output" and backward is not None:
        if backward.loss is Loss.SUM:
            return make("d_output = 1 (L = Σ output)", r"dO = \mathbf{1}", entry.meaning, entry.title)
        if backward.loss is Loss.HALF_SQUARED_ERROR:
            return make("d_output = output − target", r"dO = O - T", entry.meaning, entry.title)
        return make("d_output = dL/dO (given)", entry.latex, entry.meaning, entry.title)
    if name == "d_scores" and problem.softcap is not None:
        logit = "biased" if problem.alibi is not None else "scaled"
        return make(f"d_scores = scale · (1 − tanh²({logit} / c)) ∘ d_logits",
                    r"dS' = \text{scale} \cdot \left(1 - \tanh^2\frac{b}{c}\right) \circ dS",
                    "the gradient of the scores QKᵀ: back through the soft-cap's tanh and the scaling",
                    entry.title)
    if name == "d_X" and "X_kv" in problem.inputs:
        return make("d_X = d_Q·W_qᵀ", r"dX = dQ\, W_q^\top",
                    "the gradient of the query embeddings (keys and values come from X_kv)", entry.title)
    if name in ("d_W_k", "d_W_v"):
        cross = "X_kv" in problem.inputs
        return make(entry.formula.format(src="X_kv" if cross else "X"),
                    entry.latex.format(src_tex=r"X_{kv}" if cross else "X"), entry.meaning, entry.title)
    return entry
