"""The builders: each result (a derivation, a check, facts, a float report, heads, a grade report) as a document of blocks."""
