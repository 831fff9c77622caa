"""The derivation as data (``blocks``), built from a Trace (``build``), printed per format (``printers``).

Nothing is imported here at package level: ``symattn.trace.trace`` imports the hand
forms from this package, and ``build`` imports the Trace.
"""
