"""The classroom: answer tables shared by the learning-platform exports and the self-check page.

Every number here comes from the one engine: right values are certified
roundings of the Trace's cells, and a mistake's value is the same engine on a
changed problem (:mod:`symattn.check.mistakes.catalog`).
"""
