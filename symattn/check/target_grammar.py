"""The grammar of a target: the safe parser plus ``step[row]`` and ``step[row, col]``.

``weights[I]``, ``sqrt(d_k)``, ``sum(exp(scaled[I]))``: parsed once into a :class:`TargetSpec`,
then resolved against any number of sources (``check.targets``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from symattn.errors import SymattnError
from symattn.exact.parser import Name, Node, Parser


class TargetError(SymattnError, ValueError):
    """A target names no step, a missing token, or has mismatched shapes."""


@dataclass(frozen=True)
class Index(Node):
    """``step[row]`` or ``step[row, col]``: keys are token names or 0-based ints."""

    name: str
    keys: tuple[str | int, ...]
    pos: int


class TargetParser(Parser):
    """The safe parser plus ``name[key]`` and ``name[key, key]``."""

    def postfix(self, node: Node) -> Node:
        if self.peek().value != "[":
            return node
        if not isinstance(node, Name):
            raise self.fail("only a step can be indexed", self.peek().pos,
                            "write step[row] or step[row, column]")
        self.advance()
        keys = [self.key()]
        while self.peek().value == ",":
            self.advance()
            keys.append(self.key())
        if self.peek().value != "]":
            raise self.fail("expected ']'", self.peek().pos, "close the index with ']'")
        self.advance()
        if len(keys) > 2:
            raise self.fail(f"{len(keys)} indices", node.pos, "give a row, or a row and a column")
        return Index(node.name, tuple(keys), node.pos)

    def key(self) -> str | int:
        token = self.advance()
        negative = token.value == "-"
        if negative:
            token = self.advance()
        if token.kind == "num" and token.text.isdigit():
            return -int(token.text) if negative else int(token.text)
        if token.kind == "name" and not negative:
            return token.text
        raise self.fail(f"unexpected {token.text!r} in an index", token.pos,
                        "index by token name or 0-based number, e.g. weights[love, cats]")


@dataclass(frozen=True)
class TargetSpec:
    """A parsed target (reused for every source: the base trace and each variant)."""

    text: str
    node: Node

    @property
    def step_ref(self) -> tuple[str, tuple[str | int, ...]] | None:
        """(step, keys) when the target is a plain (indexed) step, else None."""
        if isinstance(self.node, Name):
            return self.node.name, ()
        if isinstance(self.node, Index):
            return self.node.name, self.node.keys
        return None

    def steps(self) -> set[str]:
        """Every name the target mentions (steps among them)."""
        return {node.name for node in nodes(self.node) if isinstance(node, (Name, Index))}


def parse_target(text: str, where: str = "target") -> TargetSpec:
    """Parse a target once; resolve it against any number of sources."""
    if not isinstance(text, str) or not text.strip():
        raise TargetError(f"{where} is empty: name a step such as weights[I] or an expression "
                          "such as sqrt(d_k)")
    if len(text) > 1000:
        raise TargetError(f"{where} is {len(text):,} characters: a target is at most 1,000")
    return TargetSpec(text.strip(), TargetParser(text.strip(), where).parse())


def nodes(node: Node) -> Iterator[Node]:
    """Every node of a parsed target, the root first (children in tuples and (key, node) pairs too)."""
    stack = [node]
    while stack:
        item = stack.pop()
        yield item
        for value in vars(item).values():
            if isinstance(value, Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, Node))
                stack.extend(v[1] for v in value if isinstance(v, tuple) and len(v) == 2
                             and isinstance(v[1], Node))
