"""ledger: a workflow scheduler whose core is an auditable, timeline-versioned ledger of DAG runs.

DAG authors import from here: `from ledger import DAG, PythonTask, BashTask, task`.
"""

from ledger.branching import BranchPythonTask, ShortCircuitTask, WeekDay, setup, teardown
from ledger.context import TaskContext
from ledger.dag import DAG, BashTask, PythonTask, Task, TaskGroup, task
from ledger.errors import SkipTask
from ledger.notifiers import EmailNotifier, Notifier, WebhookNotifier
from ledger.sensors import PythonSensor, register_decorators
from ledger.signal_rules import SignalAction
from ledger.spark import SparkTask, spark_task

register_decorators(task)  # @task.branch, @task.short_circuit, @task.sensor

__all__ = ["DAG", "BashTask", "BranchPythonTask", "EmailNotifier", "Notifier", "PythonSensor", "PythonTask",
           "ShortCircuitTask", "SignalAction", "SkipTask", "SparkTask", "Task", "TaskContext", "TaskGroup",
           "WebhookNotifier", "WeekDay", "setup", "spark_task", "task", "teardown"]
