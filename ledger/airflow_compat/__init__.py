"""The `airflow` compatibility namespace: Airflow DAG files import `airflow...` and run in ledger unchanged.

ledger's own `airflow` package lives in `ledger/airflow_compat/airflow/` (so `.../airflow/operators/bash.py`
is `airflow.operators.bash`). `install()` puts a finder first on `sys.meta_path` that makes that folder
importable as `airflow`, and it is called wherever DAG files are imported (scheduler/runtime/dagbag.py: parsing, `ledger
dags test`, a try's process, a callback's process). The finder gives way to any other `airflow`: when a regular
package of that name is on sys.path (Apache Airflow installed, or a DAGs folder's own `airflow` package), that
one is imported and ledger's never is.

The modules under `airflow/` only re-export names defined in ledger's modules (the implementations live
beside this file, under their ledger names). Those files are also reachable as `ledger.airflow_compat.airflow.*`
(that is how ruff and mypy see them; nothing imports them so), and a second copy of a re-export module is
harmless because the classes it names are ledger's, one each.

An `airflow.*` module that ledger's namespace does not have (`airflow.providers.amazon...`, a provider's
hook) is refused while the DAG file is imported: a ModuleNotFoundError (so `try: import x / except ImportError`
in a DAG file still works) whose one line names the import and what to use in ledger instead; `ledger dags
errors` shows it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import NoReturn

NAMESPACE = "airflow"
SHIM_ROOT = Path(__file__).resolve().parent / NAMESPACE  # the folder imported as `airflow`
EXAMPLES = NAMESPACE + ".example_dags"  # the package of Airflow's example DAGs: the DAGs folder (decision 0282)
MARKER = "__ledger_airflow_compat__"  # set in the shim's `airflow/__init__.py`

CARRIED = ("ledger carries Airflow's core and the providers standard, common.sql, sqlite, postgres (hooks and "
           "SQLExecuteQueryOperator), http (HttpHook, HttpOperator, HttpSensor), smtp (EmailOperator, SmtpHook), "
           "apache.spark (SparkSubmitOperator, SparkSqlOperator, @task.pyspark) and amazon's S3 basics (S3Hook, "
           "S3KeySensor, S3CreateObjectOperator, S3DeleteObjectsOperator) only")

NO_TRIGGERER = ("ledger has no triggerer: a deferrable sensor waits in reschedule mode (decision 134); write the wait "
                "as a BaseSensorOperator's poke() with mode='reschedule'")

NO_SESSION = ("a DAG file gets no session of ledger's database: read a run through the task's context (ti, dag_run), "
              "or ledger's CLI and web API (docs/cli-reference.md)")

# What to use instead of an `airflow.*` import ledger does not provide, by the longest matching prefix.

# Airflow 3.3's state stores and partition mappers, refused by design (decision 0312)
NO_STATE_STORES = ("ledger keeps no state beside its timeline, so Airflow 3.3's task and asset state stores "
                   "(task_state_store, asset_state_store, NEVER_EXPIRE) are refused by design (decision 0312): a "
                   "retry finds its external job by a key made from ti.run_id, ti.task_id and ti.map_index, and an "
                   "asset's watermark is the extra of its newest event (yield Metadata(asset, {...}); read "
                   "inlet_events[asset][-1].extra)")
NO_PARTITION_MAPPERS = ("Airflow 3.3's asset partition mappers and partitioned timetables (PartitionedAssetTimetable, "
                        "CronPartitionTimetable, PartitionedAtRuntime, the *Mapper and *Window classes) are refused "
                        "by design (decision 0312): ledger's datasets take time partitions, Dataset(uri, "
                        "partitions=TimePartitions(...)), which a DAG scheduled on them consumes partition by "
                        "partition (docs/datasets.md)")

INSTEAD: dict[str, str] = {
    "airflow.providers": CARRIED + "; call the service from a @task (PythonOperator) with its own client "
                         "library, and a connection from ledger.sdk.secrets.get_connection",
    "airflow.hooks": "ledger has no hooks; call the service from a @task with its own client library, and a "
                     "connection from ledger.sdk.secrets.get_connection",
    "airflow.providers.cncf.kubernetes": "ledger runs tasks in its own executors; run the container from a "
                                         "@task.bash (`kubectl run ...`) or a @task",
    "airflow.providers.celery": "ledger's executors replace Celery's; see docs/architecture.md",
    "airflow.sensors": "this sensor is not provided; poll from a @task that raises to retry, or use a "
                       "signal-driven task (docs/signals.md)",
    "airflow.providers.standard.sensors": "this sensor is not provided; poll from a @task that raises to retry, "
                                          "or use a signal-driven task (docs/signals.md)",
    "airflow.triggers": NO_TRIGGERER,
    "airflow.providers.standard.triggers": NO_TRIGGERER,
    "airflow.example_dags": "Airflow's example helpers are not part of ledger; copy the helper module into your DAGs "
                            "folder (airflow.example_dags.libs.helper is the DAGs folder's libs/helper.py) or import "
                            "it from there",
    "airflow.plugins_manager": "ledger loads no Airflow plugins; import your helpers from the DAGs folder",
    "airflow.www": "ledger has its own web server (`ledger web`); Airflow's UI plugins do not load",
    "airflow.api": "use ledger's CLI or web API (docs/cli-reference.md)",
    "airflow.settings": "ledger reads its settings from LEDGER_* variables (docs/operations.md); " + NO_SESSION,
    "airflow.utils.session": NO_SESSION,
    "airflow.kubernetes": "ledger has no Kubernetes executor; run the container from a @task.bash (`kubectl run "
                          "...`) or a @task",
    "airflow.executors": "ledger's executors are chosen with LEDGER_EXECUTOR (docs/operations.md)",
    "airflow.listeners": "use on_*_callback or a notifier (docs/operations.md)",
    "airflow.operators": "ledger does not have this operator; use a @task (PythonOperator) or a BashOperator",
    "airflow.providers.standard": "ledger does not have this part of the standard provider; use a @task "
                                  "(PythonOperator) or a BashOperator",
    "airflow.providers.standard.operators.hitl": "ledger has no human-in-the-loop operators (they wait on Airflow's "
                                                 "UI and triggerer); wait for a person's answer with a signal-driven "
                                                 "task (docs/signals.md)",
    "airflow.operators.subdag": "SubDAGs are gone from Airflow 3 and ledger; use a TaskGroup",
    "airflow.timetables": "ledger does not have this timetable; give schedule= a cron expression, a preset "
                          "(@daily) or a timedelta",
    "airflow.models.connection": "read connections with ledger.sdk.secrets.get_connection(conn_id) "
                                 "(LEDGER_CONN_<ID> "
                                 "or `ledger connections`)",
    "airflow.notifications": "use a notifier: ledger.EmailNotifier, ledger.WebhookNotifier or a subclass of "
                             "ledger.Notifier",
    "airflow.operators.generic_transfer": "move the data from a @task with the two databases' client libraries",
    "airflow.sdk.execution_time": NO_STATE_STORES,
    "airflow.partition_mappers": NO_PARTITION_MAPPERS,
}
DEFAULT_INSTEAD = "use ledger's own API (from ledger import ...; docs/authoring.md)"


class AirflowImportRefused(ModuleNotFoundError):
    """An `airflow.*` import that ledger's namespace does not provide. Its message is the whole story."""


