"""ledger: a workflow scheduler whose core is an auditable, timeline-versioned ledger of DAG runs.

DAG authors import from here: `from ledger import DAG, PythonTask, BashTask, task`.
"""

from ledger.context import TaskContext
from ledger.dag import DAG, BashTask, PythonTask, Task, TaskGroup, task
from ledger.datasets import (
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
from ledger.errors import SkipTask
from ledger.notifiers import EmailNotifier, Notifier, WebhookNotifier
from ledger.signal_rules import SignalAction
from ledger.spark import SparkTask, spark_task

__all__ = [
    "DAG",
    "AllOf",
    "AnyOf",
    "Asset",
    "AssetAlias",
    "AssetOrTimeSchedule",
    "BashTask",
    "Dataset",
    "DatasetAlias",
    "DatasetOrTimeSchedule",
    "EmailNotifier",
    "Notifier",
    "PythonTask",
    "SignalAction",
    "SkipTask",
    "SparkTask",
    "Task",
    "TaskContext",
    "TaskGroup",
    "TimePartitions",
    "WebhookNotifier",
    "spark_task",
    "task",
]
