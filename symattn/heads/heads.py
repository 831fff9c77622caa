"""Multi-head, grouped-query and multi-query attention, exactly.

Every head is an ordinary :class:`~symattn.problem.problem.Problem` computed by the
one engine (:class:`~symattn.trace.trace.Trace`); this module only splits the
projections into heads, maps query heads to key/value heads, concatenates
the head outputs and multiplies by W_o — all exactly.  Decimals come from
the certified path (the heads' own steps, :func:`symattn.numbers.certify` for the
products).

Conventions (as PyTorch and the GQA paper): X·W (d_model × width) as in the
rest of symattn; query head i uses key/value head ``i // (heads // kv_heads)``;
each head is scaled by 1/√d_head unless ``scale`` is given; the averaged
weights are the mean over the query heads, as ``nn.MultiheadAttention``
reports with ``average_attn_weights=True``.  No biases (append a column of
ones to X and a bias row to the W's to get them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding, certify
from symattn.errors import ParseError, ProblemError
from symattn.limits import MAX_HEADS
from symattn.problem.matrix import exact_matrix
from symattn.heads.keys import VARIANT_KEYS, head_variants
from symattn.problem.keys.table import heads_shared_keys
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace
from symattn.problem.tomlfile import parse_toml, read_text
from symattn.trace.display import Displayable

if TYPE_CHECKING:
    from symattn.heads.backward import HeadGradients
from symattn.examples import heads_example_names, heads_example_text  # noqa: F401 (public here too)

Matrix: TypeAlias = sympy.ImmutableMatrix

#: The keys of a multi-head problem file (its own, the shared problem keys and the per-head
#: ones; tests/test_key_table.py checks it holds every shared and per-head key of the key table).
MULTIHEAD_KEYS = ("title", "about", "X", "X_kv", "tokens", "key_tokens", "scale",
                  "heads", "kv_heads", "W_q", "W_k", "W_v", "W_o", "head", "kv_head", "K", "V", "backward",
                  *VARIANT_KEYS)
#: the problem keys the top level gives to every head: X_kv, tokens, key_tokens, scale, backward
_SHARED = heads_shared_keys()


#: The problem ``symattn heads`` works when given none: the lesson's X with two
#: query heads sharing one key/value head (head 0 is the lesson's own head).
DEMO_TOML = """\
title = "I love cats, two heads"
about = "Multi-query attention: the lesson's head and a second query head share W_k, W_v."
tokens = ["I", "love", "cats"]
X = [[1, 0, 1, 0],
     [0, 2, 0, 2],
     [1, 1, 1, 1]]
heads = 2            # query heads: W_q is split by columns into 2 heads of d_k = 3
kv_heads = 1         # one key/value head shared by both (multi-query)
W_q = [[1, 0, 1,  0, 1, 0],
       [1, 0, 0,  0, 0, 1],
       [0, 0, 1,  1, 0, 0],
       [0, 1, 1,  0, 1, 1]]
W_k = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_v = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
W_o = [["1/2", 0, 0], [0, "1/2", 0], [0, 0, "1/2"],   # output = the mean of the two heads
       ["1/2", 0, 0], [0, "1/2", 0], [0, 0, "1/2"]]
