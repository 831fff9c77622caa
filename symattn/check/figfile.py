"""Figures files: a problem, its variants, and the figures written about them.

A figures file (TOML) names its problem with ``example = "i-love-cats"``,
``problem = "path.toml"`` (relative to the figures file) or an inline
``[problem]`` table of problem-file keys; may define variants
(``[variant.unscaled]`` with problem keys overridden, or with its own
``example``/``problem`` as a new base); and lists ``[[figure]]`` tables with
``target``, ``text`` and optionally ``variant`` and ``note``.

Why the split between file errors and figure errors: a broken problem or
variant makes every answer meaningless (exit 2), but one unreadable figure
must not hide the verdicts on all the others (it is reported as invalid).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.check.spreadsheet import figure_commas
from symattn.errors import ProblemError, SymattnError
from symattn.exact.coerce import DecimalText
from symattn.examples import example_names, example_text
from symattn.problem.keys.table import DIRECT_INPUTS, PROJECTED_INPUTS
from symattn.problem.problem import PROBLEM_KEYS, Problem
from symattn.problem.tomlfile import load_toml, parse_toml, read_text

__all__ = ["FigureSpec", "FiguresFile", "FiguresError", "example_figures", "figure_example_names",
           "load_figures", "read_figures"]

FILE_KEYS = ("title", "about", "example", "problem", "variant", "figure")
FIGURE_KEYS = ("target", "text", "variant", "note")
_PROJECTED, _DIRECT = PROJECTED_INPUTS, DIRECT_INPUTS   # the key table's roles of the inputs
_FIGURES_PACKAGE = "symattn.examples"


class FiguresError(SymattnError, ValueError):
    """A figures file that cannot be checked at all (exit status 2)."""


@dataclass(frozen=True)
class FigureSpec:
    """One figure as written in the file (validated later, one at a time)."""

    index: int
    target: object
    text: object
    variant: object = None
    note: str | None = None


@dataclass
class FiguresFile:
    """A parsed figures file: problems by variant name (None is the base) and figures."""

    source: str
    problems: dict[str | None, Problem]
    figures: list[FigureSpec]
    title: str | None = None
    _checkers: dict[str | None, Checker] = field(default_factory=dict)

    def checker(self, variant: str | None) -> Checker:
        if variant not in self._checkers:
            self._checkers[variant] = Checker(self.problems[variant])
        return self._checkers[variant]

    def check(self) -> list[FigureVerdict]:
        """Every figure's verdict, in file order; a bad figure is an ``invalid`` verdict."""
        return [self.check_one(f) for f in self.figures]

    def check_one(self, f: FigureSpec) -> FigureVerdict:
        where = f"{self.source}: figure {f.index + 1}"
        target = f.target if isinstance(f.target, str) else repr(f.target)
        text = _as_text(f.text)
        variant = f.variant
        if not isinstance(f.target, str) or not f.target.strip():
            return invalid(target, text or "", f"{where}: 'target' must be a string such as "
                           "\"weights[I]\"", _variant_name(variant))
        if text is None:
            return invalid(target, repr(f.text), f"{where}: 'text' must be the written figure "
                           "as a string, e.g. \"0.136\"", _variant_name(variant))
        if variant is not None and (not isinstance(variant, str) or variant not in self.problems):
            known = ", ".join(str(k) for k in self.problems if k is not None) or "none defined"
            return invalid(target, text, f"{where}: no variant named {variant!r} "
                           f"(variants: {known})", _variant_name(variant))
        try:
            checker = self.checker(variant)
        except SymattnError as exc:          # this variant cannot be worked: its figures only
            return invalid(target, text, f"{where}: {exc}", _variant_name(variant))
        try:
            text = _decimal_commas(checker, target, text)
        except SymattnError as exc:
            return invalid(target, text, f"{where}: {exc}", _variant_name(variant))
        verdict = checker.check(target, text, variant)
        if verdict.code == "invalid" and not verdict.message.startswith(self.source):
            verdict.message = f"{where}: {verdict.message}"
        return verdict


def _decimal_commas(checker: Checker, target: str, text: str) -> str:
    """Decimal commas read as ``grade`` reads them (``spreadsheet.figure_commas``); a target
    that does not resolve is left for ``check`` to explain."""
    try:
        rows, cols = checker.target(target).shape
    except SymattnError:
        return text
    return figure_commas(text, rows * cols, target)


def _variant_name(v: object) -> str | None:
    return v if isinstance(v, str) else (None if v is None else repr(v))


