"""What a worksheet of the backward pass asks (the ``backward`` template; issue 20): its questions
in the order a person works them, each in words, and the mistakes a version must tell apart.

Data only, read by ``questions`` (order, words, default questions) and ``wrong_answers``
(separation); the steps themselves are ``symattn.trace.backward``.
"""

from __future__ import annotations

#: the backward questions of a sheet, in the order of the computation (after the forward's)
BACKWARD_QUESTIONS = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")

#: the forward questions a backward sheet keeps (P and O are what the backward starts from)
FORWARD_KEPT = ("scores", "weights", "output")

#: every backward step a sheet may ask, in order (after ``output``)
BACKWARD_ORDER = ("lse", "loss", "d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores",
                  "d_Q_rot", "d_K_rot", "d_Q", "d_K", "d_sink", "d_W_q", "d_W_k", "d_W_v", "d_X", "d_X_kv")

BACKWARD_ASK: dict[str, str] = {
    "lse": "the log-sum-exp of each row", "loss": "the loss L", "d_output": "dO = dL/dO",
    "d_V": "dV = Pᵀ·dO", "d_weights": "dP = dO·Vᵀ", "row_dot": "D, the row sums of P times dP entry by entry",
    "d_logits": "dS, P times (dP − D) entry by entry", "d_scores": "dS' = scale · dS (the gradient of the scores)",
    "d_Q_rot": "the gradient of the rotated queries", "d_K_rot": "the gradient of the rotated keys",
    "d_Q": "dQ = dS'·K", "d_K": "dK = dS'ᵀ·Q", "d_sink": "the gradient of the sink logit",
    "d_W_q": "dW_q = Xᵀ·dQ", "d_W_k": "dW_k", "d_W_v": "dW_v", "d_X": "dX", "d_X_kv": "dX_kv"}

#: the mistakes a version of a backward sheet must tell apart (besides the forward's)
BACKWARD_MISTAKES = frozenset(("forgot-row-dot", "row-dot-as-row-sum", "dp-not-transposed",
                               "dv-not-transposed", "dk-not-transposed", "backward-unscaled",
                               "backward-scaled-twice", "gradient-ascent"))
