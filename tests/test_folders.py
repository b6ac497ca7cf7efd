"""Folders carry rules (STYLE.md section 13): each folder of `ledger/` and `scheduler/` states its rule in its
`__init__.py`, and the part of the rule that an import graph can show is checked here, by parsing the source
(tests/test_imports.py finds the imports: top-level, in functions and under TYPE_CHECKING alike).

- which project folders a folder's modules may import (`MAY_IMPORT`);
- which outside libraries they may not (`NO_LIBRARIES`): the pure rules and the try side import no database
  layer, the pure rules no file, process or network I/O either;
- the pure rules read no clock (`datetime.now()`, `time.time()`, `pendulum.now()`...): `now` is passed in.

`KNOWN` lists the wrong-way edges the move of 2026-11-28 exposed, each with what fixes it; the list only
shrinks (a test fails when an entry no longer happens, so that it is removed with its fix).
"""

from __future__ import annotations

import ast

import pytest

from tests.test_imports import ROOT, import_graph, imports_in, project_modules, resolve

# every folder that holds modules, most specific first; a module belongs to the first that prefixes it
FOLDERS = (
    "ledger.core", "ledger.sdk", "ledger.infra", "ledger.models", "ledger.store", "ledger.services",
    "ledger.airflow_compat", "ledger.web",
    "ledger.scheduler.runtime", "ledger.scheduler.executors", "ledger.scheduler.parsing", "ledger.scheduler.callbacks",
    "ledger.scheduler.signals", "ledger.scheduler.loop", "ledger.scheduler",
    "ledger.backfill", "ledger.cli", "ledger.migrations", "ledger",
)

_LEDGER_BASE = {"ledger.core", "ledger.infra"}
_LEDGER_ALL = {"ledger.core", "ledger.sdk", "ledger.infra", "ledger.models", "ledger.store", "ledger.services",
               "ledger.airflow_compat", "ledger.web", "ledger"}
_SCHEDULER_ALL = {f for f in FOLDERS if f.startswith("ledger.scheduler")}

# folder -> the folders its modules may import (its own always allowed)
MAY_IMPORT: dict[str, set[str]] = {
    "ledger.core": set(),
    "ledger.infra": {"ledger.core"},
    "ledger.models": {"ledger.core"},
    "ledger.store": {"ledger.core", "ledger.infra", "ledger.models"},
    # DAG files import `ledger` (its __init__ re-exports the sdk) and the Airflow names
    "ledger.sdk": _LEDGER_BASE | {"ledger"},
    "ledger.airflow_compat": _LEDGER_BASE | {"ledger.sdk", "ledger"},
    "ledger.services": _LEDGER_BASE | {"ledger.sdk", "ledger.models", "ledger.store", "ledger"},
    "ledger.web": _LEDGER_ALL,
    "ledger": {"ledger.sdk", "ledger.core", "ledger.infra"},
    # the try side: what a worker with no database runs
    "ledger.scheduler.runtime": _LEDGER_BASE | {"ledger.sdk", "ledger.airflow_compat", "ledger",
                                                "ledger.scheduler.executors"},
    "ledger.scheduler.executors": _LEDGER_BASE | {"ledger.scheduler.runtime"},
    "ledger.scheduler.parsing": _LEDGER_ALL | {"ledger.scheduler.runtime"},
    "ledger.scheduler.callbacks": _LEDGER_ALL | {"ledger.scheduler.runtime", "ledger.scheduler.loop"},
    "ledger.scheduler.signals": _LEDGER_ALL | {"ledger.scheduler.runtime", "ledger.scheduler.executors",
                                               "ledger.scheduler.loop"},
    "ledger.scheduler.loop": _LEDGER_ALL | _SCHEDULER_ALL,
    "ledger.scheduler": _SCHEDULER_ALL,
    "ledger.backfill": _LEDGER_ALL | _SCHEDULER_ALL,
    "ledger.cli": _LEDGER_ALL | _SCHEDULER_ALL | {"ledger.backfill", "ledger.migrations"},
    "ledger.migrations": _LEDGER_ALL,
}