def _as_text(value: object) -> str | None:
    if isinstance(value, DecimalText):
        return str.__str__(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def _example_data(name: object, where: str) -> dict[str, Any]:
    if not isinstance(name, str) or name not in example_names():
        raise FiguresError(f"{where}: no example named {name!r}; the examples are "
                           f"{', '.join(example_names())}")
    return dict(tomllib.loads(example_text(name), parse_float=DecimalText))


def _problem_data(value: object, base_dir: Path | None, where: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str):
        raise FiguresError(f"{where}: 'problem' must be a path to a problem file or a table")
    if base_dir is None:
        raise FiguresError(f"{where}: a built-in figures file cannot name a problem file")
    path = base_dir / value
    if not path.exists():
        raise FiguresError(f"{where}: no problem file {path}; give a path relative to the "
                           "figures file")
    return load_toml(path, what="a problem TOML file", error=FiguresError)


def _base_data(table: Mapping[str, Any], base_dir: Path | None, where: str,
               required: bool) -> dict[str, Any] | None:
    has_example, has_problem = "example" in table, "problem" in table
    if has_example and has_problem:
        raise FiguresError(f"{where}: give either 'example' or 'problem', not both")
    if has_example:
        return _example_data(table["example"], where)
    if has_problem:
        return _problem_data(table["problem"], base_dir, where)
    if required:
        raise FiguresError(f"{where}: name the problem with example = \"i-love-cats\", "
                           "problem = \"path.toml\" or a [problem] table")
    return None


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Problem keys overridden; Q/K/V and X/W replace each other as a group."""
    data = dict(base)
    if any(k in overrides for k in _DIRECT):
        for k in _PROJECTED:
            data.pop(k, None)
    if any(k in overrides for k in _PROJECTED):
        for k in _DIRECT:
            data.pop(k, None)
    data.update(overrides)
    data.pop("about", None)
    return data


def read_figures(text: str, *, source: str = "figures", base_dir: Path | None = None) -> FiguresFile:
    """Parse a figures file's text; raises FiguresError when it cannot be checked at all."""
    data = parse_toml(text, source=source, error=FiguresError)
    unknown = [k for k in data if k not in FILE_KEYS]
    problem_keys = [k for k in unknown if k in PROBLEM_KEYS]
    if problem_keys and "figure" not in data:
        keys = ", ".join(f"'{k}'" for k in problem_keys[:4]) + (", ..." if len(problem_keys) > 4 else "")
        raise FiguresError(f"{source}: this looks like a problem file (it has {keys}), not a figures "
                           "file; give it as the problem argument (symattn explain, grade, facts), or "
                           f"check figures about it with a figures file that says problem = \"{source}\" "
                           "and has [[figure]] tables")
    if unknown:
        raise FiguresError(f"{source}: unknown key {unknown[0]!r}; the keys are {', '.join(FILE_KEYS)}")
    base = _base_data(data, base_dir, source, required=True)
    assert base is not None, "required=True raises instead of returning None"
    problems: dict[str | None, Problem] = {}
    try:
        problems[None] = Problem.from_dict(_merge(base, {}), source=f"{source}: the problem")
    except ProblemError as exc:
        raise FiguresError(str(exc)) from None
    variants = data.get("variant", {})
    if not isinstance(variants, Mapping):
        raise FiguresError(f"{source}: 'variant' must be tables such as [variant.unscaled]")
    for name, table in variants.items():
        where = f"{source}: variant {name!r}"
        if not isinstance(table, Mapping):
            raise FiguresError(f"{where} must be a table of problem keys")
        own = _base_data(table, base_dir, where, required=False)
        overrides = {k: v for k, v in table.items() if k not in ("example", "problem")}
        bad = [k for k in overrides if k not in PROBLEM_KEYS]
        if bad:
            raise FiguresError(f"{where}: unknown key {bad[0]!r}; a variant takes example, "
                               f"problem or problem keys ({', '.join(PROBLEM_KEYS)})")
        try:
            problems[name] = Problem.from_dict(_merge(own if own is not None else base, overrides),
                                               source=where)
        except ProblemError as exc:
            raise FiguresError(str(exc)) from None
    figures = data.get("figure")
    if not isinstance(figures, list) or not figures:
        raise FiguresError(f"{source}: no figures; list them as [[figure]] tables with "
                           "target and text")
    specs = []
    for k, f in enumerate(figures):
        if not isinstance(f, Mapping):
            specs.append(FigureSpec(k, None, None))
            continue
        extra = [key for key in f if key not in FIGURE_KEYS]
        if extra:
            raise FiguresError(f"{source}: figure {k + 1} has unknown key {extra[0]!r}; "
                               f"a figure takes {', '.join(FIGURE_KEYS)}")
        note = f.get("note")
        specs.append(FigureSpec(k, f.get("target"), f.get("text"), f.get("variant"),
                                note if isinstance(note, str) else None))
    title = data.get("title") if isinstance(data.get("title"), str) else None
    return FiguresFile(source, problems, specs, title)


def load_figures(path: str | Path) -> FiguresFile:
    """Read a figures file from disk."""
    path = Path(path)
    text = read_text(path, what="a figures TOML file", error=FiguresError)
    return read_figures(text, source=str(path), base_dir=path.parent)


def _figures_dir():
    return resources.files(_FIGURES_PACKAGE).joinpath("figures")


def figure_example_names() -> list[str]:
    """Built-in examples that ship the figures printed in the lesson."""
    return sorted(p.name[:-5] for p in _figures_dir().iterdir() if p.name.endswith(".toml"))


def example_figures(name: str) -> FiguresFile:
    """The shipped figures of a built-in example (every number the lesson prints)."""
    if name not in figure_example_names():
        raise FiguresError(f"no figures shipped for {name!r}; examples with figures: "
                           f"{', '.join(figure_example_names())}")
    text = _figures_dir().joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return read_figures(text, source=f"figures of example {name!r}")
