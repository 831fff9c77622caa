"""The one display hook: how a result reaches the printers without knowing them.

Results (the Trace and its steps, proofs, float reports, multi-head results) are data.  They
mix in :class:`Displayable`, whose methods look up the printing in ``symattn.document.display``
when they are called — SymPy's ``Printable`` pattern.  This module is the only one below
``document/`` allowed to import it (tests/test_layers.py), and only lazily, inside a method.
"""

from __future__ import annotations


class Displayable:
    """``_repr_latex_``/``_repr_html_`` (Jupyter) and ``str()`` through document/'s printers."""

    __slots__ = ()

    def _shown(self, fmt: str) -> str | None:
        """This result printed in ``fmt`` ("text", "latex" or "html"); None when document/
        prints no such view of it (Jupyter then tries the next format)."""
        from symattn.document.display import show   # the one upward import the layers allow

        return show(self, fmt)

    def _repr_latex_(self) -> str | None:
        return self._shown("latex")

    def _repr_html_(self) -> str | None:
        return self._shown("html")
