"""The built-in example problems, shipped as TOML files beside this module.

Each file is an ordinary problem file (so ``symattn examples --show NAME``
is a starting point for your own); its ``about`` line says what it is for.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from symattn.errors import ProblemError
from symattn.exact.coerce import DecimalText
from symattn.problem.problem import Problem

#: The example ``symattn explain`` works when given nothing.
DEFAULT_EXAMPLE = "i-love-cats"


def example_names() -> list[str]:
    """Names of the built-in examples, the lesson's running example first."""
    names = sorted(p.name[:-5] for p in resources.files(__package__).iterdir()
                   if p.name.endswith(".toml"))
    names.remove(DEFAULT_EXAMPLE)
    return [DEFAULT_EXAMPLE, *names]


def example_text(name: str) -> str:
    """The TOML text of one example."""
    if name not in example_names():
        if name in heads_example_names():
            raise ProblemError(f"{name!r} is a multi-head example: run symattn heads --example {name}")
        raise ProblemError(
            f"no example named {name!r}; the examples are {', '.join(example_names())} "
            f"(multi-head: {', '.join(heads_example_names())})")
    return resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")


def example_about(name: str) -> str:
    """The one-line description of an example."""
    return about_of(example_text(name), name)


def about_of(text: str, name: str) -> str:
    """The ``about`` line of a problem file's text (its title, or the name, without one)."""
    data = tomllib.loads(text, parse_float=DecimalText)
    return str(data.get("about", data.get("title", name)))


def load_example(name: str) -> Problem:
    """The built-in example as a :class:`Problem`."""
    return Problem.from_toml_text(example_text(name), source=f"example {name!r}")


def heads_example_names() -> list[str]:
    """The built-in multi-head examples (``symattn heads --example NAME``)."""
    folder = resources.files(__package__).joinpath("heads")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def heads_example_text(name: str) -> str:
    """The TOML text of one built-in multi-head example."""
    if name not in heads_example_names():
        raise ProblemError(f"no multi-head example named {name!r}; they are {', '.join(heads_example_names())}")
    return resources.files(__package__).joinpath("heads", f"{name}.toml").read_text(encoding="utf-8")
