"""The authoring API in one import: what `from ledger import ...` gives DAG files (ledger/__init__.py loads this
module on the first such name, so that `import ledger.store.runs` or `ledger --help` does not load it).

The names it exports are `ledger.__all__`, listed once, there."""

from ledger.core.errors import (
    SkipTask as SkipTask,
)
from ledger.core.signal_rules import (
    SignalAction as SignalAction,
)
from ledger.sdk.branching import (
    BranchPythonTask as BranchPythonTask,
)
from ledger.sdk.branching import (
    ShortCircuitTask as ShortCircuitTask,
)
from ledger.sdk.branching import (
    WeekDay as WeekDay,
)
from ledger.sdk.branching import (
    setup as setup,
)
from ledger.sdk.branching import (
    teardown as teardown,
)
from ledger.sdk.context import (
    TaskContext as TaskContext,
)
from ledger.sdk.dag import (
    DAG as DAG,
)
from ledger.sdk.dag import (
    BashTask as BashTask,
)
from ledger.sdk.dag import (
    PythonTask as PythonTask,
)
from ledger.sdk.dag import (
    Task as Task,
)
from ledger.sdk.dag import (
    TaskGroup as TaskGroup,
)
from ledger.sdk.dag import (
    task as task,
)
from ledger.sdk.datasets import (
    AllOf as AllOf,
)
from ledger.sdk.datasets import (
    AnyOf as AnyOf,
)
from ledger.sdk.datasets import (
    Asset as Asset,
)
from ledger.sdk.datasets import (
    AssetAlias as AssetAlias,
)
from ledger.sdk.datasets import (
    AssetOrTimeSchedule as AssetOrTimeSchedule,
)
from ledger.sdk.datasets import (
    Dataset as Dataset,
)
from ledger.sdk.datasets import (
    DatasetAlias as DatasetAlias,
)
from ledger.sdk.datasets import (
    DatasetOrTimeSchedule as DatasetOrTimeSchedule,
)
from ledger.sdk.datasets import (
    TimePartitions as TimePartitions,
)
from ledger.sdk.notifiers import (
    EmailNotifier as EmailNotifier,
)
from ledger.sdk.notifiers import (
    Notifier as Notifier,
)
from ledger.sdk.notifiers import (
    WebhookNotifier as WebhookNotifier,
)
from ledger.sdk.python_envs import (
    ExternalPythonTask as ExternalPythonTask,
)
from ledger.sdk.python_envs import (
    PythonVirtualenvTask as PythonVirtualenvTask,
)
from ledger.sdk.python_envs import (
    external_python as external_python,
)
from ledger.sdk.python_envs import (
    virtualenv as virtualenv,
)
from ledger.sdk.sensors import (
    PythonSensor as PythonSensor,
)
from ledger.sdk.sensors import (
    register_decorators as register_decorators,
)
from ledger.sdk.spark import (
    SparkTask as SparkTask,
)
from ledger.sdk.spark import (
    spark_task as spark_task,
)

register_decorators(task)  # @task.branch, @task.short_circuit, @task.sensor

# `@task.virtualenv` and `@task.external_python`, as Airflow's
setattr(task, "virtualenv", virtualenv)  # noqa: B010
setattr(task, "external_python", external_python)  # noqa: B010
