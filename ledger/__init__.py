"""ledger: a workflow scheduler whose core is an auditable, timeline-versioned ledger of DAG runs.

DAG authors import from here: `from ledger import DAG, PythonTask, BashTask, task`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.infra import moved_modules

moved_modules.install()  # `from ledger.params import ...` and the other paths from before the folders

__version__ = "0.1.0"  # the distribution's version too (pyproject.toml reads it)

if TYPE_CHECKING:
    from ledger.sdk.api import (
        DAG,
        AllOf,
        AnyOf,
        Asset,
        AssetAlias,
        AssetOrTimeSchedule,
        BashTask,
        BranchPythonTask,
        Dataset,
        DatasetAlias,
        DatasetOrTimeSchedule,
        EmailNotifier,
        ExternalPythonTask,
        Notifier,
        PythonSensor,
        PythonTask,
        PythonVirtualenvTask,
        ShortCircuitTask,
        SignalAction,
        SkipTask,
        SparkTask,
        Task,
        TaskContext,
        TaskGroup,
        TimePartitions,
        WebhookNotifier,
        WeekDay,
        external_python,
        setup,
        spark_task,
        task,
        teardown,
        virtualenv,
    )

__all__ = [
    "DAG",
    "AllOf",
    "AnyOf",
    "Asset",
    "AssetAlias",
    "AssetOrTimeSchedule",
    "BashTask",
    "BranchPythonTask",
    "Dataset",
    "DatasetAlias",
    "DatasetOrTimeSchedule",
    "EmailNotifier",
    "ExternalPythonTask",
    "Notifier",
    "PythonSensor",
    "PythonTask",
    "PythonVirtualenvTask",
    "ShortCircuitTask",
    "SignalAction",
    "SkipTask",
    "SparkTask",
    "Task",
    "TaskContext",
    "TaskGroup",
    "TimePartitions",
    "WebhookNotifier",
    "WeekDay",
    "external_python",
    "setup",
    "spark_task",
    "task",
    "teardown",
    "virtualenv",
]


def __getattr__(name: str) -> Any:
    """The authoring API, loaded on the first name a DAG file asks for (`from ledger import DAG`)."""
    if name not in __all__:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    from ledger.sdk import api

    value = getattr(api, name)
    globals().update({key: getattr(api, key) for key in __all__})
    return value