def instead(name: str) -> str:
    """What to use instead of the `airflow.*` module `name`."""
    best = max((p for p in INSTEAD if name == p or name.startswith(p + ".")), key=len, default=None)
    return INSTEAD[best] if best is not None else DEFAULT_INSTEAD


def refusal(name: str) -> str:
    return f"{name} is an Airflow module ledger does not provide: {instead(name)}"


NO_DEADLINE_ALERTS = (
    "ledger does not carry Airflow 3's deadline alerts: its deadline counts from the end of the run's data "
    "interval and its callbacks run in ledger's callback processes, not in a triggerer (decision 0283); give the "
    "DAG deadline=timedelta(...) with on_deadline_missed=[your function] (ledger's own), or Airflow 2's sla= with "
    "sla_miss_callback=")
# Names of provided `airflow.*` modules that ledger refuses by design: name -> what to use instead
REFUSED_NAMES: dict[str, str] = {name: NO_DEADLINE_ALERTS for name in (
    "AsyncCallback", "SyncCallback", "DeadlineAlert", "DeadlineReference", "BaseDeadlineReference",
    "deadline_reference")}
REFUSED_NAMES.update({name: NO_PARTITION_MAPPERS for name in (  # from airflow.sdk, Airflow 3.3
    "AllowedKeyMapper", "ChainMapper", "CronPartitionTimetable", "DayWindow", "FanOutMapper", "FixedKeyMapper",
    "HourWindow", "IdentityMapper", "MinimumCount", "MonthWindow", "PartitionedAtRuntime", "PartitionedAssetTimetable",
    "PartitionMapper", "ProductMapper", "QuarterWindow", "RollupMapper", "SegmentWindow", "StartOfDayMapper",
    "StartOfHourMapper", "StartOfMonthMapper", "StartOfQuarterMapper", "StartOfWeekMapper", "StartOfYearMapper",
    "WaitForAll", "WeekWindow", "Window", "YearWindow")})
