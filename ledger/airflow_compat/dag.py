"""Airflow's DAG as ledger reads it: `airflow.DAG`, `airflow.models.dag.DAG`, `airflow.sdk.DAG` and `@dag`.

It is ledger's DAG (ledger/sdk/dag.py) with Airflow's leniencies and extras:
- `dag_id` and `description` may be given by position; `schedule_interval` (Airflow 2) is `schedule`;
- a naive `start_date` (or `end_date`) is read as UTC, as Airflow's default timezone does, with a warning (a
  Python warning while the file is parsed, and a note in the version that `ledger dags show` prints);
- `default_args` may hold any of Airflow's operator arguments: `start_date`/`end_date` become the DAG's when it
  has none, `owner` its owner, `sla` its deadline (below); the rest ledger cannot act on is listed as ignored;
- `dag_display_name`, `description`, `doc_md`, `tags` and `owner` are kept in the version and shown;
- `sla` (per task, or in default_args) and `sla_miss_callback` become the DAG's deadline: a run not finished
  by the end of its data interval plus the largest `sla` of its tasks calls `sla_miss_callback` once, with
  Airflow's arguments (dag, task_list, blocking_task_list, slas, blocking_tis) made from its task states then:
  the tasks with an sla not succeeded or skipped, the task instances not succeeded (decision 178);
- Airflow 2's DAG without a schedule runs daily (from its start_date); Airflow 3's (`airflow.sdk`) does not.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, ClassVar

import pendulum

from ledger.airflow_compat.callbacks import airflow_callbacks
from ledger.core.errors import DagDefinitionError
from ledger.sdk import dag as ledger_dag
from ledger.sdk.datasets import is_dataset_schedule
from ledger.sdk.params import ParamRef

_NOTSET: Any = object()

# DAG arguments of Airflow that ledger accepts and does not act on: listed as ignored by `ledger dags show`
IGNORED_DAG_ARGUMENTS = (
    "default_view", "orientation", "access_control", "is_paused_upon_creation", "auto_register", "fail_stop",
    "fail_fast", "max_consecutive_failed_dag_runs", "owner_links", "concurrency", "dag_run_timeout",
    "disable_bundle_versioning", "bundle_name", "bundle_version", "deadline_alert",
)

def utc_if_naive(value: datetime | None, *, what: str, dag_id: str, notes: list[str]) -> datetime | None:
    """A naive datetime read as UTC (Airflow's default timezone), with a warning and a note."""
    if value is None or value.tzinfo is not None:
        return value
    note = f"{what} {value.isoformat()} is naive: read as UTC, as Airflow does"
    frame = sys._getframe(1)  # the warning points at the DAG file's line
    while frame.f_back is not None and not str(frame.f_globals.get("__name__")).startswith(
            ledger_dag.DAG_MODULE_PREFIX):
        frame = frame.f_back
    warnings.warn_explicit(f"DAG {dag_id!r}: {note}", UserWarning, frame.f_code.co_filename, frame.f_lineno)
    notes.append(note)
    return pendulum.instance(value, tz="UTC")


def delays_in_seconds(args: dict[str, Any]) -> dict[str, Any]:
    """`args` with a number given as retry_delay or max_retry_delay read as seconds, as Airflow reads it."""
    for key in ("retry_delay", "max_retry_delay"):
        value = args.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            args[key] = timedelta(seconds=value)
    return args


def largest_sla(tasks: Iterable[Any]) -> timedelta | None:
    slas = [t.sla for t in tasks if isinstance(getattr(t, "sla", None), timedelta)]
    return max(slas) if slas else None


class SlaMissCallback:
    """`sla_miss_callback` as ledger's deadline callback: called with Airflow's five arguments."""

    def __init__(self, fn: Callable[..., Any], dag: DAG) -> None:
        self.fn = fn
        self.dag = dag

    def describe(self) -> dict[str, Any]:
        return {"sla_miss_callback": ledger_dag.describe_callback(self.fn)}

    def __call__(self, context: dict[str, Any]) -> Any:
        """Airflow's (dag, task_list, blocking_task_list, slas, blocking_tis), as Airflow 2's SLA check makes them
        for one logical date (`sla_misses`), from the run's task states when its deadline passed."""
        at = pendulum.instance(datetime.fromisoformat(str(context.get("logical_date"))))
        slas, blocking = sla_misses({t.task_id: t.sla for t in self.dag.tasks.values()  # type: ignore[attr-defined]
                                     if isinstance(getattr(t, "sla", None), timedelta)},
                                    context.get("task_states") or {})
        stamp = pendulum.now("UTC")
        sla_rows = [SimpleNamespace(task_id=t, dag_id=self.dag.dag_id, execution_date=at, logical_date=at,
                                    timestamp=stamp, email_sent=False, notification_sent=False, description=None,
                                    run_id=context.get("run_id"), deadline=context.get("deadline")) for t in slas]
        blocking_tis = [SimpleNamespace(task_id=key.split("[")[0], key=key, dag_id=self.dag.dag_id,
                                        execution_date=at, logical_date=at, run_id=context.get("run_id"),
                                        state=state) for key, state in blocking]
        return self.fn(self.dag, "\n".join(f"{t} on {at.isoformat()}" for t in slas),
                       "\n".join(f"{key} on {at.isoformat()}" for key, _state in blocking), sla_rows, blocking_tis)


def sla_misses(slas: Mapping[str, timedelta], states: Mapping[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """What Airflow 2's SLA check reports for one logical date once every task's `sla` has passed: the tasks with an
    sla that have not succeeded or been skipped (every instance of a mapped task counts), and the blocking task
    instances, those not in success (`states`: task instance key -> state; none known: every task with an sla
    missed)."""
    if not states:
        return sorted(slas), []
    late = {key.split("[")[0] for key, state in states.items() if state not in ("success", "skipped")}
    return sorted(t for t in slas if t in late), sorted((k, v) for k, v in states.items() if v != "success")


class DAG(ledger_dag.DAG):
    """Airflow's DAG (see the module docstring)."""

    airflow_major: ClassVar[int] = 2

    def __init__(self, dag_id: str | None = None, description: str | None = None, *,
                 schedule: Any = _NOTSET, schedule_interval: Any = _NOTSET, timetable: Any = None,
                 start_date: datetime | None = None, end_date: datetime | None = None,
                 default_args: Mapping[str, Any] | None = None, catchup: bool | None = None,
                 dag_display_name: str | None = None, doc_md: str | None = None, tags: Iterable[str] | None = None,
                 owner: str | None = None, sla_miss_callback: Callable[..., Any] | None = None,
                 user_defined_macros: Mapping[str, Any] | None = None,
                 user_defined_filters: Mapping[str, Callable[..., Any]] | None = None,
                 template_searchpath: str | Iterable[str] | None = None, render_template_as_native_obj: bool = False,
                 jinja_environment_kwargs: Mapping[str, Any] | None = None, template_undefined: Any = None,
                 params: Mapping[str, Any] | None = None,
                 dagrun_timeout: timedelta | None = None, max_active_runs: int | None = None,
                 max_active_tasks: int | None = None, timezone: str | None = None,
                 **more: Any) -> None:
        if not dag_id:
            raise DagDefinitionError("a DAG needs a dag_id")
        unknown = sorted(set(more) - set(IGNORED_DAG_ARGUMENTS) - set(_LEDGER_ONLY))
        if unknown:
            raise DagDefinitionError(f"DAG {dag_id!r}: unknown argument {unknown[0]!r}")
        notes: list[str] = []
        given_args = dict(default_args or {})
        start_date = start_date or given_args.pop("start_date", None)
        end_date = end_date or given_args.pop("end_date", None)
        given_args.pop("start_date", None)
        given_args.pop("end_date", None)
        start_date = utc_if_naive(start_date, what="start_date", dag_id=dag_id, notes=notes)
        end_date = utc_if_naive(end_date, what="end_date", dag_id=dag_id, notes=notes)
        given = [name for name, value in (("schedule_interval", schedule_interval), ("timetable", timetable),
                                          ("schedule", schedule)) if value not in (_NOTSET, None)]
        if len(given) > 1:  # as Airflow 2 refuses it
            raise DagDefinitionError(f"DAG {dag_id!r}: give at most one of schedule_interval, timetable and "
                                     f"schedule, not {' and '.join(given)}")
        for name, fn in (user_defined_filters or {}).items():
            if not callable(fn):
                raise DagDefinitionError(f"DAG {dag_id!r}: user_defined_filters[{name!r}] is not callable")
        if schedule is _NOTSET:
            schedule = schedule_interval if schedule_interval is not _NOTSET else timetable
            if schedule is None and timetable is None and schedule_interval is _NOTSET and self.airflow_major == 2 \
                    and start_date is not None:
                schedule = timedelta(days=1)  # Airflow 2's default schedule
        if start_date is None and self.airflow_major == 3 and schedule not in (None, _NOTSET) \
                and not is_dataset_schedule(schedule):
            # Airflow 3 schedules such a DAG from its latest interval on (decision 0221); with catchup there is no
            # first interval to catch up from
            if catchup:
                raise DagDefinitionError(f"DAG {dag_id!r}: catchup=True needs a start_date (the first interval to "
                                         "catch up from); give one, or leave catchup off to start at the latest "
                                         "interval")
            start_date = pendulum.datetime(1970, 1, 1, tz="UTC")
            notes.append("no start_date: runs from the latest interval on, as Airflow 3 schedules it")
        self.owner = owner or given_args.pop("owner", None) or ""
        given_args.pop("owner", None)
        self.default_sla = given_args.pop("sla", None)
        ledger_args = delays_in_seconds({k: v for k, v in given_args.items() if k in ledger_dag.TASK_ARGUMENTS})
        # (task_concurrency acts through each operator, ledger/airflow_compat/operators.py, unless a
        # max_active_tis_per_dag is given beside it)
        ignored = sorted(k for k in given_args if (k not in ledger_dag.TASK_ARGUMENTS and not (
            k == "task_concurrency" and given_args[k] and not given_args.get("max_active_tis_per_dag"))) or (
            k == "pool_slots" and given_args[k] in (None, 1)))  # (as before it acted: the version keeps its hash)
        super().__init__(
            dag_id, schedule=schedule, start_date=start_date, end_date=end_date, catchup=bool(catchup),
            default_args=ledger_args, description=description or "", tags=tags or (), params=params,
            dagrun_timeout=dagrun_timeout, max_active_runs=max_active_runs or 16,
            max_active_tasks=max_active_tasks or 16, timezone=timezone,
            **{k: v for k, v in more.items() if k in _LEDGER_ONLY})
        self.callbacks = airflow_callbacks(self.callbacks, self)
        self.ignored_args = ignored
        self.ignored_dag_args = sorted(k for k in more if k in IGNORED_DAG_ARGUMENTS)
        self.notes = notes
        self.display_name = dag_display_name or ""
        self.doc_md = inspect.cleandoc(doc_md) if isinstance(doc_md, str) else ""
        self.user_defined_macros = dict(user_defined_macros or {})
        self.user_defined_filters = dict(user_defined_filters or {})
        self.template_searchpath = [template_searchpath] if isinstance(template_searchpath, str) else list(
            template_searchpath or ())
        self.render_template_as_native_obj = bool(render_template_as_native_obj)
        # the Jinja settings its templates render with (ledger/sdk/templates.py: environment)
        self.jinja_options = {**({"undefined": template_undefined} if template_undefined is not None else {}),
                              **dict(jinja_environment_kwargs or {})}
        self.sla_miss_callback = sla_miss_callback
        self.airflow_default_args = dict(default_args or {})  # what its operators take their defaults from

    def about(self) -> dict[str, Any]:
        """What the version records about the DAG for people (only what is given, so that other DAGs keep
        their version hashes); see ledger/core/versions.py."""
        owners = sorted({o for t in self.tasks.values() for o in [getattr(t, "owner", "") or self.owner] if o})
        return {k: v for k, v in (("display_name", self.display_name), ("description", self.description),
                                  ("doc_md", self.doc_md), ("tags", self.tags), ("owner", ", ".join(owners)),
                                  ("notes", self.notes), ("ignored_dag_args", self.ignored_dag_args)) if v}

    def validate(self) -> None:
        super().validate()
        sla = largest_sla(self.tasks.values())
        if sla is not None and self.deadline is None:
            self.deadline = sla
        if self.sla_miss_callback is not None and "deadline_missed" not in self.callbacks:
            self.callbacks["deadline_missed"] = [SlaMissCallback(self.sla_miss_callback, self)]


_LEDGER_ONLY = ("on_failure_callback", "on_success_callback", "deadline", "on_deadline_missed")


class SdkDAG(DAG):
    """Airflow 3's DAG (`airflow.sdk.DAG`): without a schedule it runs only when triggered."""

    airflow_major = 3


def dag_decorator(dag_class: type[DAG]) -> Callable[..., Any]:
    """Airflow's `@dag` (Airflow 2) or `@dag` of `airflow.sdk` (Airflow 3), making `dag_class` DAGs."""

    def dag(fn: Callable[..., Any] | str | None = None, /, *, dag_id: str | None = None, **dag_kwargs: Any) -> Any:
        if isinstance(fn, str):  # `@dag("my_id", ...)`: the id by position, as Airflow's first parameter
            if dag_id is not None:
                raise DagDefinitionError(f"@dag: the DAG id is given twice ({fn!r} and dag_id={dag_id!r})")
            fn, dag_id = None, fn
        def wrap(func: Callable[..., Any]) -> Callable[..., DAG]:
            @functools.wraps(func)
            def factory(*args: Any, **kwargs: Any) -> DAG:
                options = dict(dag_kwargs)
                params = dict(options.pop("params", None) or {})
                # the function's parameters with defaults are params of the DAG, and the function gets them as
                # ParamRefs, resolved to the run's values when a try runs (Airflow's DagParam)
                refs: dict[str, Any] = {}
                for name, p in inspect.signature(func).parameters.items():
                    if p.default is not inspect.Parameter.empty:
                        params.setdefault(name, p.default)
                        refs[name] = ParamRef(name)
                if "doc_md" not in options and func.__doc__:
                    options["doc_md"] = func.__doc__
                made = dag_class(dag_id or func.__name__, params=params or None, **options)
                with made:
                    func(*args, **{**refs, **kwargs})
                return made
            return factory
        return wrap(fn) if fn is not None else wrap

    return dag


airflow2_dag = dag_decorator(DAG)
sdk_dag = dag_decorator(SdkDAG)
