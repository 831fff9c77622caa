"""The ``decode`` key: ``decode = { prefill = P }``, KV-cache decoding after a prompt of P tokens.

Plain values in, the prompt length out; the decode steps themselves are trace/decode.py."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from symattn.errors import ProblemError
from symattn.problem.keys.context import KeyContext
from symattn.problem.keys.mask import causal_window_width


def parse_decode(value: object, *, n: int, inputs: Collection[str], has_symbols: bool,
                 mask: object) -> int:
    """The prompt length P of ``decode = { prefill = P }``, checked against the token count
    ``n``, the inputs given, whether they hold symbols, and the mask."""
    if not isinstance(value, Mapping):
        raise ProblemError(f"decode is {value!r}: write decode = {{ prefill = P }} (the first P "
                           "tokens are the prompt)")
    unknown = [k for k in value if k != "prefill"]
    if unknown:
        raise ProblemError(f"decode has the unknown key {str(unknown[0])!r}: write "
                           "decode = { prefill = P }")
    P = value.get("prefill")
    if isinstance(P, bool) or not isinstance(P, int) or P < 1:
        raise ProblemError(f"decode prefill is {P!r}: give the prompt length as a whole number "
                           "P ≥ 1 (the first P tokens are prefilled)")
    if "X" not in inputs:
        raise ProblemError("decode needs self-attention from X (with W_q, W_k, W_v): the cache holds "
                           "the keys and values projected from the tokens decoded so far")
    if "X_kv" in inputs:
        raise ProblemError("decode works on self-attention: remove X_kv (a KV cache appends the "
                           "new token's own key and value)")
    if P >= n:
        raise ProblemError(f"decode prefill is {P} but there are {n} tokens: nothing is left "
                           f"to decode; use a prefill below {n}")
    if isinstance(mask, Mapping):
        if mask.get("causal", True) is False:
            raise ProblemError("decode with a sliding window needs the causal one (a new token sees "
                               "only the cache and itself): remove causal = false")
    elif not (mask is None or (isinstance(mask, str) and mask.strip().lower() == "causal")
              or causal_window_width(mask, n) is not None):
        raise ProblemError("decode is causal attention (each new token sees the cache and itself): "
                           "remove the mask, or write mask = \"causal\" or a sliding window "
                           "mask = { window = W }")
    if has_symbols:
        raise ProblemError("decode needs numbers: each step's maximum must be decided, and symbols "
                           "leave it open; substitute values first (problem.subs)")
    return P


def decode_key(value: object, ctx: KeyContext) -> dict[str, Any]:
    """The prompt length P (None: no decode steps); RoPE is read before it."""
    if value is None:
        return {"prefill": None}
    if ctx.parsed.get("rope") is not None:
        raise ProblemError("rope and decode together are not supported yet (the decode steps "
                           "would have to rotate each new query and cached key): drop one of them")
    return {"prefill": parse_decode(value, n=ctx.n, inputs=ctx.inputs, has_symbols=ctx.has_symbols,
                                    mask=ctx.given.get("mask"))}
