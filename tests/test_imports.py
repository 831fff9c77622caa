"""No module-level import cycle in symattn: every module imports alone, in any order.

Two checks.  The graph of module-level imports (statements that run when a module
is imported: not inside functions, not under ``if TYPE_CHECKING``), read from the
source with ``ast``, has no cycle: every strongly connected component is one module.
And, because a static reading could miss what a module does, fresh interpreters
import modules alone, with every ``symattn`` module forgotten before each one
(third-party packages stay loaded), in a shuffled order: a cycle shows up there as
"partially initialised module".  Each import re-runs the package's ``__init__``
(about 0.4 s of CPU), so that check takes a fixed sample; the static one covers all.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import random
import subprocess
import sys
from pathlib import Path

import symattn

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "symattn" or m.startswith("symattn.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failed))
"""


def all_modules() -> list[str]:
    names = ["symattn"]
    for info in pkgutil.walk_packages(symattn.__path__, "symattn."):
        if not info.name.endswith(".__main__"):     # runs the command line when imported
            names.append(info.name)
    return names


def module_imports(name: str) -> set[str]:
    """The symattn modules ``name`` imports when it is imported (module level only)."""
    known = set(all_modules())
    spec = __import__("importlib.util").util.find_spec(name)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = name if spec.submodule_search_locations else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                # ``from pkg import submodule`` needs the submodule, not the package's other names
                subs = {f"{base}.{a.name}" for a in node.names} & known
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(base)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit([x for x in inner if isinstance(x, ast.stmt)] +
                          [y for h in inner if isinstance(h, ast.ExceptHandler) for y in h.body])

    visit(tree.body)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_tarjan_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_module_level_imports_have_no_cycle():
    graph = {name: module_imports(name) for name in all_modules()}
    assert graph["symattn"] == set()        # the package's names load on first use (PEP 562)
    assert "symattn.engine.engine" in graph["symattn.trace.trace"]
    assert "symattn.document.printers.html" not in graph["symattn.trace.trace"]     # a display hook imports it lazily
    assert cycles(graph) == []


def test_the_walk_finds_the_packages_and_their_modules():
    names = all_modules()
    assert len(names) > 80
    for name in ("symattn.engine.engine", "symattn.trace.trace", "symattn.document.printers.html", "symattn.check.grading.grade",
                 "symattn.floatref.ulp", "symattn.commands.grade", "symattn.document.build.floatref"):
        assert name in names


def test_a_cycle_would_be_caught(tmp_path):
    """The probe itself: two modules importing each other's names fail when started at one of them."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import B\nA = 1\n")
    (pkg / "b.py").write_text("from cyc.a import A\nB = 2\n")
    probe = PROBE.replace('"symattn"', '"cyc"').replace('"symattn."', '"cyc."')
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(["cyc.a", "cyc.b"])], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert set(json.loads(done.stdout)) == {"cyc.a", "cyc.b"}


SAMPLE = 16


def test_modules_import_alone_in_any_order():
    names = all_modules()
    random.Random(10).shuffle(names)
    names = names[:SAMPLE] + ["symattn.trace.trace", "symattn.document.build.trace", "symattn.commands.floatref"]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {}
