"""Module paths from before the move into folders (2026-11-28) keep working: `from ledger.params import Param`
imports `ledger.sdk.params` itself (one module object under both names, so isinstance checks and module state
agree). DAG files written before the move, and the code that versions pinned before it (stored in the
database and run as it was), import these paths; docs/authoring.md names the current ones.

A finder on `sys.meta_path` answers only for the names below, and only by importing the module's new name;
every other import goes past it untouched.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# old name under `ledger.` -> new name under `ledger.`
MOVED = {
    "backfill_create": "services.backfill_create",
    "backfill_plan": "core.backfill_plan",
    "branching": "sdk.branching",
    "clock": "infra.clock",
    "code": "infra.code",
    "config": "infra.config",
    "context": "sdk.context",
    "dag": "sdk.dag",
    "dataset_docs": "services.dataset_docs",
    "datasets": "sdk.datasets",
    "dates": "core.dates",
    "db": "store.db",
    "dependencies": "core.dependencies",
    "documents": "services.documents",
    "errors": "core.errors",
    "external_task": "sdk.external_task",
    "flow": "core.flow",
    "log_store": "services.log_store",
    "logs": "infra.logs",
    "mapped_groups": "sdk.mapped_groups",
    "mapping": "core.mapping",
    "notifiers": "sdk.notifiers",
    "operations": "services.operations",
    "params": "sdk.params",
    "python_envs": "sdk.python_envs",
    "schedule": "core.schedule",
    "schema": "store.schema",
    "secrets": "services.secrets",
    "sensors": "sdk.sensors",
    "signal_delivery": "services.signal_delivery",
    "signal_rules": "core.signal_rules",
    "signal_sender": "sdk.signal_sender",
    "signal_service": "services.signal_service",
    "signals": "core.signals",
    "spark": "sdk.spark",
    "states": "core.states",
    "sync": "services.sync",
    "templates": "sdk.templates",
    "timeline": "core.timeline",
    "timetables": "sdk.timetables",
    "trigger_schedules": "core.trigger_schedules",
    "users": "services.users",
    "versions": "core.versions",
    "worker_client": "infra.worker_client",
    "workers": "infra.workers",
    "xcom": "sdk.xcom",
}


class _Alias:
    """A loader (create_module, exec_module) that answers with the module under its new name. Neither class
    subclasses importlib.abc's: importing that module loads importlib.resources, zipfile and tempfile into every
    process that imports `ledger`."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module under its new name has run already); the import system set the old
        name's spec on the module, and the module keeps its own."""
        module.__spec__ = self.spec


class MovedModules:
    """A finder on sys.meta_path (find_spec) for the old names only."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != "ledger" or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(f"ledger.{MOVED[name]}")))


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
