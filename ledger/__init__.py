"""ledger: a workflow scheduler whose core is an auditable, timeline-versioned ledger of DAG runs.

DAG authors import from here: `from ledger import DAG, PythonTask, BashTask, task`.
"""

from ledger.core.errors import SkipTask
from ledger.core.signal_rules import SignalAction
from ledger.sdk.branching import BranchPythonTask, ShortCircuitTask, WeekDay, setup, teardown
from ledger.sdk.context import TaskContext
from ledger.sdk.dag import DAG, BashTask, PythonTask, Task, TaskGroup, task
from ledger.sdk.datasets import (
    AllOf,
    AnyOf,
    Asset,
    AssetAlias,
    AssetOrTimeSchedule,
    Dataset,
    DatasetAlias,
    DatasetOrTimeSchedule,
    TimePartitions,
)
from ledger.sdk.notifiers import EmailNotifier, Notifier, WebhookNotifier
from ledger.sdk.python_envs import ExternalPythonTask, PythonVirtualenvTask, external_python, virtualenv
from ledger.sdk.sensors import PythonSensor, register_decorators
from ledger.sdk.spark import SparkTask, spark_task

register_decorators(task)  # @task.branch, @task.short_circuit, @task.sensor

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

# `@task.virtualenv` and `@task.external_python`, as Airflow's
setattr(task, "virtualenv", virtualenv)  # noqa: B010
setattr(task, "external_python", external_python)  # noqa: B010