NO_DATABASE = ("sqlalchemy", "alembic", "psycopg")
NO_LIBRARIES: dict[str, tuple[str, ...]] = {
    "ledger.core": (*NO_DATABASE, "subprocess", "socket", "urllib", "http", "shutil", "requests", "redis",
                    "celery", "kombu", "pyspark"),
    "ledger.sdk": NO_DATABASE,
    "ledger.infra": NO_DATABASE,
    "ledger.scheduler.runtime": NO_DATABASE,
}
CLOCK_READS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
               ("time", "time"), ("time", "monotonic"), ("pendulum", "now"), ("pendulum", "today")}

# (module, imported module or library) -> what removes the edge
KNOWN: dict[tuple[str, str], str] = {
    # custom timetables (sdk) are schedule kinds the read-back of a version needs; Airflow's protocol installs
    # the `airflow` namespace when a timetable written for Airflow is imported
    ("ledger.store.dags", "ledger.sdk.timetables"): "a version's custom timetable is read back by user code",
    ("ledger.sdk.timetables", "ledger.airflow_compat"): "the namespace installed by whoever imports DAG files",
    # describing a DAG (sdk) apart from reading a stored version back (core)
}


def folder_of(module: str) -> str:
    return next(f for f in FOLDERS if module == f or module.startswith(f + "."))


def offences() -> set[tuple[str, str]]:
    modules = project_modules()
    graph, _ = import_graph(modules)
    found: set[tuple[str, str]] = set()
    for module, targets in graph.items():
        own = folder_of(module)
        for target in targets:
            folder = folder_of(target)
            if folder != own and folder not in MAY_IMPORT[own]:
                found.add((module, target))
        banned = NO_LIBRARIES.get(own, ())
        if banned:
            path = modules[module]
            for imp in imports_in(path.read_text(), module, is_package=path.name == "__init__.py"):
                top = imp.target.split(".")[0]
                if top in banned:
                    found.add((module, top))
    return found


def test_every_folder_states_its_rule() -> None:
    for folder in FOLDERS:
        init = ROOT / folder.replace(".", "/") / "__init__.py"
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring stating the folder's rule"


def test_every_module_sits_in_a_folder_with_a_rule() -> None:
    for module in project_modules():
        assert folder_of(module) in MAY_IMPORT


def test_each_folder_imports_only_what_its_rule_allows() -> None:
    new = sorted(offences() - set(KNOWN))
    assert not new, "imports against the folders' rules (docs/architecture.md, Folders):\n" + "\n".join(
        f"  {module} ({folder_of(module)}) imports {target}" for module, target in new)


def test_a_known_wrong_way_edge_that_was_fixed_leaves_the_list() -> None:
    gone = sorted(set(KNOWN) - offences())
    assert not gone, f"fixed, remove from KNOWN: {gone}"


def test_the_pure_rules_read_no_clock() -> None:
    reads = []
    for module, path in project_modules().items():
        if folder_of(module) != "ledger.core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and (node.func.value.id, node.func.attr) in CLOCK_READS):
                reads.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not reads, f"the pure rules read the clock (pass `now` in): {reads}"


@pytest.mark.parametrize(("module", "folder"), [("ledger.core.states", "ledger.core"), ("ledger", "ledger"),
                                                ("ledger.scheduler.runtime.task_runner", "ledger.scheduler.runtime"),
                                                ("ledger.cli.app", "ledger.cli")])
def test_a_module_belongs_to_the_most_specific_folder(module: str, folder: str) -> None:
    assert folder_of(module) == folder
    assert resolve(module, set(project_modules())) == module


def test_the_loops_job_stays_a_short_class_whose_steps_live_in_their_own_modules() -> None:
    """DagRunJob reads as steps kept in modules of their own (scheduler/loop/*.py), its module under 400 lines
    (issue 39): a step that grows belongs in the module named after it."""
    lines = (ROOT / "scheduler" / "loop" / "job.py").read_text().count("\n")
    assert lines < 400, f"scheduler/loop/job.py has {lines} lines: move the step that grew into its own module"
