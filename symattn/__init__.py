"""symattn: scaled dot-product attention in exact arithmetic, explained.

>>> import symattn as sa
>>> trace = sa.attend(sa.load_example("i-love-cats"))
>>> str(trace.weights.decimal("I", "love", 3))
'0.432'

The public names are loaded when first used (PEP 562), so ``symattn --version`` and
``--help`` start without importing SymPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    "CertifiedDecimal": "symattn.numbers.certify", "Rounding": "symattn.numbers.certify",
    "certified_mpf": "symattn.numbers.certify", "certify": "symattn.numbers.certify",
    "NEG_INF": "symattn.numbers.masked",
    "CertificationError": "symattn.errors", "ParseError": "symattn.errors",
    "ProblemError": "symattn.errors", "SymattnError": "symattn.errors",
    "parse_expression": "symattn.exact.coerce", "to_exact": "symattn.exact.coerce",
    "example_names": "symattn.examples", "load_example": "symattn.examples",
    "symbol_matrix": "symattn.problem.matrix", "Problem": "symattn.problem.problem",
    "Step": "symattn.trace.trace", "Trace": "symattn.trace.trace", "attend": "symattn.trace.trace",
    "Claims": "symattn.facts", "Proof": "symattn.facts",
    "MultiHeadProblem": "symattn.heads.heads", "MultiHeadResult": "symattn.heads.heads",
    "attend_heads": "symattn.heads.heads",
}
#: public subpackages (numpy and torch stay unimported until floatref is used; Dask until
#: floatrun runs on it).  floatrun.run is the library call of `floatref-run` (issue 22): it
#: lives in floatrun, above floatref in the layers, so floatref does not re-export it.
_SUBPACKAGES = ("facts", "floatref", "floatrun")

__all__ = sorted([*_PUBLIC, *_SUBPACKAGES])


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"symattn.{name}")
    else:
        raise AttributeError(f"module 'symattn' has no attribute {name!r}")
    globals()[name] = value           # loaded once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:   # for type checkers and editors: the names as they are
    from symattn import facts, floatref, floatrun  # noqa: F401
    from symattn.errors import CertificationError, ParseError, ProblemError, SymattnError  # noqa: F401
    from symattn.exact.coerce import parse_expression, to_exact  # noqa: F401
    from symattn.examples import example_names, load_example  # noqa: F401
    from symattn.facts import Claims, Proof  # noqa: F401
    from symattn.heads.heads import MultiHeadProblem, MultiHeadResult, attend_heads  # noqa: F401
    from symattn.numbers.certify import CertifiedDecimal, Rounding, certified_mpf, certify  # noqa: F401
    from symattn.numbers.masked import NEG_INF  # noqa: F401
    from symattn.problem.matrix import symbol_matrix  # noqa: F401
    from symattn.problem.problem import Problem  # noqa: F401
    from symattn.trace.trace import Step, Trace, attend  # noqa: F401
