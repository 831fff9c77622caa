"""The folders are the layers: every import points down.

Every import of every module is read with ``ast`` — at module level, inside functions and
under ``TYPE_CHECKING`` alike — and each module is given its layer by its path.  A module may
import a lower layer, or a module of its own package; the one display hook
(``symattn/trace/display.py``, results opting in to ``_repr_latex_``/``_repr_html_``) is the
only module allowed to reach up, lazily, into ``document/``.  No private name (``_x``) is
imported across packages, and the module graph has no cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "symattn"

#: bottom to top; names in one tuple are siblings (neither imports the other)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("symattn.errors",),
    ("symattn.limits", "symattn.output"),   # output/: files written whole, text escaped per format
    ("symattn.vocab",),                 # the closed vocabularies as enums (step names); imports nothing
    ("symattn.exact",),
    ("symattn.numbers",),
    ("symattn.notation",),              # written math as data (hand-form nodes); printed by document/
    ("symattn.problem",),
    ("symattn.examples",),              # the built-in problems: data files and their loader
    ("symattn.engine",),
    ("symattn.trace",),
    ("symattn.check", "symattn.floatref"),
    # the kernel test gate (floatref's references as assertions); a whole dump run on Dask,
    # shard by shard, through floatref's public API (floatrun/: below document/, which prints
    # its report, and commands/; it needs nothing from heads/ or facts/)
    ("symattn.testing", "symattn.floatrun"),
    ("symattn.heads",),
    ("symattn.facts",),
    ("symattn.document",),
    ("symattn.classroom",),
    ("symattn.serve",),                 # the page of `symattn serve`: an ASGI app over document/
    ("symattn.commands",),
    ("symattn",),                       # the package's __init__: the public names
    ("symattn.cli",),
    ("symattn.__main__",),
)

#: the display hook: the one upward import the house allows
UPWARD_ALLOWED = {"symattn.trace.display": ("symattn.document.display",)}

#: (importer, imported) pairs that still point up; this list may only shrink (issue 19)
KNOWN_UPWARD: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(module imported, name imported or None, line) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("symattn")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "symattn" or module.startswith("symattn."):
                found += [(module, a.name, node.lineno) for a in node.names]
    return found


def resolve(module: str, name: str | None, known: dict[str, Path]) -> str:
    """The module an import really names: ``from pkg import sub`` names ``pkg.sub``."""
    if name is not None and f"{module}.{name}" in known:
        return f"{module}.{name}"
    return module


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for k, names in enumerate(LAYERS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), k
    if rank < 0:
        raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")
    return rank


def top_package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def edges() -> list[tuple[str, str, str | None, int]]:
    known = modules()
    out = []
    for name, path in known.items():
        for module, imported, line in imports_of(name, path):
            out.append((name, resolve(module, imported, known), imported, line))
    return out


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for importer, imported, _, _ in edges():
        if top_package(importer) == top_package(imported):
            continue
        if layer_of(imported) < layer_of(importer):
            continue
        if any(imported.startswith(p) for p in UPWARD_ALLOWED.get(importer, ())):
            continue
        found.add((importer, imported))
    return found


def test_every_module_has_a_layer():
    for name in modules():
        layer_of(name)


def test_every_import_points_down():
    upward = upward_imports()
    new = sorted(upward - KNOWN_UPWARD)
    assert new == [], "imports that point up a layer (or across siblings):\n" + "\n".join(
        f"  {a} -> {b}" for a, b in new)


def test_the_list_of_known_upward_imports_only_shrinks():
    gone = sorted(KNOWN_UPWARD - upward_imports())
    assert gone == [], f"remove these from KNOWN_UPWARD, they are fixed: {gone}"


#: (importer, name) private imports across packages still to mend; may only shrink (issue 19)
KNOWN_PRIVATE: set[tuple[str, str]] = set()


def test_no_private_name_is_imported_across_packages():
    crossing = {(a, name) for a, b, name, line in edges()
                if name and name.startswith("_") and not name.startswith("__")
                and top_package(a) != top_package(b)}
    assert sorted(crossing - KNOWN_PRIVATE) == []
    assert sorted(KNOWN_PRIVATE - crossing) == [], "fixed: remove from KNOWN_PRIVATE"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:          # Tarjan, iterative enough for a few hundred modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in edges():
        if a in UPWARD_ALLOWED and any(b.startswith(p) for p in UPWARD_ALLOWED[a]):
            continue                    # the display hook's lazy import is the one allowed loop
        if b.startswith(a + ".") or a == "symattn":
            continue                    # a package importing its own submodules
        graph.setdefault(a, set()).add(b)
    assert strongly_connected(graph) == KNOWN_CYCLES


#: import cycles still to break; may only shrink (issue 19)
KNOWN_CYCLES: list[list[str]] = []


@pytest.mark.parametrize("rule", ["modules in symattn/", "lines per module"])
def test_the_house_stays_small(rule):
    if rule == "modules in symattn/":
        flat = sorted(p.name for p in PACKAGE.glob("*.py"))
        assert len(flat) <= 6, flat
    else:
        long = {module_name(p): n for p in PACKAGE.rglob("*.py")
                if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES.get(module_name(p), 500)}
        assert long == {}


#: modules still over 500 lines, with their size today; the numbers may only go down (issue 19)
MAX_LINES: dict[str, int] = {}


#: functions still over 80 lines, with their length today; may only shrink (issue 19)
KNOWN_LONG: dict[str, int] = {}
MAX_FUNCTION_LINES = 80


def function_lengths() -> dict[str, int]:
    """Every function and method in symattn/ (nested ones too), by qualified name: its
    lines from ``def`` (decorators not counted) to its last line."""
    found: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}"
                found[name] = child.end_lineno - child.lineno + 1
                walk(child, name)
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}.{child.name}")
            else:
                walk(child, prefix)

    for name, path in modules().items():
        walk(ast.parse(path.read_text(encoding="utf-8")), name)
    return found


def test_no_function_is_over_80_lines():
    lengths = function_lengths()
    assert "symattn.trace.stepcert._by_balls" in lengths     # the walk sees module functions
    assert "symattn.problem.problem.Problem.__init__" in lengths    # ... and methods
    long = {name: n for name, n in lengths.items()
            if n > KNOWN_LONG.get(name, MAX_FUNCTION_LINES)}
    assert long == {}, "split these functions (at most 80 lines each):\n" + "\n".join(
        f"  {name}: {n} lines" for name, n in sorted(long.items()))


def test_the_list_of_long_functions_only_shrinks():
    lengths = function_lengths()
    shorter = {name: lengths.get(name) for name, n in KNOWN_LONG.items()
               if lengths.get(name, 0) < n}
    assert shorter == {}, f"lower or remove these in KNOWN_LONG (None: gone): {shorter}"


#: the last resorts that may catch every Exception: each puts the error's type and message in
#: the verdict or the row (see docs/architecture.md, errors.py); everything else catches
#: errors.VALUE_FAILURES or narrower, so a programming error surfaces (issue 19)
BROAD_EXCEPT_ALLOWED = {
    "symattn.check.checker.Checker._check",          # one figure never stops the rest
    "symattn.check.grading.grade.judge",              # one answer never stops a class
    "symattn.check.grading.grade._column_error",      # one column never stops a class
    "symattn.check.grading.folder.Versions.checker",  # one version never stops the others
    "symattn.floatrun.ship.result_of",                # a Dask worker's failure: that shard's "bad" row
    "symattn.serve.workers.work",                     # one request never stops the server: answered "bug"
}


def broad_excepts() -> list[str]:
    """Where ``except Exception`` (or a bare ``except:``) is, by enclosing function."""
    found: list[str] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, f"{prefix}.{child.name}")
                continue
            if isinstance(child, ast.ExceptHandler):
                kinds = child.type.elts if isinstance(child.type, ast.Tuple) else [child.type]
                if any(k is None or isinstance(k, ast.Name) and k.id == "Exception" for k in kinds):
                    found.append(prefix)
            walk(child, prefix)

    for name, path in modules().items():
        walk(ast.parse(path.read_text(encoding="utf-8")), name)
    return found


def test_only_the_last_resorts_catch_every_exception():
    found = broad_excepts()
    assert "symattn.check.checker.Checker._check" in found      # the walk sees them
    assert sorted(set(found) - BROAD_EXCEPT_ALLOWED) == [], \
        "catch errors.VALUE_FAILURES (or narrower) here, not Exception"
    assert len(found) == len(BROAD_EXCEPT_ALLOWED)


def test_tests_import_their_helpers_as_bare_pytest_finds_them():
    """``pytest`` as the README writes it puts tests/ on sys.path, not the repository: a test
    that imports ``tests.x`` runs only under ``python -m pytest`` (issue 25)."""
    offenders = [f"{p.name}:{k}" for p in sorted((ROOT / "tests").glob("*.py"))
                 for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if line.lstrip().startswith(("from tests.", "import tests."))]
    assert offenders == []
