"""Views of a Trace: terminal text, JSON (and LaTeX later).  Views never recompute."""
