"""The one table of problem keys: what every site that lists keys iterates.

Each row says, for one key of a problem file (and keyword of ``Problem``): its reader in
``problem/keys/`` (plain value and a :class:`KeyContext` in, the Problem attributes it sets
out), when ``Problem.__init__`` reads it, how ``Problem.subs`` and ``Problem.rebuilt`` pass it
back, whether a multi-head file may set it per ``[[head]]`` or shares it from the top, and
whether worksheet versions keep it.  ``Problem.__init__``, ``subs``, ``rebuilt``,
``variant_keys``, ``free_symbols``, the unknown-key error, ``symattn.heads`` and
``classroom.worksheets.versions`` read it; ``tests/test_key_table.py`` checks each row is
honoured where it must be.

The table's order is the order the unknown-key error lists the keys in; ``order`` is the order
they are read in (a reader may use the specs of the keys read before it: the mask reads the
decode key, decode reads RoPE); ``per_head`` is the order multi-head messages list the
per-head keys in; ``in_versions`` the order a worksheet version's file writes them in.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import sympy

from symattn.problem.keys.backward import Backward, backward_key
from symattn.problem.keys.decode import decode_key
from symattn.problem.keys.key import Key, free_symbols
from symattn.problem.keys.logits import LOGIT_KEYS, LogitKeys
from symattn.problem.keys.mask import mask_key
from symattn.problem.keys.rope import Rope, rope_key
from symattn.problem.keys.scale import scale_key
from symattn.problem.keys.tiles import tiles_key
from symattn.problem.keys.tokens import key_tokens_key, tokens_key

Matrix: TypeAlias = sympy.ImmutableMatrix
__all__ = ["Key", "KEYS", "KEY_NAMES", "PROJECTED_INPUTS", "DIRECT_INPUTS", "CAPS_ORDER", "ParsedKeys", "by_name", "read_order",
           "per_head_keys", "heads_shared_keys", "version_keys", "substitute", "symbols_in"]

#: The size caps (``Problem._check_size_caps``) run after the keys read before this order.
CAPS_ORDER = 10


def _input(name: str, doc: str, role: str) -> Key:
    return Key(name, doc, kind="input", value=lambda p: _matrix(p, name), substitute=True,
               shared=name == "X_kv", role=role)


def _matrix(p: Any, name: str) -> object:
    given = p.inputs.get(name)
    return None if given is None else given.to_sympy()


def _backward_written(p: Any) -> object:
    """The backward key as a file writes it (its matrices as lists of rows)."""
    if p.backward is None:
        return None
    return {k: v.tolist() if isinstance(v, sympy.MatrixBase) else v for k, v in p.backward.value.items()}


KEYS: tuple[Key, ...] = (
    Key("title", "the problem's title", kind="meta", value=lambda p: p.title, rebuilt=False),
    Key("about", "one line on the problem (files only; Problem does not take it)", kind="meta",
        keyword=False),
    _input("X", "the embeddings, n × d_model", "projected"),
    _input("W_q", "the query projection", "projected"),
    _input("W_k", "the key projection", "projected"),
    _input("W_v", "the value projection", "projected"),
    _input("X_kv", "the embeddings of the keys and values (cross-attention)", "projected"),
    _input("Q", "the queries, given directly", "direct"),
    _input("K", "the keys, given directly", "direct"),
    _input("V", "the values, given directly", "direct"),
    Key("tokens", "the queries' names", read=tokens_key, order=1, value=lambda p: list(p.tokens),
        shared=True),
    Key("key_tokens", "the keys' names", read=key_tokens_key, order=2,
        value=lambda p: list(p.key_tokens),
        as_given=lambda p: None if p.key_tokens == p.tokens else p.key_tokens, shared=True),
    Key("scale", "the scores' factor (1/√d_k unless given)", read=scale_key, order=3,
        value=lambda p: p.scale, as_given=lambda p: p.scale if p.scale_given else None,
        substitute=True, free=free_symbols, shared=True),
    Key("mask", "causal, a 0/1 matrix or a sliding window", read=mask_key, order=9,
        value=lambda p: p.mask_value, per_head=1),
    Key("rope", "rotary position embeddings", read=rope_key, order=7, value=lambda p: p.rope,
        per_head=2),
    *LOGIT_KEYS,
    Key("symbols", "the symbols strings may use", kind="meta", default=()),
    Key("tiles", "FlashAttention's key blocks (online softmax)", read=tiles_key, order=11,
        value=lambda p: p.tiles_value, rebuilt=False, per_head=6, in_versions=4),
    Key("decode", "KV-cache decoding after a prompt of P tokens", read=decode_key, order=8,
        value=lambda p: p.decode_value, rebuilt=False, per_head=7, in_versions=5),
    Key("backward", "what the gradient is taken of", read=backward_key, order=12,
        value=lambda p: p.backward,
        as_given=lambda p: None if p.backward is None else p.backward.value,
        substitute=True, shared=True, in_versions=6, written=_backward_written),
)

#: The keys a problem file or dict may hold, in the order the unknown-key error lists them.
KEY_NAMES: tuple[str, ...] = tuple(k.name for k in KEYS)
#: The inputs of a projected problem (X, W_q, W_k, W_v; X_kv optional) and of a direct one.
PROJECTED_INPUTS: tuple[str, ...] = tuple(k.name for k in KEYS if k.role == "projected")
DIRECT_INPUTS: tuple[str, ...] = tuple(k.name for k in KEYS if k.role == "direct")


class ParsedKeys(LogitKeys):
    """The Problem attributes the keys' readers set (typed here beside their rows; a key family
    whose rows live in its own module types its attributes there: ``LogitKeys``)."""

    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    scale: sympy.Expr
    #: whether the scale was given (else the standard 1/√d_k)
    scale_given: bool
    #: the 0/1 mask (1 = may attend), its kind (causal, matrix or window), or None
    mask: Matrix | None
    mask_kind: str | None
    #: (W, causal) of a sliding-window mask, else None
    window: tuple[int, bool] | None
    #: the validated RoPE key (symattn.problem.keys.rope.Rope), or None
    rope: Rope | None
    #: the key blocks [start, end) of online softmax, or None; and the key as given
    tiles: tuple[tuple[int, int], ...] | None
    tiles_value: object
    #: the prompt length P of decode = { prefill = P }, or None
    prefill: int | None
    #: what the gradient is taken of (symattn.problem.keys.backward.Backward), or None: forward only
    backward: Backward | None


def by_name(name: str) -> Key:
    """The row of a key."""
    return next(k for k in KEYS if k.name == name)


def read_order(after_caps: bool) -> list[Key]:
    """The keys Problem.__init__ reads (before or after the size caps), in their order."""
    rows = [k for k in KEYS if k.read is not None and (k.order > CAPS_ORDER) == after_caps]
    return sorted(rows, key=lambda k: k.order)


def per_head_keys() -> tuple[str, ...]:
    """The keys a [[head]] table of a multi-head file may set, in the order messages list them."""
    return tuple(k.name for k in sorted((k for k in KEYS if k.per_head), key=lambda k: k.per_head))


def heads_shared_keys() -> tuple[str, ...]:
    """The problem keys a multi-head file's top level gives to every head (besides the
    per-head ones and the inputs the heads split)."""
    return tuple(k.name for k in KEYS if k.shared)


def version_keys() -> list[Key]:
    """The keys worksheet versions keep as the problem has them, in a version file's order."""
    return sorted((k for k in KEYS if k.in_versions), key=lambda k: k.in_versions)


def substitute(value: object, mapping: dict) -> object:
    """``value`` with its SymPy parts' symbols replaced (tables and lists walked; specs kept)."""
    if isinstance(value, sympy.Basic):
        return value.subs(mapping)
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    return value


def symbols_in(key: Key, spec: object) -> frozenset[sympy.Symbol]:
    """The symbols a key's spec holds (empty for a key whose symbols are not counted)."""
    return frozenset() if key.free is None else key.free(spec)