"""


def load_heads_example(name: str) -> "MultiHeadProblem":
    """A built-in multi-head example (``gqa-exercise``) as a :class:`MultiHeadProblem`."""
    return MultiHeadProblem.from_toml_text(heads_example_text(name), source=f"example {name!r}")


def _matrix(name: str, value: object) -> Matrix:
    return exact_matrix(name, value).to_sympy()


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProblemError(f"{name} must be a whole number ≥ 1, got {value!r}")
    return value


def _split(name: str, W: Matrix, parts: int, what: str) -> list[Matrix]:
    if W.cols % parts:
        raise ProblemError(f"{name} has {W.cols} columns, not a multiple of {what} = {parts}: "
                           f"split projections need {what} × d_head columns")
    width = W.cols // parts
    return [W[:, k * width:(k + 1) * width] for k in range(parts)]


class MultiHeadProblem:
    """h query heads over h_kv key/value heads (h_kv = h: multi-head; 1: multi-query).

    ``q_weights[i]`` is query head i's W_q; ``kv_weights[g]`` is the (W_k, W_v)
    of key/value head g; query head i reads key/value head ``i // (h // h_kv)``.
    With ``direct`` (and no X) they are the heads' Q and (K, V) themselves, as
    exercises give them: two query heads q₁ = [1, 0], q₂ = [0, 1] sharing one K, V.

    Variant keys (the key table's per-head keys: ``mask``, ``rope``, ``alibi``, ``softcap``,
    ``sink``, ``tiles``, ``decode``) given as keywords apply to every query head; ``variants[i]`` holds query
    head i's own, which replace them (``False`` drops one).  ``alibi="default"`` gives
    head i the paper's slope (symattn.heads.keys).  Each head is one Problem.
    """

    def __init__(self, *, X: object = None, q_weights: Sequence[object],
                 kv_weights: Sequence[tuple[object, object]], W_o: object = None,
                 X_kv: object = None, tokens: Sequence[str] | None = None,
                 key_tokens: Sequence[str] | None = None, scale: object = None,
                 title: str | None = None, direct: bool = False,
                 variants: Sequence[Mapping[str, object]] | None = None, backward: object = None,
                 **top: object) -> None:
        strange = [k for k in top if k not in VARIANT_KEYS]
        if strange:
            raise TypeError(f"MultiHeadProblem.__init__() got an unexpected keyword argument {strange[0]!r}")
        self.title = title
        self.direct = direct
        if direct and (X is not None or X_kv is not None):
            raise ProblemError("give Q, K and V per head or X with W_q, W_k, W_v, not both")
        if not direct and X is None:
            raise ProblemError("X is missing: multi-head problems project X (n × d_model), "
                               "or give Q (and K, V) per head directly")
        #: the keywords as given (a changed problem passes them again, checked again)
        self._inputs: dict[str, Any] = dict(X=X, X_kv=X_kv, tokens=tokens, key_tokens=key_tokens,
                                            scale=scale, title=title, W_o=W_o, direct=direct,
                                            backward=backward)
        self._q, self._kv = list(q_weights), list(kv_weights)
        self.heads, self.kv_heads = len(q_weights), len(kv_weights)
        if self.heads == 0 or self.kv_heads == 0:
            raise ProblemError("a multi-head problem needs at least one head")
        if self.heads > MAX_HEADS:
            raise ProblemError(f"{self.heads:,} query heads is over the cap of {MAX_HEADS} "
                               "(MAX_HEADS): work fewer heads")
        #: each query head's variant keys, as its Problem takes them
        self.head_keys: list[dict] = head_variants({k: top[k] for k in VARIANT_KEYS if k in top},
                                                   variants, self.heads)
        if self.heads % self.kv_heads:
            raise ProblemError(
                f"heads = {self.heads} is not a multiple of kv_heads = {self.kv_heads}: "
                "each key/value head must serve the same number of query heads")
        self.group = self.heads // self.kv_heads
        self.kv_of = tuple(i // self.group for i in range(self.heads))
        self.head_problems: list[Problem] = []
        self._roles: list[dict[str, Any]] = []
        for i, W_q in enumerate(q_weights):
            W_k, W_v = kv_weights[self.kv_of[i]]
            roles: dict[str, Any] = (dict(Q=W_q, K=W_k, V=W_v) if direct else
                     dict(X=X, W_q=W_q, W_k=W_k, W_v=W_v, X_kv=X_kv))
            self._roles.append(dict(**roles, tokens=tokens, key_tokens=key_tokens, scale=scale,
                                    title=f"head {i}", **self.head_keys[i]))
            try:
                self.head_problems.append(Problem(**self._roles[i]))
            except (ParseError, ProblemError) as exc:
                raise ProblemError(f"head {i}: {exc}") from None
        first = self.head_problems[0]
        self.n, self.m, self.tokens, self.key_tokens = first.n, first.m, first.tokens, first.key_tokens
        self.d_v = [p.d_v for p in self.head_problems]
        self.width = sum(self.d_v)
        self.W_o = None if W_o is None else _matrix("W_o", W_o)
        if self.W_o is not None and self.W_o.rows != self.width:
            raise ProblemError(
                f"W_o has {self.W_o.rows} rows but the concatenated heads have {self.width} columns "
                f"({' + '.join(map(str, self.d_v))}): W_o must be {self.width}×d_out")
        #: dL/dY of the backward key (symattn.heads.backward), or None: forward only
        self.grad_output: Matrix | None = None
        if backward is not None:
            self._with_backward(backward)

    def _with_backward(self, backward: object) -> None:
        """Each head rebuilt with its own grad_output, dY·W_oᵀ split by its columns."""
        from symattn.heads.backward import head_grad_outputs, output_gradient

        d_out = self.width if self.W_o is None else self.W_o.cols
        self.grad_output = output_gradient(backward, n=self.n, d_out=d_out)
        for i, dO in enumerate(head_grad_outputs(self.grad_output, self.W_o, self.d_v)):
            try:
                self.head_problems[i] = Problem(**self._roles[i], backward={"grad_output": dO})
            except (ParseError, ProblemError) as exc:
                raise ProblemError(f"head {i}: {exc}") from None

    # -- construction ---------------------------------------------------------
    @classmethod
    def split(cls, *, X: object, W_q: object, W_k: object, W_v: object, heads: int,
              kv_heads: int | None = None, W_o: object = None, **shared: Any) -> "MultiHeadProblem":
        """One projection per role, split by columns into heads (PyTorch's packed in_proj)."""
        heads = _count("heads", heads)
        kv_heads = heads if kv_heads is None else _count("kv_heads", kv_heads)
        qs = _split("W_q", _matrix("W_q", W_q), heads, "heads")
        ks = _split("W_k", _matrix("W_k", W_k), kv_heads, "kv_heads")
        vs = _split("W_v", _matrix("W_v", W_v), kv_heads, "kv_heads")
        return cls(X=X, q_weights=qs, kv_weights=list(zip(ks, vs)), W_o=W_o, **shared)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "problem") -> "MultiHeadProblem":
        """A mapping with the keys of a multi-head problem file (see the README)."""
        if not isinstance(data, Mapping):
            raise ProblemError(f"{source} must be a table of problem keys")
        unknown = [k for k in data if k not in MULTIHEAD_KEYS]
        if unknown:
            raise ProblemError(f"{source}: unknown key {unknown[0]!r}; the multi-head keys are "
                               f"{', '.join(MULTIHEAD_KEYS)}")
        shared = {k: data[k] for k in (*_SHARED, *VARIANT_KEYS) if k in data}
        title = data.get("title")
        try:
            if "head" in data and "W_q" not in data:
                return cls._from_tables(data, shared, title)
            if "X" not in data:
                raise ProblemError("X is missing: multi-head problems project X (n × d_model), "
                                   "or give Q (and K, V) per head in [[head]] tables")
            if "heads" not in data:
                raise ProblemError("give heads = h with split W_q, W_k, W_v, or [[head]] tables")
            for key in ("W_q", "W_k", "W_v"):
                if key not in data:
                    raise ProblemError(f"{key} is missing: with heads = h give W_q, W_k and W_v")
            return cls.split(X=data["X"], W_q=data["W_q"], W_k=data["W_k"], W_v=data["W_v"],
                             heads=data["heads"], kv_heads=data.get("kv_heads"), W_o=data.get("W_o"),
                             title=title, variants=_variant_tables(data.get("head")), **shared)
        except (ParseError, ProblemError) as exc:
            raise ProblemError(f"{source}: {exc}") from None

    @classmethod
    def _from_tables(cls, data: Mapping[str, Any], shared: dict, title: str | None) -> "MultiHeadProblem":
        for key in ("heads", "W_q", "W_k", "W_v"):
            if key in data:
                raise ProblemError(f"{key} goes with split projections; with [[head]] tables put "
                                   "W_q (and W_k, W_v) inside each table")
        heads = data["head"]
        if not isinstance(heads, list) or not all(isinstance(h, Mapping) for h in heads):
            raise ProblemError("head must be a list of tables: write [[head]] before each head")
        if any("Q" in t for t in heads) or "K" in data or "V" in data:
            return cls._from_direct_tables(data, shared, title)
        if "X" not in data:
            raise ProblemError("X is missing: [[head]] tables with W_q project X (n × d_model); "
                               "or give Q per head")
        kv_tables = data.get("kv_head")
        if kv_tables is not None and (not isinstance(kv_tables, list)
                                      or not all(isinstance(h, Mapping) for h in kv_tables)):
            raise ProblemError("kv_head must be a list of tables: write [[kv_head]] before each one")
        expect = ("W_q",) if kv_tables is not None else ("W_q", "W_k", "W_v")
        for i, table in enumerate(heads):
            extra = [k for k in table if k not in expect and k not in VARIANT_KEYS]
            if extra:
                raise ProblemError(f"head {i}: unexpected key {extra[0]!r}; a [[head]] table holds "
                                   f"{', '.join(expect)} and the variant keys {', '.join(VARIANT_KEYS)}"
                                   + (" (W_k, W_v go in [[kv_head]])" if kv_tables else ""))
            for key in expect:
                if key not in table:
                    raise ProblemError(f"head {i}: {key} is missing")
        if kv_tables is None:
            if "kv_heads" in data:
                raise ProblemError("kv_heads goes with split projections; with tables use [[kv_head]]")
            kv = [(_matrix(f"head {i} W_k", t["W_k"]), _matrix(f"head {i} W_v", t["W_v"]))
                  for i, t in enumerate(heads)]
        else:
            for g, table in enumerate(kv_tables):
                if sorted(table) != ["W_k", "W_v"]:
                    raise ProblemError(f"kv_head {g}: a [[kv_head]] table holds exactly W_k and W_v")
            kv = [(_matrix(f"kv_head {g} W_k", t["W_k"]), _matrix(f"kv_head {g} W_v", t["W_v"]))
                  for g, t in enumerate(kv_tables)]
        qs = [_matrix(f"head {i} W_q", t["W_q"]) for i, t in enumerate(heads)]
        return cls(X=data["X"], q_weights=qs, kv_weights=kv, W_o=data.get("W_o"), title=title,
                   variants=[_own_variants(t) for t in heads], **shared)

    @classmethod
    def _from_direct_tables(cls, data: Mapping[str, Any], shared: dict,
                            title: str | None) -> "MultiHeadProblem":
        """[[head]] tables of Q; K and V in [[kv_head]] tables, at the top (one shared head), or in
        each [[head]] table (one per query head)."""
        heads, kv_tables = data["head"], data.get("kv_head")
        if "X" in data or "X_kv" in shared:
            raise ProblemError("X goes with projections: with Q (and K, V) given per head leave out X and X_kv")
        top = "K" in data or "V" in data
        if top and not ("K" in data and "V" in data):
            raise ProblemError("give both K and V at the top (one key/value head shared by every query head)")
        if top and kv_tables is not None:
            raise ProblemError("give the shared K, V at the top or [[kv_head]] tables, not both")
        if kv_tables is not None and (not isinstance(kv_tables, list)
                                      or not all(isinstance(h, Mapping) for h in kv_tables)):
            raise ProblemError("kv_head must be a list of tables: write [[kv_head]] before each one")
        own_kv = not top and kv_tables is None
        expect = ("Q", "K", "V") if own_kv else ("Q",)
        for i, table in enumerate(heads):
            extra = [k for k in table if k not in expect and k not in VARIANT_KEYS]
            if extra:
                where = "at the top" if top else "in [[kv_head]]" if kv_tables is not None else ""
                raise ProblemError(f"head {i}: unexpected key {extra[0]!r}; with Q given per head a "
                                   f"[[head]] table holds {', '.join(expect)} and the variant keys "
                                   f"{', '.join(VARIANT_KEYS)}" + (f" (K, V are {where})" if where else ""))
            for key in expect:
                if key not in table:
                    raise ProblemError(f"head {i}: {key} is missing")
        if "kv_heads" in data:
            raise ProblemError("kv_heads goes with split projections; give [[kv_head]] tables of K and V")
        if top:
            kv = [(_matrix("K", data["K"]), _matrix("V", data["V"]))]
        elif kv_tables is not None:
            for g, table in enumerate(kv_tables):
                if sorted(table) != ["K", "V"]:
                    raise ProblemError(f"kv_head {g}: with Q given per head a [[kv_head]] table holds "
                                       "exactly K and V")
            kv = [(_matrix(f"kv_head {g} K", t["K"]), _matrix(f"kv_head {g} V", t["V"]))
                  for g, t in enumerate(kv_tables)]
        else:
            kv = [(_matrix(f"head {i} K", t["K"]), _matrix(f"head {i} V", t["V"])) for i, t in enumerate(heads)]
        qs = [_matrix(f"head {i} Q", t["Q"]) for i, t in enumerate(heads)]
        return cls(q_weights=qs, kv_weights=kv, W_o=data.get("W_o"), title=title, direct=True,
                   variants=[_own_variants(t) for t in heads], **shared)

    @classmethod
    def from_toml_text(cls, text: str, *, source: str = "problem") -> "MultiHeadProblem":
        """Read a multi-head problem file's text; TOML floats by their decimal text."""
        return cls.from_dict(parse_toml(text, source=source), source=source)

    @classmethod
    def from_toml(cls, path: str | Path) -> "MultiHeadProblem":
        """Read a multi-head problem file."""
        text = read_text(path, what="a problem TOML file")
        return cls.from_toml_text(text, source=str(path))

    def repeated_kv(self) -> "MultiHeadProblem":
        """The same heads with each key/value head copied to every query head it serves."""
        return self.with_kv_heads([self.kv_of[i] for i in range(self.heads)], self.title)

    def tiled(self) -> "MultiHeadProblem":
        """The mistake ``gqa-tiled``: query head i reads key/value head i mod h_kv (the key/value
        heads tiled, as ``K.repeat(1, group, 1, 1)`` does) instead of i // (h / h_kv)
        (``repeat_interleave``, PyTorch's enable_gqa).  The same engine on a changed problem."""
        return self.with_kv_heads([i % self.kv_heads for i in range(self.heads)],
                                  f"{self.title or 'heads'} (gqa-tiled)")

    def with_kv_heads(self, kv_of: Sequence[int], title: str | None) -> "MultiHeadProblem":
        """Multi-head attention in which query head i reads key/value head ``kv_of[i]`` of this problem."""
        inputs = {**self._inputs, "title": title}
        return MultiHeadProblem(q_weights=self._q, kv_weights=[self._kv[g] for g in kv_of],
                                variants=self.head_keys, **inputs)

    def __repr__(self) -> str:
        kind = ("multi-head" if self.kv_heads == self.heads
                else "multi-query" if self.kv_heads == 1 else "grouped-query")
        plural = "s" * (self.kv_heads > 1)
        return (f"<MultiHeadProblem {kind}: {self.heads} heads over {self.kv_heads} key/value head{plural}, "
                f"{self.n} queries × {self.m} keys>")