STATE_STORE_NAMES = ("task_state_store", "asset_state_store")  # what a callable asks for by parameter, refused


def refused_names(module: str) -> Callable[[str], NoReturn]:
    """A module's `__getattr__` that refuses the names of REFUSED_NAMES in one line (refuse_name)."""
    def refuse(name: str) -> NoReturn:
        raise refuse_name(module, name)
    return refuse


def refuse_name(module: str, name: str) -> AirflowImportRefused:
    """The error of `from module import name` for a name ledger refuses (REFUSED_NAMES); an AttributeError for
    any other name it does not have (Python's ImportError "cannot import name")."""
    if name not in REFUSED_NAMES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return AirflowImportRefused(f"{module}.{name} is an Airflow name ledger does not provide: {REFUSED_NAMES[name]}",
                                name=f"{module}.{name}")


def _is_ours(module: ModuleType | None) -> bool:
    return module is not None and getattr(module, MARKER, False) is True


def _regular_package(spec: ModuleSpec | None) -> bool:
    """Whether a spec found on sys.path is a real module (not a bare folder taken as a namespace package,
    such as an `airflow/` folder of configuration beside the DAGs)."""
    return spec is not None and spec.origin not in (None, "namespace") and spec.loader is not None


class AirflowFinder:
    """The meta path finder of the `airflow` namespace (first on sys.meta_path, see the module docstring)."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name == NAMESPACE:
            if _regular_package(importlib.machinery.PathFinder.find_spec(name, path)):
                return None  # Apache Airflow (or the DAGs folder's own `airflow`): never shadowed
            return importlib.util.spec_from_file_location(
                name, SHIM_ROOT / "__init__.py", submodule_search_locations=[str(SHIM_ROOT)])
        if not name.startswith(NAMESPACE + ".") or not _is_ours(sys.modules.get(NAMESPACE)):
            return None
        if name == EXAMPLES and sys.path and os.path.isdir(sys.path[0]):
            # Airflow's example DAGs import their helpers as `airflow.example_dags.<path>`: from a copy of that
            # folder, they are the DAGs folder's own modules (the code root is first on sys.path while DAG files
            # load and tries run; decision 0282)
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [sys.path[0]]
            return spec
        if importlib.machinery.PathFinder.find_spec(name, path) is not None:
            return None  # a module of the shim: the path finder imports it from the parent's __path__
        raise AirflowImportRefused(refusal(name), name=name)


_FINDER = AirflowFinder()


def install() -> None:
    """Make `airflow` importable as ledger's namespace in this process (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


