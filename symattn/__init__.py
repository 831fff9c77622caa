"""symattn: scaled dot-product attention in exact arithmetic, explained.

>>> import symattn as sa
>>> trace = sa.attend(sa.load_example("i-love-cats"))
>>> str(trace.weights.decimal("I", "love", 3))
'0.432'
"""

from symattn.numbers.masked import NEG_INF
from symattn.numbers.certify import CertifiedDecimal, Rounding, certified_mpf, certify
from symattn.errors import CertificationError, ParseError, ProblemError, SymattnError
from symattn.exact.coerce import parse_expression, to_exact
from symattn.examples import example_names, load_example
from symattn.problem.matrix import symbol_matrix
from symattn.problem.problem import Problem
from symattn.trace.trace import Step, Trace, attend

__version__ = "0.1.0"

__all__ = [
    "CertificationError", "CertifiedDecimal", "NEG_INF", "ParseError", "Problem", "ProblemError",
    "Rounding", "Step", "SymattnError", "Trace", "attend", "certified_mpf", "certify",
    "example_names", "load_example", "parse_expression", "symbol_matrix", "to_exact",
]

# issue 5: experiments (facts with proofs, multi-head, float reference)
from symattn import facts  # noqa: E402
from symattn.facts import Claims, Proof  # noqa: E402

__all__ += ["Claims", "Proof", "facts"]
from symattn.heads.heads import MultiHeadProblem, MultiHeadResult, attend_heads  # noqa: E402

__all__ += ["MultiHeadProblem", "MultiHeadResult", "attend_heads"]
from symattn import floatref  # noqa: E402  (numpy/torch imported lazily, only when used)

__all__ += ["floatref"]