def _own_variants(table: Mapping[str, Any]) -> dict:
    """The variant keys of one [[head]] table (its other keys are checked by the caller)."""
    return {k: table[k] for k in VARIANT_KEYS if k in table}


def _variant_tables(tables: object) -> list[dict] | None:
    """With split projections, [[head]] tables hold only variant keys, one table per query head."""
    if tables is None:
        return None
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise ProblemError("head must be a list of tables: write [[head]] before each head")
    for i, table in enumerate(tables):
        extra = [k for k in table if k not in VARIANT_KEYS]
        if extra:
            raise ProblemError(f"head {i}: unexpected key {extra[0]!r}; with split projections (W_q at "
                               f"the top) a [[head]] table holds only the variant keys {', '.join(VARIANT_KEYS)}")
    return [_own_variants(t) for t in tables]


class MultiHeadResult(Displayable):
    """The heads' Traces, their exact concatenation, the W_o product and the averaged weights."""

    def __init__(self, problem: MultiHeadProblem) -> None:
        self.problem = problem
        self.traces: list[Trace] = [Trace(p) for p in problem.head_problems]

    def head(self, i: int) -> Trace:
        """Query head i's Trace (every step of the one engine)."""
        return self.traces[i]

    def _head_output(self, h: int, i: int, c: int) -> sympy.Expr:
        """An exact head output entry, in its algebraic form when the engine knows one."""
        value = self.traces[h].algebraic_value("output", i, c)
        return value if value is not None else self.traces[h].output[i, c]

    @cached_property
    def concat(self) -> Matrix:
        """[O_0 | O_1 | ... ] (n × Σ d_v), exact."""
        cols = [(h, c) for h, d in enumerate(self.problem.d_v) for c in range(d)]
        return Matrix(self.problem.n, len(cols), lambda i, k: self._head_output(cols[int(k)][0], int(i), cols[int(k)][1]))

    @cached_property
    def output(self) -> Matrix:
        """concat · W_o (the concatenation itself when there is no W_o), exact."""
        if self.problem.W_o is None:
            return self.concat
        return Matrix(self.concat * self.problem.W_o)

    @cached_property
    def average_weights(self) -> Matrix:
        """The mean of the heads' weights (nn.MultiheadAttention, average_attn_weights=True)."""
        n, m, h = self.problem.n, self.problem.m, self.problem.heads
        return Matrix(n, m, lambda i, j: sympy.Add(*[t.weights[int(i), int(j)] for t in self.traces]) / h)

    # -- certified decimals ------------------------------------------------------
    def concat_decimals(self, rounding: Rounding | int) -> list[list[CertifiedDecimal]]:
        """The concatenation's decimals, from each head's own certified output step."""
        # the output step has no masked entries: every entry is a CertifiedDecimal
        per_head = [cast(list[list[CertifiedDecimal]], t.output.decimals(rounding)) for t in self.traces]
        return [[d for rows in per_head for d in rows[i]] for i in range(self.problem.n)]

    def output_decimals(self, rounding: Rounding | int) -> list[list[CertifiedDecimal]]:
        """concat · W_o, each entry certified."""
        if self.problem.W_o is None:
            return self.concat_decimals(rounding)
        return _certify_matrix(self.output, rounding)

    def average_weights_decimals(self, rounding: Rounding | int) -> list[list[CertifiedDecimal]]:
        """The averaged weights, each entry certified."""
        return _certify_matrix(self.average_weights, rounding)

    @cached_property
    def gradients(self) -> "HeadGradients":
        """d_W_o and the gradients summed over heads (the backward key; symattn.heads.backward)."""
        from symattn.heads.backward import HeadGradients

        if self.problem.grad_output is None:
            raise ProblemError("this multi-head problem has no backward key: add backward = "
                               "{ grad_output = [[...]] } (dL/dY) or backward = { loss = \"sum\" }")
        return HeadGradients(self, self.problem.grad_output)

    def __repr__(self) -> str:
        return f"<MultiHeadResult of {self.problem!r}>"



def _certify_matrix(M: Matrix, rounding: Rounding | int) -> list[list[CertifiedDecimal]]:
    return [[certify(M[i, j], rounding) for j in range(M.cols)] for i in range(M.rows)]


def attend_heads(problem: MultiHeadProblem | None = None, **inputs: Any) -> MultiHeadResult:
    """Multi-head attention: ``attend_heads(problem)`` or ``attend_heads(X=..., W_q=..., heads=2, ...)``."""
    if problem is None:
        problem = MultiHeadProblem.split(**inputs)
    return MultiHeadResult(problem)
