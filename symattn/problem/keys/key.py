"""A row of the key table (:mod:`symattn.problem.keys.table`): what one problem key is, read
and passed on as.

A key module defines its rows with this class beside its readers, so a new key of a family
(another logit variant beside ALiBi, the sink and the soft-cap) is one module's change; the
table splices each family's rows in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from symattn.problem.keys.context import KeyContext

__all__ = ["Key", "Getter", "Reader", "free_symbols"]

Getter = Callable[[Any], object]
Reader = Callable[[object, KeyContext], dict[str, Any]]


@dataclass(frozen=True)
class Key:
    """One problem key (:mod:`symattn.problem.keys.table`'s docstring says what reads each field)."""

    name: str
    doc: str
    #: "meta" (how the problem is named and read: title, about, symbols), "input" (a matrix,
    #: read by Problem itself) or "key"
    kind: str = "key"
    #: plain value and context in, the Problem attributes it sets out (None: Problem reads it)
    read: Reader | None = None
    #: when Problem.__init__ reads it (after the inputs; CAPS_ORDER splits before/after the caps)
    order: int = 0
    #: the key as Problem(...) takes it back, from a Problem (None: never passed back)
    value: Getter | None = None
    #: as Problem.subs passes it, when that differs from ``value`` (None when it was defaulted)
    as_given: Getter | None = None
    #: Problem.rebuilt (a mistake's or a fact's changed problem) keeps it
    rebuilt: bool = True
    #: Problem.subs replaces the symbols in its value
    substitute: bool = False
    #: the symbols its spec holds (counted by Problem.free_symbols), from the attribute ``name``
    free: Callable[[Any], frozenset[sympy.Symbol]] | None = None
    #: one of Problem.variant_keys: the softmax's variants a rebuild with other inputs keeps
    variant: bool = False
    #: a [[head]] table of a multi-head file may set it: its place in their list (0: may not)
    per_head: int = 0
    #: a multi-head file's top level gives it to every head's Problem
    shared: bool = False
    #: worksheet versions keep it as the problem has it (as a file writes it: ``written``): its
    #: place in a version's file (0: the versions draw it themselves or leave it out)
    in_versions: int = 0
    written: Getter | None = None
    #: an input's role: "projected" (X with the W's, X_kv optional) or "direct" (Q, K, V)
    role: str = ""
    #: Problem(...) takes it as a keyword (``about`` is read from files only)
    keyword: bool = True
    #: the keyword's default
    default: object = None



def free_symbols(spec: sympy.Expr | None) -> frozenset[sympy.Symbol]:
    """The symbols of a key whose spec is one SymPy expression (or None)."""
    return frozenset() if spec is None else frozenset(spec.free_symbols)
