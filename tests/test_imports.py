"""The packages' layering, checked by parsing the source (like test_layout.py): the import graph of the project's
modules has no cycle, and each package imports only the packages below it:

    ledger  <-  scheduler  <-  backfill  <-  cli  ->  migrations  ->  ledger

(`ledger db` runs and guards the migrations.)

`ledger/` (the models, the store, the pure rules, the web view) imports none of the others.

Every import counts, wherever it is: at the top of a module, inside a function (a "lazy" import), or under
`if TYPE_CHECKING:`. A lazy import runs as surely as a top-level one, only later, and moving an import into a
function is the usual way a cycle gets hidden rather than broken; a type-only import is still a dependency of
the code that reads it. `from pkg import name` is an edge to the module `pkg.name` when there is one, otherwise
to `pkg`; a package's `__init__` that runs first is not an edge of its own.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import graphlib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ledger", "scheduler", "backfill", "cli", "migrations")  # the repository's top-level folders
# imported as `ledger.<folder>` (ledger/<folder> links to it), so that no name of a DAGs folder's is taken
LINKED = PACKAGES[1:]

# package -> the project packages its modules may import (besides its own)
MAY_IMPORT: dict[str, frozenset[str]] = {
    "ledger": frozenset(),
    "scheduler": frozenset({"ledger"}),
    "backfill": frozenset({"ledger", "scheduler"}),
    "cli": frozenset({"ledger", "scheduler", "backfill", "migrations"}),
    "migrations": frozenset({"ledger"}),
}

# pytest's default `python_files`: a product module named so is collected as tests by `pytest <package>`
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the name imported (`ledger.scheduler.loop.job.log_path`)
    line: int


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in LINKED:
        parts.insert(0, "ledger")
    return ".".join(parts)


def package_of(name: str) -> str | None:
    """The top-level folder a dotted name of the project belongs to (`ledger.scheduler.loop.job` -> scheduler,
    `ledger.store` -> ledger), or None for any other name."""
    parts = name.split(".")
    if parts[0] != "ledger":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LINKED else "ledger"


@functools.cache  # the checks here and in test_folders.py read the same modules several times: each parsed once
def imports_in(source: str, module: str, *, is_package: bool = False) -> tuple[Import, ...]:
    """Every import in `source` (top-level, in functions, under TYPE_CHECKING), as absolute dotted names:
    `import a.b` gives a.b; `from a import b, c` gives a.b and a.c; relative imports are resolved."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(Import(module, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            found.extend(Import(module, f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return tuple(sorted(found, key=lambda imp: imp.line))


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(path, root): path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))}


def resolve(name: str, modules: dict[str, Path] | set[str]) -> str | None:
    """The project module an imported name belongs to (`ledger.infra.logs.log_path` -> `ledger.infra.logs`), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> tuple[dict[str, set[str]], list[Import]]:
    """module -> the project modules it imports, and every import of a project package (resolved or not)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    found: list[Import] = []
    for name, path in modules.items():
        for imp in imports_in(path.read_text(), name, is_package=path.name == "__init__.py"):
            if package_of(imp.target) is None:
                continue
            found.append(imp)
            target = resolve(imp.target, modules)
            if target is not None and target != name:
                graph[name].add(target)
    return graph, found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_project_modules_import_each_other_without_a_cycle() -> None:
    modules = project_modules()
    graph, found = import_graph(modules)
    cycle = find_cycle(graph)
    if cycle is not None:
        chain = cycle[::-1]  # graphlib lists each module before the ones importing it: reversed, "imports"
        where = dict.fromkeys(f"  {a} imports {b} ({modules[a].relative_to(ROOT)}:{imp.line})"
                              for a, b in zip(chain, chain[1:], strict=False) for imp in found
                              if imp.module == a and resolve(imp.target, modules) == b)
        pytest.fail("import cycle " + " -> ".join(chain) + " (move what they share into a module below "
                    "them):\n" + "\n".join(where))


def test_each_package_imports_only_the_packages_below_it() -> None:
    modules = project_modules()
    _, found = import_graph(modules)
    offences = [f"{modules[imp.module].relative_to(ROOT)}:{imp.line}: {imp.module} imports {imp.target}"
                for imp in found
                if (top := package_of(imp.target)) != (own := package_of(imp.module))
                and top not in MAY_IMPORT[own]]
    assert not offences, "imports against the layering (move what is shared down, e.g. into ledger/):\n" \
        + "\n".join(offences)


def test_the_check_sees_every_package_and_the_known_edges() -> None:
    modules = project_modules()
    graph, _ = import_graph(modules)
    assert {package_of(name) for name in modules} == set(PACKAGES)
    # imported in functions
    assert {"ledger.scheduler.runtime.local_testing",
            "ledger.scheduler.loop.dag_test_job"} <= graph["ledger.cli.testing"]
    assert {"ledger.store.events", "ledger.store.backfills"} <= graph["ledger.store.jobs"]  # from a package


def test_no_module_imports_a_folder_by_its_top_level_name() -> None:
    """`scheduler`, `backfill`, `cli` and `migrations` are the user's names (a DAGs folder's helper modules may be
    called so): the project imports its folders as `ledger.scheduler` and so on, never by the bare name."""
    modules = project_modules()
    bare = [f"{modules[imp.module].relative_to(ROOT)}:{imp.line}: {imp.target}"
            for name, path in modules.items()
            for imp in imports_in(path.read_text(), name, is_package=path.name == "__init__.py")
            if imp.target.split(".")[0] in LINKED]
    assert not bare, "import these as ledger.<folder>:\n" + "\n".join(bare)


def test_no_product_module_is_named_like_a_test_module() -> None:
    named_like_tests = [path.relative_to(ROOT).as_posix() for path in project_modules().values()
                        if any(fnmatch.fnmatch(path.name, pattern) for pattern in TEST_FILE_PATTERNS)]
    assert not named_like_tests, f"pytest would collect these as tests; rename them: {named_like_tests}"


LAZY = """
from __future__ import annotations
from typing import TYPE_CHECKING
import ledger.core.states
from ledger.store import events, jobs as job_store
from . import sibling
from ..web import app
if TYPE_CHECKING:
    from ledger.scheduler.loop.job import DagRunJob

def f():
    from ledger.migrations.head import HEAD
    return HEAD
"""


def test_the_check_finds_imports_wherever_they_are() -> None:
    found = [(imp.target, imp.line) for imp in imports_in(LAZY, "ledger.store.tasks")
             if package_of(imp.target) is not None]
    assert found == [("ledger.core.states", 4), ("ledger.store.events", 5), ("ledger.store.jobs", 5),
                     ("ledger.store.sibling", 6), ("ledger.web.app", 7), ("ledger.scheduler.loop.job.DagRunJob", 9),
                     ("ledger.migrations.head.HEAD", 12)]
    assert [imp.target for imp in imports_in("from . import x\n", "ledger.web", is_package=True)] == ["ledger.web.x"]


def test_the_check_finds_a_cycle_and_resolves_names_to_modules() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert resolve("ledger.infra.logs.log_path", {"ledger", "ledger.infra.logs"}) == "ledger.infra.logs"
    assert resolve("ledger.DAG", {"ledger", "ledger.infra.logs"}) == "ledger"
    assert resolve("sqlalchemy.orm", {"ledger"}) is None
