"""Checking written figures against exact values: verdicts, mistakes, grading.

>>> import symattn as sa
>>> from symattn.check import Checker
>>> checker = Checker(sa.load_example("i-love-cats"))
>>> checker.check("weights[I]", "0.136, 0.432, 0.432").code
'rounded'
"""

from symattn.check.checker import Checker, FigureVerdict
from symattn.check.figfile import FiguresError, FiguresFile, example_figures, load_figures, read_figures
from symattn.check.figures import Written, WrittenExact, WrittenInfinity, WrittenNumber, read_figure
from symattn.check.targets import TargetError, parse_target
from symattn.check.verdict import CODES, RIGHT, EntryVerdict

__all__ = ["CODES", "Checker", "EntryVerdict", "FigureVerdict", "FiguresError", "FiguresFile",
           "RIGHT", "TargetError", "Written", "WrittenExact", "WrittenInfinity", "WrittenNumber",
           "example_figures", "load_figures", "parse_target", "read_figure", "read_figures"]