# Airflow's modules that DAG files import (Airflow 2.10's core, Airflow 3's task SDK and standard provider), for
# the table of docs/from-airflow.md: each is provided (the names it has) or refused (what to use instead), as
# the namespace says today
AIRFLOW_MODULES = (
    "airflow", "airflow.models", "airflow.models.dag", "airflow.models.baseoperator", "airflow.models.param",
    "airflow.models.variable", "airflow.models.xcom_arg", "airflow.models.connection", "airflow.decorators",
    "airflow.operators.bash", "airflow.operators.python", "airflow.operators.empty", "airflow.operators.dummy",
    "airflow.operators.email", "airflow.operators.latest_only", "airflow.operators.trigger_dagrun",
    "airflow.operators.branch", "airflow.operators.datetime", "airflow.operators.weekday",
    "airflow.operators.generic_transfer", "airflow.operators.subdag", "airflow.sensors.base",
    "airflow.sensors.bash", "airflow.sensors.python", "airflow.sensors.filesystem", "airflow.sensors.time_sensor",
    "airflow.sensors.time_delta", "airflow.sensors.date_time", "airflow.sensors.weekday",
    "airflow.sensors.external_task", "airflow.datasets", "airflow.timetables.base", "airflow.timetables.trigger",
    "airflow.timetables.events", "airflow.timetables.interval", "airflow.timetables.simple",
    "airflow.timetables.datasets", "airflow.timetables.assets", "airflow.utils.task_group",
    "airflow.utils.trigger_rule", "airflow.utils.weekday", "airflow.utils.edgemodifier", "airflow.utils.dates",
    "airflow.utils.helpers", "airflow.utils.timezone", "airflow.utils.state", "airflow.utils.context",
    "airflow.utils.dag_parsing_context",
    "airflow.models.taskinstance", "airflow.exceptions", "airflow.macros", "airflow.hooks.base",
    "airflow.notifications.basenotifier", "airflow.sdk", "airflow.configuration", "airflow.models.dataset",
    "airflow.utils.template", "airflow.datasets.metadata", "airflow.operators.bash_operator",
    "airflow.operators.python_operator", "airflow.operators.dummy_operator",
    "airflow.providers.standard.operators.bash",
    "airflow.providers.standard.operators.python", "airflow.providers.standard.operators.empty",
    "airflow.providers.standard.operators.latest_only", "airflow.providers.standard.operators.trigger_dagrun",
    "airflow.providers.standard.operators.branch", "airflow.providers.standard.operators.datetime",
    "airflow.providers.standard.operators.weekday", "airflow.providers.standard.sensors.python",
    "airflow.providers.standard.sensors.bash", "airflow.providers.standard.sensors.filesystem",
    "airflow.providers.standard.sensors.time", "airflow.providers.standard.sensors.time_delta",
    "airflow.providers.standard.sensors.date_time", "airflow.providers.standard.sensors.weekday",
    "airflow.providers.standard.sensors.external_task", "airflow.providers.standard.utils.weekday",
    "airflow.providers.smtp.operators.smtp", "airflow.providers.amazon.aws.operators.s3",
    "airflow.providers.google.cloud.operators.bigquery", "airflow.providers.cncf.kubernetes.operators.pod",
    "airflow.providers.apache.spark.operators.spark_submit", "airflow.providers.postgres.hooks.postgres",
    "airflow.providers.common.sql.hooks.sql", "airflow.providers.common.sql.operators.sql",
    "airflow.providers.sqlite.hooks.sqlite", "airflow.providers.sqlite.operators.sqlite",
    "airflow.providers.postgres.operators.postgres", "airflow.providers.http.hooks.http",
    "airflow.providers.http.operators.http", "airflow.providers.http.sensors.http",
    "airflow.providers.smtp.hooks.smtp", "airflow.utils.email", "airflow.providers.amazon.aws.hooks.s3",
    "airflow.providers.amazon.aws.sensors.s3", "airflow.providers.amazon.aws.operators.athena",
    "airflow.providers.apache.spark.operators.spark_sql", "airflow.providers.apache.spark.decorators.pyspark",
    "airflow.io.path", "airflow.triggers.base", "airflow.example_dags.libs.helper", "airflow.sdk.exceptions",
    "airflow.providers.common.compat.sdk", "airflow.providers.standard.operators.hitl",
    "airflow.sdk.execution_time.context", "airflow.partition_mappers",
)


def module_names(module: str) -> list[str] | None:
    """The names a module of the namespace exports (its `__all__`, read from the file), or None when the
    namespace does not have it."""
    import ast

    rel = Path(*module.split("."))
    for path in (SHIM_ROOT.parent / rel.with_suffix(".py"), SHIM_ROOT.parent / rel / "__init__.py"):
        if path.is_file():
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                    return [str(ast.literal_eval(node.value)[i]) for i in range(len(ast.literal_eval(node.value)))]
            return []
    return None


def import_table() -> list[tuple[str, str]]:
    """(module, status) for AIRFLOW_MODULES: `provided: names...`, or `refused: what to use instead`."""
    rows = []
    for module in AIRFLOW_MODULES:
        names = module_names(module)
        if names is None:
            rows.append((module, f"refused: {instead(module)}"))
        else:
            rows.append((module, "provided" + (": " + ", ".join(names) if names else "")))
    return rows


def provided_modules() -> list[str]:
    """The `airflow.*` modules ledger's namespace has, by their Airflow names, sorted."""
    found = []
    for path in SHIM_ROOT.rglob("*.py"):
        parts = list(path.relative_to(SHIM_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return sorted(found)
