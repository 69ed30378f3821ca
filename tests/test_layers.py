"""The import rule: layers import one way, and no module imports itself back.

::

    views      cli/  ui/  pytest_plugin  testing/  bench/  tail  terminal  formats.html
               formats.facts
       │
    services   proxy  capture  spawn  shim  indexer  replay/  telemetry/  promexport/  usage
       │       formats/ (cassette and transcript import)  sanitize  transcript  recordmode  demo
       │
    store      store/ (SQLAlchemy models, engine, every query)
       │
    model      model/ (events, protocol, the session fold)  recording  cassette  redact
       │
    base       config  errors  progress  ids  interrupts  display  pricing  pattern  _version

A module may import its own layer and the layers below it, never one above
(imports inside functions count too: a lazy import is still a dependency).
The model layer is pure: besides the standard library it imports only msgspec.
All SQL is behind the store's API: only ``store/`` imports SQLAlchemy, and no
other module reaches into a store's engine (``store.engine``) to send its own.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import claudetrace

PACKAGE = Path(claudetrace.__file__).parent

#: Layers, lowest first; each entry names a module or a package (all its modules).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("config", "errors", "progress", "ids", "interrupts", "display", "pricing", "pauses",
              "pattern", "_version")),
    ("model", ("model", "recording", "cassette", "redact")),
    ("store", ("store",)),
    ("services", ("proxy", "capture", "spawn", "shim", "indexer", "replay", "telemetry",
                  "promexport", "formats", "sanitize", "transcript", "recordmode", "demo",
                  "usage")),
    ("views", ("cli", "ui", "pytest_plugin", "testing", "bench", "tail", "terminal",
               "formats.html", "formats.facts", "__main__", "")),
]
#: What the pure model layer may import from outside claudetrace.
MODEL_THIRD_PARTY = {"msgspec"}
#: Every query is the store's: only these modules speak SQLAlchemy (the capture
#: module names the folders of server databases as earlier builds did, by the URL
#: SQLAlchemy renders).
SQL_ALLOWED = ("store", "capture")


#: Attributes that reach past the store's API to its database.
SQL_ATTRIBUTES = {"engine", "exec_driver_sql", "raw_connection"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The layer of a module (``""`` is the package itself): the longest entry that names it."""
    best, depth = -1, -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            names_it = module == name or (name and module.startswith(name + "."))
            if names_it and len(name) > depth:
                best, depth = index, len(name)
    assert best >= 0, f"claudetrace.{module} is in no layer: add it to LAYERS"
    return best


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(claudetrace modules, other top-level packages) ``path`` imports, anywhere in it."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours: set[str] = set()
    others: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "claudetrace":
                target = node.module.partition(".")[2]
            else:
                others.add((node.module or "").split(".")[0])
                continue
            for alias in node.names:  # "from . import x" may name a submodule
                candidate = f"{target}.{alias.name}".strip(".")
                ours.add(candidate if _exists(candidate) else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "claudetrace":
                    ours.add(alias.name.partition(".")[2])
                else:
                    others.add(alias.name.split(".")[0])
    return ours, others


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that runs when the module is used: not the bodies of
    ``if TYPE_CHECKING:`` (annotations only) or ``if __name__ == "__main__":``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _static_only(child.test):
                todo.extend(child.orelse)
                continue
            todo.append(child)
    return out


def _static_only(test: ast.expr) -> bool:
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and (
        test.left.id == "__name__")


def _exists(module: str) -> bool:
    path = PACKAGE.joinpath(*module.split(".")) if module else PACKAGE
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_imports_run_one_way(path: Path) -> None:
    module = module_name(path)
    mine = layer_of(module)
    ours, others = imports(path)
    upward = sorted(t for t in ours if layer_of(t) > mine)
    assert not upward, (
        f"claudetrace.{module} ({LAYERS[mine][0]}) imports a higher layer: "
        + ", ".join(f"{t} ({LAYERS[layer_of(t)][0]})" for t in upward))
    if "sqlalchemy" in others:
        assert module.split(".")[0] in SQL_ALLOWED, (
            f"claudetrace.{module} speaks SQL: put the query behind the store's API")
    if LAYERS[mine][0] == "model":
        foreign = others - set(sys.stdlib_module_names) - MODEL_THIRD_PARTY - {"__future__"}
        assert not foreign, f"the model layer is pure, but claudetrace.{module} imports {foreign}"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_sql_goes_through_the_stores_api(path: Path) -> None:
    # ``store.engine.connect()`` needs no import of SQLAlchemy: the import rule
    # alone let a benchmark send its own statements (pg_locks, deletes by hand).
    module = module_name(path)
    if module.split(".")[0] in SQL_ALLOWED:
        return
    reached = sorted({f"line {node.lineno}: .{node.attr}"
                      for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Attribute) and node.attr in SQL_ATTRIBUTES})
    assert not reached, (f"claudetrace.{module} reaches into the store's database: "
                         + ", ".join(reached) + " (put the query behind the store's API)")


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_no_private_modules_of_the_standard_library(path: Path) -> None:
    # Public APIs only: ``_signal``, ``_thread``, ``_io``… are the C halves of
    # public modules and may change or vanish in any release.
    private = sorted(m for m in imports(path)[1] if m in sys.stdlib_module_names
                     and m.startswith("_") and m != "__future__")
    assert not private, f"claudetrace.{module_name(path)} imports private modules: {private}"


def unit(module: str) -> str:
    """The top-level module or package a module belongs to (``""``: the package itself)."""
    return module.split(".")[0]


def test_no_import_cycles() -> None:
    """No unit (top-level module or package) imports one that imports it back,
    however indirectly; inside one package its own modules may lean on each other."""
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        mine = unit(module_name(path))
        graph.setdefault(mine, set()).update(
            unit(t) for t in imports(path)[0] if unit(t) != mine and t)
    cycles = []
    for start in graph:
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    cycles.append(" → ".join([*trail, nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles))[:20])
