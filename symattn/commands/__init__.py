"""The subcommands of ``symattn``, one module each.

Every module here defines ``ORDER`` (its place in ``symattn --help``) and
``register(subparsers)``, which adds its parser and sets ``run``: a function
of the parsed arguments returning a :class:`Outcome`.  ``symattn.cli``
finds the modules itself, so a new command is a new file.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """What a command produced: text for stdout (or ``-o FILE``) and an exit status."""

    text: str = ""
    status: int = 0


MAX_DIGITS = 100_000


def digits_argument(text: str) -> int:
    """argparse type for ``--digits``: significant digits, 1 to MAX_DIGITS."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--digits must be a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_DIGITS:
        raise argparse.ArgumentTypeError(f"--digits must be between 1 and {MAX_DIGITS}, got {value}")
    return value
