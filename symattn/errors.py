"""The one exception family of symattn.

Every error a user can cause is a :class:`SymattnError` whose message is one
line that names the input and says how to fix it.  The CLI prints that line
and exits with status 2; it never shows a traceback for these.
"""

from __future__ import annotations


class SymattnError(Exception):
    """Base class for every error symattn raises on purpose."""


class ParseError(SymattnError, ValueError):
    """A string could not be read as an exact number or expression."""


class ProblemError(SymattnError, ValueError):
    """The inputs of a problem are inconsistent (shapes, keys, mask, ...)."""


class CertificationError(SymattnError, ArithmeticError):
    """A rounding could not be proved within the precision budget."""


class WorksheetError(SymattnError):
    """A worksheet that cannot be made as asked."""


#: What computing one exact value can raise when the value cannot be had: a symattn refusal
#: (a cap, an uncertifiable rounding), and what SymPy, flint and Python's integers raise on
#: arithmetic they cannot do (ZeroDivisionError and OverflowError are ArithmeticErrors;
#: ValueError; NotImplementedError from SymPy; RecursionError on deep nesting).  The narrow
#: catch where such a value "explains nothing" (a mistake's variant, a hint): never
#: ``except Exception``, so a programming error (AttributeError, KeyError, TypeError,
#: NameError, ...) surfaces instead of passing as "could not certify".
VALUE_FAILURES: tuple[type[Exception], ...] = (
    SymattnError, ArithmeticError, ValueError, NotImplementedError, RecursionError)
