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
