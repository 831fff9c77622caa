"""HTML output: MathML Core for the math, one self-contained page for the document."""
