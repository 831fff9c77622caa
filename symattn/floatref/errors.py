"""The one error of floatref (its own module so every part can raise it)."""

from symattn.errors import SymattnError


class FloatRefError(SymattnError, ValueError):
    """Float inputs that cannot be used (not finite, not a matrix, numpy missing, ...)."""
