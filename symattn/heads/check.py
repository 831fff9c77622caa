"""Figures about one head of a multi-head problem, and the mistake ``gqa-tiled``.

``symattn check`` judges figures against one :class:`~symattn.problem.problem.Problem`;
a head of a multi-head problem is one (its Q, K, V run through the one
engine), so a figure about head h is judged by the ordinary
:class:`~symattn.check.checker.Checker` of that head, with every single-head
mistake it names (unscaled, early rounding, …).

``gqa-tiled`` is a multi-head mistake: query head i reading key/value head
i mod h_kv (the key/value heads tiled, ``K.repeat``) instead of
i // (h / h_kv) (``repeat_interleave``, as PyTorch's ``enable_gqa`` maps
them).  It is found as every mistake is: the same engine on a changed
problem (:meth:`MultiHeadProblem.tiled`), whose head h is checked the same
way.  A figure that is wrong for head h but right (exact or correctly
rounded) for the tiled head h is the mistake ``gqa-tiled``.

Targets are ``head H: TARGET`` with H the 0-based query head and TARGET any
``check`` target of a single problem (``head 1: output[sat]``,
``head 2: weights``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.check.codes import MistakeCode, Verdict
from symattn.heads.heads import MultiHeadProblem, MultiHeadResult

__all__ = ["HeadsChecker", "GQA_TILED"]

GQA_TILED = MistakeCode.GQA_TILED
_TARGET = re.compile(r"^\s*head\s+(\d{1,4})\s*:\s*(\S.*)$", re.IGNORECASE)


class HeadsChecker:
    """Checks figures about the heads of one multi-head problem (each head's checker made once)."""

    def __init__(self, problem: MultiHeadProblem | MultiHeadResult) -> None:
        self.problem = problem.problem if isinstance(problem, MultiHeadResult) else problem
        self._tiled: MultiHeadProblem | None = None
        self._checkers: dict[tuple[bool, int], Checker] = {}

    @property
    def tiled(self) -> MultiHeadProblem:
        if self._tiled is None:
            self._tiled = self.problem.tiled()
        return self._tiled

    def _checker(self, tiled: bool, head: int) -> Checker:
        key = (tiled, head)
        if key not in self._checkers:
            source = self.tiled if tiled else self.problem
            self._checkers[key] = Checker(source.head_problems[head])
        return self._checkers[key]

    def check(self, target: str, text: str) -> FigureVerdict:
        """The verdict on ``text`` written as the value of ``target`` (``head H: TARGET``)."""
        match = _TARGET.match(target) if isinstance(target, str) else None
        if match is None:
            return invalid(str(target), str(text), f"target {target!r}: write 'head H: TARGET' with H a "
                           f"query head 0…{self.problem.heads - 1}, e.g. 'head 0: weights'")
        head, inner = int(match.group(1)), match.group(2).strip()
        if head >= self.problem.heads:
            return invalid(target, str(text), f"target {target!r}: there is no head {head}; the query heads "
                           f"are 0…{self.problem.heads - 1}")
        verdict = replace(self._checker(False, head).check(inner, text), target=target)
        if verdict.right or verdict.code == Verdict.INVALID:
            return verdict
        p = self.problem
        right_kv, tiled_kv = p.kv_of[head], head % p.kv_heads
        if right_kv == tiled_kv:
            return verdict       # this head reads the same key/value head either way
        tiled = self._checker(True, head).check(inner, text)
        if not tiled.right:
            return verdict
        return replace(verdict, code=Verdict.MISTAKE, mistake=GQA_TILED,
                       mistake_detail=f"head {head} read key/value head {tiled_kv} (i mod {p.kv_heads})",
                       message=(f"{GQA_TILED}: this is head {head} reading key/value head {tiled_kv} "
                                f"({head} mod {p.kv_heads}); with {p.heads} query heads over "
                                f"{p.kv_heads} key/value heads, query head i reads key/value head "
                                f"i // {p.group}, so head {head} reads key/value head {right_kv}"))

    def check_all(self, figures: list[tuple[str, str]]) -> list[FigureVerdict]:
        """Every (target, text) pair's verdict, in order."""
        return [self.check(target, text) for target, text in figures]
