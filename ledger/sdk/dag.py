"""The DAG authoring API, familiar to Airflow users: `with DAG(...)`, tasks, `a >> b`, `@task`."""

from __future__ import annotations

import copy
import difflib
import functools
import graphlib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, overload

import pendulum
from pendulum import DateTime

from ledger.core.dataset_rules import UPSTREAM_REWRITE
from ledger.core.errors import DagDefinitionError
from ledger.core.mapping import KWARGS, instance_args, max_map_length
from ledger.core.schedule import Schedule, ScheduleError
from ledger.core.signal_rules import rule_to_json
from ledger.infra.code import CodeManifest
from ledger.sdk.datasets import (
    Condition,
    Dataset,
    DatasetAlias,
    DatasetError,
    DatasetOrTimeSchedule,
    as_condition,
    check_condition,
    is_dataset_schedule,
)
from ledger.sdk.params import as_params
from ledger.sdk.templates import LiteralValue
from ledger.sdk.timetables import Timetable, to_schedule
from ledger.sdk.xcom import LAZY_LISTS, NOTSET, MapRef, XComRef, ZipRef, refs_in, resolve_source

TRIGGER_RULES = ("all_success", "all_failed", "all_done", "all_done_min_one_success", "all_skipped", "one_success",
                 "one_failed", "one_done", "none_failed", "none_failed_min_one_success", "none_skipped", "always")
TEARDOWN_TRIGGER_RULE = "all_done_setup_success"  # a teardown task's (as_teardown; ledger/core/flow.py decides it)
TASK_CALLBACKS = {"on_failure_callback": "task_failure", "on_success_callback": "task_success",
                  "on_retry_callback": "task_retry"}
DAG_CALLBACKS = {"on_failure_callback": "run_failure", "on_success_callback": "run_success",
                 "on_deadline_missed": "deadline_missed"}
TASK_ARGUMENTS = ("retries", "retry_delay", "depends_on_past", "wait_for_downstream", "trigger_rule", "pool",
                  "queue", "priority_weight", "execution_timeout", "retry_exponential_backoff", "max_retry_delay",
                  *TASK_CALLBACKS, "email", "email_on_failure", "email_on_retry", "max_active_tis_per_dag",
                  "max_active_tis_per_dagrun", "pool_slots")
DEFAULT_QUEUE = "default"  # the queue of a task that names none (Airflow's default_queue)
# Airflow default_args keys that ledger accepts, so that an Airflow DAG loads, but does not act on (yet): the
# version records them and `ledger dags show` lists them as ignored, so nobody believes they took effect
IGNORED_AIRFLOW_ARGUMENTS = ("owner", "sla")

# DAG and task ids: Airflow's rule (KEY_REGEX and validate_key in airflow/utils/helpers.py). An id names a
# folder of the logs ($LEDGER_HOME/logs/DAG/run_N/TASK/...), so "." and ".." are refused as well, and the
# 250 limit counts UTF-8 bytes (a folder name has at most 255 bytes; an ASCII id is as long in characters).
KEY_PATTERN = re.compile(r"[\w.-]+")
MAX_KEY_LENGTH = 250


def key_problem(key: object) -> str | None:
    """Why `key` cannot be a DAG id or a task id, or None when it can: letters, digits, '_', '.' and '-',
    at most 250 characters (a task group's prefix makes `group.task`, which is fine)."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_LENGTH:
        counted = f"{len(key)} characters" + (f", {size} bytes in UTF-8" if size != len(key) else "")
        return f"is too long ({counted}); at most {MAX_KEY_LENGTH} are allowed"
    if "[" in key or "]" in key:  # `task[2]` names instance 2 of a mapped task
        return "may not contain '[' or ']'"
    if not KEY_PATTERN.fullmatch(key):
        return "may only contain letters, digits, '_', '.' and '-'"
    if key in (".", ".."):
        return "may not be '.' or '..'"
    return None


def _shown_key(key: object) -> str:
    """An id as an error message shows it: quoted, a long one cut short."""
    text = repr(key)
    return text if len(text) <= 60 else text[:50] + "..." + text[-1]


_context_stack: list[DAG] = []
_group_stack: list[TaskGroup] = []
created: list[DAG] = []  # every DAG constructed while a file is imported (the loader reads and resets it)
read_files: list[str] = []  # files of the DAGs folder a DAG file read as it was imported (template files): its code


def _timezone_name(value: datetime) -> str | None:
    tz = value.tzinfo
    if tz is None or value.utcoffset() is None:
        return None
    name = getattr(tz, "name", None) or getattr(tz, "key", None)
    if isinstance(name, str) and name:
        return "UTC" if name in ("+00:00", "UTC", "Etc/UTC") else name
    offset = value.utcoffset()
    return "UTC" if offset == timedelta(0) else None


def _to_utc(value: datetime) -> DateTime:
    return pendulum.instance(value).in_timezone("UTC")


class Task:
    """A unit of work in a DAG. Subclasses say what kind of work and which arguments define it."""

    kind: ClassVar[str] = "task"
    template_fields: ClassVar[tuple[str, ...]] = ()  # attributes rendered with Jinja before each try
    mappable_fields: ClassVar[tuple[str, ...]] = ()  # constructor arguments `Cls.partial(...).expand()` takes
    # a mapped task (ledger/core/mapping.py): (argument, literal list or XComRef) in expand() order; "call": the
    # arguments go to a @task function's call, "fields": they set the task's own fields (classic tasks)
    expand_args: tuple[tuple[str, Any], ...] = ()
    expand_kind: str = "fields"  # or "group": a task of a mapped task group (ledger/sdk/mapped_groups.py)
    mapped_group: str | None = None  # the mapped task group it is a task of (ledger/sdk/mapped_groups.py)
    group_item: dict[str, Any] | None = None  # an instance of a mapped task group's task: the group's arguments
    # control flow (ledger/core/flow.py): "branch" or "short_circuit" when this task's result skips others; setup and
    # teardown tasks (as_setup, as_teardown)
    flow: str | None = None
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False

    def __init__(
        self,
        task_id: str,
        *,
        dag: DAG | None = None,
        retries: int | None = None,
        retry_delay: timedelta | None = None,
        depends_on_past: bool | None = None,
        wait_for_downstream: bool | None = None,
        trigger_rule: str | None = None,
        pool: str | None = None,
        pool_slots: int | None = None,
        queue: str | None = None,
        priority_weight: int | None = None,
        execution_timeout: timedelta | None = None,
        signals: Mapping[str, Any] | None = None,
        retry_exponential_backoff: bool | None = None,
        max_retry_delay: timedelta | None = None,
        on_failure_callback: Callback | list[Callback] | None = None,
        on_success_callback: Callback | list[Callback] | None = None,
        on_retry_callback: Callback | list[Callback] | None = None,
        email: str | list[str] | None = None,
        email_on_failure: bool | None = None,
        email_on_retry: bool | None = None,
        outlets: Sequence[Any] | None = None,
        inlets: Sequence[Any] | None = None,
        max_active_tis_per_dag: int | None = None,
        max_active_tis_per_dagrun: int | None = None,
    ) -> None:
        if not task_id or not isinstance(task_id, str):
            raise DagDefinitionError("a task needs a non-empty string task_id")
        self.upstream_ids: set[str] = set()
        self.downstream_ids: set[str] = set()
        dag = dag or (_context_stack[-1] if _context_stack else None)
        if dag is None:
            raise DagDefinitionError(f"task {_shown_key(task_id)} is not inside a DAG: use `with DAG(...)` or "
                                     "pass dag=")
        self.group: TaskGroup | None = _group_stack[-1] if _group_stack and _group_stack[-1].dag is dag else None
        task_id = (self.group.prefix + task_id) if self.group is not None else task_id
        problem = key_problem(task_id)
        if problem is not None:
            raise DagDefinitionError(f"DAG {dag.dag_id!r}: task_id {_shown_key(task_id)} {problem}")
        self.task_id = task_id
        given = {"retries": retries, "retry_delay": retry_delay, "depends_on_past": depends_on_past,
                 "wait_for_downstream": wait_for_downstream, "trigger_rule": trigger_rule, "pool": pool,
                 "pool_slots": pool_slots, "queue": queue, "priority_weight": priority_weight,
                 "execution_timeout": execution_timeout,
                 "retry_exponential_backoff": retry_exponential_backoff, "max_retry_delay": max_retry_delay,
                 "on_failure_callback": on_failure_callback, "on_success_callback": on_success_callback,
                 "on_retry_callback": on_retry_callback, "email": email, "email_on_failure": email_on_failure,
                 "email_on_retry": email_on_retry, "max_active_tis_per_dag": max_active_tis_per_dag,
                 "max_active_tis_per_dagrun": max_active_tis_per_dagrun}
        merged = {**dag.default_args, **{k: v for k, v in given.items() if v is not None}}
        self.retries: int = int(merged.get("retries", 0))
        found = merged.get("retry_delay")
        self.retry_delay: timedelta = timedelta(seconds=300) if found is None else found  # 0 means at once
        self.depends_on_past: bool = bool(merged.get("depends_on_past", False))
        self.wait_for_downstream: bool = bool(merged.get("wait_for_downstream", False))
        self.trigger_rule: str = merged.get("trigger_rule") or "all_success"
        self.pool: str = merged.get("pool") or "default_pool"
        # the slots of its pool each of its task instances takes while queued or running (Airflow's pool_slots)
        self.pool_slots: int = 1 if merged.get("pool_slots") is None else merged["pool_slots"]
        # the Celery queue its tries are sent to (a worker listens on some queues: `ledger worker --queues`)
        self.queue: str = merged.get("queue") or DEFAULT_QUEUE
        self.priority_weight: int = int(merged.get("priority_weight", 1))
        self.execution_timeout: timedelta | None = merged.get("execution_timeout")
        self.retry_exponential_backoff: bool = bool(merged.get("retry_exponential_backoff", False))
        self.max_retry_delay: timedelta | None = merged.get("max_retry_delay")
        # at most this many task instances of this task queued or running at once, over the DAG's runs / in one run
        self.max_active_tis_per_dag: int | None = merged.get("max_active_tis_per_dag")
        self.max_active_tis_per_dagrun: int | None = merged.get("max_active_tis_per_dagrun")
        if self.wait_for_downstream:
            self.depends_on_past = True  # as in Airflow: waiting for downstream implies depending on the past
        where = f"task {task_id!r}"
        # kind (task_failure, task_success, task_retry) -> the callables, in order; `email` adds an e-mail
        # notifier on failure and on retry unless email_on_failure / email_on_retry say no, as in Airflow
        self.callbacks: dict[str, list[Callback]] = {
            kind: callback_list(merged.get(arg), where=f"{where}: {arg}") for arg, kind in TASK_CALLBACKS.items()}
        if merged.get("email"):
            from ledger.sdk.notifiers import EmailNotifier

            for flag, kind in (("email_on_failure", "task_failure"), ("email_on_retry", "task_retry")):
                if merged.get(flag, True):
                    self.callbacks[kind].append(EmailNotifier(to=merged["email"]))
        self.callbacks = {kind: fns for kind, fns in self.callbacks.items() if fns}
        self._check(dag)
        # signal-driven: {key: rule}; see ledger/core/signal_rules.py
        self.signal_rules: dict[str, Any] = dict(signals or {})
        self.signal_rules_json: dict[str, dict[str, Any]] = {
            key: rule_to_json(key, rule, where=f"task {task_id!r}", describe_callable=_callable_definition)
            for key, rule in self.signal_rules.items()}
        # datasets it writes (a successful try records an event of each) and reads (ledger/sdk/datasets.py)
        self.outlets: list[Dataset | DatasetAlias] = _datasets(outlets, where=f"task {task_id!r}: outlets")
        self.inlets: list[Dataset | DatasetAlias] = _datasets(inlets, where=f"task {task_id!r}: inlets")
        self.dag = dag
        dag.add_task(self)

    def _check(self, dag: DAG) -> None:
        where = f"task {self.task_id!r}"
        if self.trigger_rule not in TRIGGER_RULES and self.trigger_rule != TEARDOWN_TRIGGER_RULE:
            raise DagDefinitionError(f"{where}: unknown trigger_rule {self.trigger_rule!r} "
                                     f"(one of {', '.join(TRIGGER_RULES)})")
        if self.retries < 0:
            raise DagDefinitionError(f"{where}: retries must be >= 0")
        if not isinstance(self.retry_delay, timedelta) or self.retry_delay.total_seconds() < 0:
            raise DagDefinitionError(f"{where}: retry_delay must be a non-negative timedelta")
        if self.max_retry_delay is not None and (
            not isinstance(self.max_retry_delay, timedelta) or self.max_retry_delay.total_seconds() < 0
        ):
            raise DagDefinitionError(f"{where}: max_retry_delay must be a non-negative timedelta")
        if self.execution_timeout is not None and (
            not isinstance(self.execution_timeout, timedelta) or self.execution_timeout.total_seconds() <= 0
        ):
            raise DagDefinitionError(f"{where}: execution_timeout must be a positive timedelta")
        slots = self.pool_slots
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots < 2**31:
            raise DagDefinitionError(f"{where}: pool_slots must be a whole number >= 1, not {self.pool_slots!r}")
        for name in ("max_active_tis_per_dag", "max_active_tis_per_dagrun"):
            limit = getattr(self, name)
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                raise DagDefinitionError(f"{where}: {name} must be a whole number >= 1, not {limit!r}")

    # -- what defines this task, for the DAG version ------------------------------------------
    def definition(self) -> dict[str, Any]:
        """The kind-specific arguments that define this task (JSON-able)."""
        return {}

    def settings(self) -> dict[str, Any]:
        return {
            "retries": self.retries,
            "retry_delay": self.retry_delay.total_seconds(),
            "depends_on_past": self.depends_on_past,
            "wait_for_downstream": self.wait_for_downstream,
            "trigger_rule": self.trigger_rule,
            "pool": self.pool,
            # only when not the default, so that versions of DAGs that take one slot keep their hashes
            **({"pool_slots": self.pool_slots} if self.pool_slots != 1 else {}),
            "priority_weight": self.priority_weight,
            "execution_timeout": self.execution_timeout.total_seconds() if self.execution_timeout else None,
            # only when declared, so that versions of DAGs without signals keep their hashes
            **({"signals": self.signal_rules_json} if self.signal_rules_json else {}),
            # only when not the default, so that versions of DAGs that name no queue keep their hashes
            **({"queue": self.queue} if self.queue != DEFAULT_QUEUE else {}),
            **({"retry_exponential_backoff": True} if self.retry_exponential_backoff else {}),
            **({"max_retry_delay": self.max_retry_delay.total_seconds()} if self.max_retry_delay is not None else {}),
            **({"callbacks": describe_callbacks(self.callbacks)} if self.callbacks else {}),
            **({"group": self.group.group_id} if self.group is not None else {}),
            **({"expand": [[arg, _source_json(src)] for arg, src in self.expand_args]} if self.expand_args else {}),
            **({"flow": self.flow} if self.flow else {}),
            **({"setup": True} if self.is_setup else {}),
            **({"teardown": True} if self.is_teardown else {}),
            **({"on_failure_fail_dagrun": True} if self.on_failure_fail_dagrun else {}),
            **({"mapped_group": self.mapped_group} if self.mapped_group is not None else {}),
            **({"outlets": [o.to_json() for o in self.outlets]} if self.outlets else {}),
            **({"inlets": [o.to_json() for o in self.inlets]} if self.inlets else {}),
            **({"max_active_tis_per_dag": self.max_active_tis_per_dag}
               if self.max_active_tis_per_dag is not None else {}),
            **({"max_active_tis_per_dagrun": self.max_active_tis_per_dagrun}
               if self.max_active_tis_per_dagrun is not None else {}),
        }

    # -- setup and teardown (ledger/core/flow.py) ----------------------------------------------------
    def as_setup(self) -> Task:
        """Make this a setup task, as Airflow's `as_setup()`: the teardown tasks after it run even when the work
        between them fails; clearing a task clears its setups and their teardowns."""
        if self.is_teardown:
            raise DagDefinitionError(f"task {self.task_id!r} is a teardown task; it cannot also be a setup task")
        self.is_setup = True
        return self

    def as_teardown(self, *, setups: Task | Sequence[Task] | None = None,
                    on_failure_fail_dagrun: bool | None = None) -> Task:
        """Make this a teardown task, as Airflow's `as_teardown(setups=...)`: it runs once its upstream tasks are
        done if a setup task before it succeeded (trigger rule `all_done_setup_success`), and it does not decide
        the run's state unless `on_failure_fail_dagrun`. `setups` become setup tasks upstream of it."""
        if self.is_setup:
            raise DagDefinitionError(f"task {self.task_id!r} is a setup task; it cannot also be a teardown task")
        self.is_teardown = True
        self.trigger_rule = TEARDOWN_TRIGGER_RULE
        if on_failure_fail_dagrun is not None:
            self.on_failure_fail_dagrun = bool(on_failure_fail_dagrun)
        found = [] if setups is None else [setups] if isinstance(setups, Task) else list(setups)
        for setup in found:
            if not isinstance(setup, Task):
                raise DagDefinitionError(f"task {self.task_id!r}: as_teardown(setups=...) takes tasks, not "
                                         f"{setup!r:.60}")
            setup.as_setup()
            setup.set_downstream(self)
        return self

    # -- mapping -------------------------------------------------------------------------------
    @classmethod
    def partial(cls, **kwargs: Any) -> PartialTask:
        """Airflow's `Operator.partial(task_id=..., ...)`: the arguments every mapped instance shares; then
        `.expand(field=[...])` makes the mapped task."""
        return PartialTask(cls, kwargs)

    def _map(self, expand: Mapping[str, Any], kind: str) -> None:
        """Make this task mapped over `expand` (checked by _expand_sources); link the upstream tasks it
        expands over."""
        if self.signal_rules:
            raise DagDefinitionError(f"task {self.task_id!r}: a mapped task cannot start on signals")
        self.expand_args = tuple(expand.items())
        self.expand_kind = kind
        for _arg, src in self.expand_args:
            after_values(self, src, "is expanded over the value of")

    def for_instance(self, map_index: int, values: dict[str, dict[str, Any]]) -> Task:
        """This task as instance `map_index` of it runs: a copy with the instance's values of the expanded
        arguments (`values`: what the run's tasks passed on, for expansion over an upstream's list).
        MissingValue, or ValueError for a value that is not a list or an index out of range."""
        if not self.expand_args or map_index < 0:
            return self
        lists = []
        for arg, src in self.expand_args:
            found = resolve_source(src, values)
            if not isinstance(found, (list, *LAZY_LISTS)):
                raise ValueError(f"cannot expand {'expand_kwargs()' if arg == KWARGS else repr(arg)}: the value is "
                                 "not a list")
            lists.append((arg, found))
        args = instance_args(lists, map_index)
        if self.expand_kind == "group":  # a task of a mapped task group (ledger/sdk/mapped_groups.py)
            return self.group_instance(map_index, args)
        if KWARGS in args:  # expand_kwargs(): the instance's item is a dict of arguments
            item = args.pop(KWARGS)
            if not isinstance(item, dict):
                raise ValueError(f"expand_kwargs() item {map_index} is not a dict but a {type(item).__name__}")
            known = None if self.expand_kind == "call" else self.mappable_fields
            unknown = sorted(k for k in item if known is not None and k not in known)
            if unknown:
                raise ValueError(f"expand_kwargs() item {map_index} sets {unknown[0]!r}, which cannot be mapped "
                                 f"(mappable: {', '.join(known or ())})")
            args.update(item)
            if self.expand_kind != "call":
                missing = sorted(name for name in self.mappable_fields
                                 if getattr(self, name, None) is MAPPED and name not in args)
                if missing:
                    raise ValueError(f"expand_kwargs() item {map_index} gives no value for {missing[0]!r}")
        instance = copy.copy(self)
        if self.expand_kind == "call":
            assert isinstance(instance, PythonTask)
            instance.op_kwargs = {**instance.op_kwargs, **args}
        else:
            for arg, value in args.items():
                setattr(instance, arg, value)
            instance.check_mapped_value()
        return instance

    def check_mapped_value(self) -> None:
        """Refuse (ValueError) a mapped instance's field value that the task could not run with."""

    def group_instance(self, map_index: int, item: dict[str, Any]) -> Task:
        """Instance `map_index` of a task of a mapped task group (ledger/sdk/mapped_groups.py): the group's arguments
        (GroupArg) in its fields get the instance's item, and a sibling's value (same group) is the value of the
        sibling's instance `map_index`."""
        if KWARGS in item:
            given = item.pop(KWARGS)
            if not isinstance(given, dict):
                raise ValueError(f"expand_kwargs() item {map_index} is not a dict but a {type(given).__name__}")
            item.update(given)
        siblings = {tid for tid, t in self.dag.tasks.items() if t.mapped_group == self.mapped_group}

        def swap(value: Any) -> Any:
            if isinstance(value, GroupArg):
                if value.name not in item:
                    raise ValueError(f"the group's item {map_index} gives no value for {value.name!r}")
                return item[value.name]
            if isinstance(value, XComRef) and value.task_id in siblings:
                return XComRef(f"{value.task_id}[{map_index}]", value.key)
            if isinstance(value, list | tuple):
                return type(value)(swap(v) for v in value)
            if isinstance(value, dict):
                return {k: swap(v) for k, v in value.items()}
            return value

        instance = copy.copy(self)
        for name in {*self.template_fields, *self.mappable_fields}:
            if hasattr(self, name):
                setattr(instance, name, swap(getattr(self, name)))
        instance.group_item = item
        return instance

    def map(self, fn: Callable[[Any], Any]) -> MapRef:
        """Airflow's `XComArg.map(fn)`: this task's list, each item through `fn`, to expand another task over."""
        return self.output.map(fn)

    def zip(self, *others: Any, fillvalue: Any = NOTSET) -> ZipRef:
        """Airflow's `XComArg.zip(*others)`: tuples of the items at the same index, to expand another task over."""
        return self.output.zip(*others, fillvalue=fillvalue)

    # -- edges ---------------------------------------------------------------------------------
    def set_downstream(self, other: Task | TaskGroup | Sequence[Task | TaskGroup],
                       edge_modifier: Label | None = None) -> None:
        for task in _edge_tasks(other, "roots"):
            if task.dag is not self.dag:
                raise DagDefinitionError(f"cannot link {self.task_id!r} to {task.task_id!r}: different DAGs")
            self.downstream_ids.add(task.task_id)
            task.upstream_ids.add(self.task_id)
            if edge_modifier is not None:
                self.dag.edge_labels[(self.task_id, task.task_id)] = edge_modifier.label

    def set_upstream(self, other: Task | TaskGroup | Sequence[Task | TaskGroup],
                     edge_modifier: Label | None = None) -> None:
        for task in _edge_tasks(other, "leaves"):
            task.set_downstream(self, edge_modifier)

    def __rshift__(self, other: Any) -> Any:
        if isinstance(other, Label):
            return other.after([self])
        self.set_downstream(other)
        return other

    def __lshift__(self, other: Any) -> Any:
        if isinstance(other, Label):
            return other.before([self])
        self.set_upstream(other)
        return other

    def __rrshift__(self, other: Sequence[Task]) -> Task:
        self.set_upstream(other)
        return self

    def __rlshift__(self, other: Sequence[Task]) -> Task:
        self.set_downstream(other)
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.task_id}>"

    # `with setup >> teardown:` (Airflow's setup/teardown context): the tasks made inside run after the
    # teardown's setups and before the teardown
    def __enter__(self) -> Task:
        if not self.is_teardown:
            raise DagDefinitionError(f"task {self.task_id!r}: only a teardown task (as_teardown) opens a "
                                     "`with` block of the tasks it cleans up after")
        self._inside_from = len(self.dag.tasks)
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            return
        made = [t for t in list(self.dag.tasks.values())[self._inside_from:] if t is not self]
        ids = {t.task_id for t in made}
        setups = [self.dag.tasks[u] for u in sorted(self.upstream_ids) if self.dag.tasks[u].is_setup]
        for task in made:
            if not task.upstream_ids & ids:
                for setup in setups:
                    setup.set_downstream(task)
            if not task.downstream_ids & ids:
                task.set_downstream(self)

    @property
    def output(self) -> XComRef:
        """The value this task returns, to pass to another task (which then runs after it)."""
        return XComRef(self.task_id)


def _datasets(value: Sequence[Any] | None, *, where: str) -> list[Dataset | DatasetAlias]:
    items = [value] if isinstance(value, (Dataset, DatasetAlias)) else list(value or ())
    for item in items:
        if not isinstance(item, (Dataset, DatasetAlias)):
            raise DagDefinitionError(f"{where}: {item!r} is not a Dataset, Asset or alias")
    return items


def _edge_tasks(other: Any, side: str) -> list[Task]:
    """The tasks an edge to (or from) `other` links: a task, a group's roots (or leaves), or a list of those."""
    if isinstance(other, Task):
        return [other]
    if isinstance(other, TaskGroup):
        return other.roots() if side == "roots" else other.leaves()
    return [t for item in other for t in _edge_tasks(item, side)]


class Label:
    """A label on edges, as Airflow's: `a >> Label("on success") >> b` (or `b << Label(...) << a`, or
    `a.set_downstream(b, edge_modifier=Label(...))`) links a to b and names the edge; the version records it and
    the graph (`ledger dags show`, the web view) shows it."""

    def __init__(self, label: str) -> None:
        if not isinstance(label, str) or not label:
            raise DagDefinitionError(f"an edge Label needs a non-empty string, not {label!r}")
        self.label = label
        self._upstream: list[Task] = []
        self._downstream: list[Task] = []

    def after(self, upstream: Sequence[Any]) -> Label:
        self._upstream = [t for item in upstream for t in _edge_tasks(item, "leaves")]
        return self

    def before(self, downstream: Sequence[Any]) -> Label:
        self._downstream = [t for item in downstream for t in _edge_tasks(item, "roots")]
        return self

    def __rshift__(self, other: Any) -> Any:
        for task in self._upstream:
            task.set_downstream(other, self)
        return other

    def __lshift__(self, other: Any) -> Any:
        for task in self._downstream:
            task.set_upstream(other, self)
        return other

    def __rrshift__(self, other: Any) -> Label:
        return self.after(other if isinstance(other, list | tuple) else [other])

    def __rlshift__(self, other: Any) -> Label:
        return self.before(other if isinstance(other, list | tuple) else [other])

    def __repr__(self) -> str:
        return f"Label({self.label!r})"


@dataclass(frozen=True)
class GroupArg:
    """Stands, in the fields of a mapped task group's tasks, for the group argument `name` of each instance."""

    name: str

    def __repr__(self) -> str:
        return f"GroupArg({self.name!r})"


class Mapped:
    """Stands, in a mapped task's fields, for the value each instance gets from the list it is expanded over."""

    def __repr__(self) -> str:
        return "<mapped>"


MAPPED = Mapped()


def _source_json(src: Any) -> dict[str, Any]:
    """How a version records what a task is expanded over: a literal list (its length and values), another
    task's value, that through a map() function (its name and source digest), or a zip() of those."""
    if isinstance(src, XComRef):
        return src.as_json()
    if isinstance(src, MapRef):
        return {"map": _callable_definition(src.fn), "of": _source_json(src.source)}
    if isinstance(src, ZipRef):
        fill = {} if src.fillvalue is NOTSET else {"fillvalue": _jsonable(src.fillvalue)}
        return {"zip": [_source_json(member) for member in src.sources], **fill}
    return {"literal": len(src), "values": _jsonable(src)}


def _as_source(value: Any, what: str) -> Any:
    """An expand() source: a list, another task's value (a task stands for it), map() or zip() of those;
    DagDefinitionError naming `what` otherwise."""
    value = _as_ref(value)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, ZipRef):
        for member in value.sources:
            _as_source(member, what)
    elif isinstance(value, MapRef):
        _as_source(value.source, what)
    elif not isinstance(value, list | XComRef):
        raise DagDefinitionError(f"{what} is a {type(value).__name__} ({value!r:.60})")
    return value


def _kwargs_source(where: str, value: Any, known: Sequence[str] | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The checked argument of expand_kwargs(): a list of dicts of arguments, or another task's value (a list of
    dicts, checked when an instance runs)."""
    value = _as_source(value, f"{where}: expand_kwargs() maps over a list of dicts or another task's value; it")
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise DagDefinitionError(f"{where}: expand_kwargs() item {i} is not a dict but a "
                                         f"{type(item).__name__}")
            for name in item:
                if known is not None and name not in known:
                    raise DagDefinitionError(f"{where}: expand_kwargs() item {i} sets an unknown argument {name!r}; "
                                             f"it takes: {', '.join(known) or 'none'}")
                if name in given:
                    raise DagDefinitionError(f"{where}: {name!r} is given to both partial() and expand_kwargs(); "
                                             "give it to one")
        if len(value) > max_map_length():
            raise DagDefinitionError(f"{where}: expand_kwargs() over {len(value)} values, more than the "
                                     f"{max_map_length()} allowed (LEDGER_MAX_MAP_LENGTH)")
    return {KWARGS: value}


def _expand_sources(where: str, expand: Mapping[str, Any], known: Sequence[str] | None,
                    given: Mapping[str, Any]) -> dict[str, Any]:
    """The checked arguments of expand(): each a list or another task's value, a known argument (`known`:
    None when any name goes), not also given to partial(). DagDefinitionError otherwise."""
    if not expand:
        raise DagDefinitionError(f"{where}: expand() needs at least one argument to map over")
    out: dict[str, Any] = {}
    for arg, value in expand.items():
        if known is not None and arg not in known:
            raise DagDefinitionError(f"{where}: expand() got an unknown argument {arg!r}; it takes: "
                                     f"{', '.join(known) or 'none'}")
        if arg in given:
            raise DagDefinitionError(f"{where}: {arg!r} is given to both partial() and expand(); give it to one")
        value = _as_source(value, f"{where}: expand() maps over a list or another task's value; {arg}=")
        if isinstance(value, list) and len(value) > max_map_length():
            raise DagDefinitionError(f"{where}: expand() over {len(value)} values, more than the "
                                     f"{max_map_length()} allowed (LEDGER_MAX_MAP_LENGTH)")
        out[arg] = value
    return out


class PartialTask:
    """`BashTask.partial(task_id="b", env=...)`: the shared arguments of a mapped classic task, waiting for
    `.expand(bash_command=[...])`."""

    def __init__(self, cls: type[Task], kwargs: dict[str, Any]) -> None:
        self.cls = cls
        self.kwargs = kwargs

    def expand(self, **expand: Any) -> Task:
        task_id = self.kwargs.get("task_id")
        where = f"task {task_id!r}"
        if not task_id:
            raise DagDefinitionError(f"{self.cls.__name__}.partial() needs a task_id")
        sources = _expand_sources(where, expand, self.cls.mappable_fields, self.kwargs)
        args = {k: v for k, v in self.kwargs.items() if k != "task_id"}
        placeholders: dict[str, Any] = dict.fromkeys(sources, MAPPED)
        task = self.cls(task_id=task_id, **args, **placeholders)  # Airflow's operators take it by name only
        lost = [arg for arg in sources if getattr(task, arg, None) is not MAPPED]
        if lost:  # an instance gets its value by that attribute: one its class keeps otherwise would be ignored
            raise DagDefinitionError(f"{where}: {self.cls.__name__} does not keep its argument {lost[0]!r} as the "
                                     f"attribute {lost[0]!r}, which is how ledger gives a mapped instance its "
                                     "value; map over a @task that calls the code instead")
        task._map(sources, "fields")
        return task

    def expand_kwargs(self, kwargs: Any) -> Task:
        """Airflow's `Operator.partial(...).expand_kwargs([{...}, ...])`: one instance per dict of field values."""
        task_id = self.kwargs.get("task_id")
        if not task_id:
            raise DagDefinitionError(f"{self.cls.__name__}.partial() needs a task_id")
        sources = _kwargs_source(f"task {task_id!r}", kwargs, self.cls.mappable_fields, self.kwargs)
        args = {k: v for k, v in self.kwargs.items() if k != "task_id"}
        # the fields every item sets (and those a constructor requires) stand for the instances' values until
        # then; a field only some items set keeps its default in the others
        given = set.intersection(*(set(item) for item in kwargs)) if isinstance(kwargs, list) and kwargs else set()
        required = {name for klass in self.cls.__mro__ if "__init__" in vars(klass)
                    for name, p in inspect.signature(vars(klass)["__init__"]).parameters.items()
                    if p.default is inspect.Parameter.empty and name in self.cls.mappable_fields}
        placeholders: dict[str, Any] = dict.fromkeys(sorted((given | required) - set(args)), MAPPED)
        task = self.cls(task_id=task_id, **args, **placeholders)
        task._map(sources, "fields")
        return task


class TaskGroup:
    """A group of tasks, as in Airflow: `with TaskGroup("load"):` prefixes the ids of the tasks made inside
    (`load.copy`), groups nest (`load.s3.copy`), and an edge to a group links its roots (tasks with no
    upstream inside it), an edge from a group its leaves. The version records each task's group."""

    def __init__(self, group_id: str, *, dag: DAG | None = None, prefix_group_id: bool = True,
                 tooltip: str = "") -> None:
        if not group_id or not all(c.isalnum() or c in "_-" for c in group_id):
            raise DagDefinitionError(f"invalid group_id {group_id!r}: use letters, digits, '_' and '-'")
        found = dag or (_context_stack[-1] if _context_stack else None)
        if found is None:
            raise DagDefinitionError(f"task group {group_id!r} is not inside a DAG")
        self.dag: DAG = found
        parent: TaskGroup | None = _group_stack[-1] if _group_stack and _group_stack[-1].dag is found else None
        self.group_id: str = f"{parent.group_id}.{group_id}" if parent is not None else group_id
        self.prefix: str = f"{self.group_id}." if prefix_group_id else (parent.prefix if parent is not None else "")
        self.tooltip = tooltip

    def tasks(self) -> list[Task]:
        inside = self.group_id + "."
        return [t for t in self.dag.tasks.values() if t.group is not None
                and (t.group is self or t.group.group_id.startswith(inside))]

    def roots(self) -> list[Task]:
        members = {t.task_id for t in self.tasks()}
        return [t for t in self.tasks() if not (t.upstream_ids & members)]

    def leaves(self) -> list[Task]:
        members = {t.task_id for t in self.tasks()}
        return [t for t in self.tasks() if not (t.downstream_ids & members)]

    def __enter__(self) -> TaskGroup:
        _group_stack.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        _group_stack.pop()

    def __rshift__(self, other: Any) -> Any:
        if isinstance(other, Label):
            return other.after([self])
        for leaf in self.leaves():
            leaf.set_downstream(other)
        return other

    def __lshift__(self, other: Any) -> Any:
        if isinstance(other, Label):
            return other.before([self])
        for root in self.roots():
            root.set_upstream(other)
        return other

    def __rrshift__(self, other: Any) -> TaskGroup:
        self.__lshift__(other)
        return self

    def __rlshift__(self, other: Any) -> TaskGroup:
        self.__rshift__(other)
        return self

    def __repr__(self) -> str:
        return f"<TaskGroup {self.group_id}>"


DAG_MODULE_PREFIX = "ledger_dag_"  # DAG files are imported as modules named this + a digest of their path


def _callable_definition(fn: Callable[..., Any]) -> dict[str, Any]:
    """Name and source digest of a callable, so that changing a task's code changes the DAG version."""
    import hashlib

    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = getattr(getattr(fn, "__code__", None), "co_code", b"").hex()
    module = getattr(fn, "__module__", None) or "?"
    if module.startswith(DAG_MODULE_PREFIX):  # defined in the DAG file: its module name only encodes the file's path
        module = "<dag file>"
    return {
        "callable": f"{module}.{getattr(fn, '__qualname__', repr(fn))}",
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
    }


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value, sort_keys=True)
        return value
    except (TypeError, ValueError):
        return repr(value)


Callback = Callable[[dict[str, Any]], Any]


def callback_list(value: Any, *, where: str) -> list[Callback]:
    """A callback argument as a list: None, one callable (a function or a notifier) or a list of them."""
    if value is None:
        return []
    found = list(value) if isinstance(value, (list, tuple)) else [value]
    for fn in found:
        if not callable(fn):
            raise DagDefinitionError(f"{where} must be a callable or a list of callables, not {fn!r}")
    return found


def describe_callback(fn: Callback) -> dict[str, Any]:
    """How a version records a callback: a notifier by its class and settings, a function by name and source."""
    describe = getattr(fn, "describe", None)
    if callable(describe) and not inspect.isfunction(fn):
        return {"notifier": type(fn).__name__, **describe()}
    return _callable_definition(fn)


def describe_callbacks(callbacks: Mapping[str, list[Callback]]) -> dict[str, list[dict[str, Any]]]:
    return {kind: [describe_callback(fn) for fn in fns] for kind, fns in sorted(callbacks.items())}


class PythonTask(Task):
    """Runs a Python callable; a parameter named `context` receives the run's facts (TaskContext). Its
    return value is passed on (ledger/sdk/xcom.py); `op_args` and `op_kwargs` may hold other tasks' values
    (`other.output`), which makes this task run after them."""

    kind = "python"
    template_fields = ("op_args", "op_kwargs", "templates_dict")
    mappable_fields = ("op_args", "op_kwargs", "templates_dict")

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *, op_args: Sequence[Any] | Mapped = (),
                 op_kwargs: dict[str, Any] | Mapped | None = None,
                 templates_dict: dict[str, Any] | Mapped | None = None, **kwargs: Any) -> None:
        if not callable(python_callable):
            raise DagDefinitionError(f"task {task_id!r}: python_callable must be callable")
        self.python_callable = python_callable
        self.op_args: Any = op_args if isinstance(op_args, Mapped) else [_as_ref(a) for a in op_args]
        self.op_kwargs: Any = op_kwargs if isinstance(op_kwargs, Mapped) else {
            k: _as_ref(v) for k, v in (op_kwargs or {}).items()}
        self.templates_dict: Any = templates_dict if isinstance(templates_dict, Mapped) else dict(
            templates_dict or {})
        super().__init__(task_id, **kwargs)
        after_values(self, [self.op_args, self.op_kwargs])

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        """Call the callable (a task that runs it elsewhere overrides this: ledger/sdk/python_envs.py); a generator
        function's Metadata go to the try's outlet events (ledger.sdk.datasets.run_yielding)."""
        if inspect.isgeneratorfunction(self.python_callable):
            from ledger.sdk.context import current
            from ledger.sdk.datasets import run_yielding

            running = current()
            return run_yielding(self.python_callable, args, kwargs,
                                running[0].outlet_events if running is not None else None)
        return self.python_callable(*args, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**_callable_definition(self.python_callable),
                "op_args": _jsonable(self.op_args), "op_kwargs": _jsonable(self.op_kwargs),
                **({"templates_dict": _jsonable(self.templates_dict)} if self.templates_dict else {})}

    def check_mapped_value(self) -> None:
        for name, kind in (("op_args", list), ("op_kwargs", dict), ("templates_dict", dict)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"the mapped value of {name} must be a {kind.__name__}, not "
                                 f"{type(getattr(self, name)).__name__}")


def after_values(task: Task, arguments: Any, how: str = "takes the value of") -> None:
    """Make `task` run after each task whose value its arguments take (`other.output`)."""
    for ref in refs_in(arguments):
        upstream = task.dag.tasks.get(ref.task_id)
        if upstream is None:
            raise DagDefinitionError(f"task {task.task_id!r} {how} {ref.task_id!r}, which is not in DAG "
                                     f"{task.dag.dag_id!r}")
        upstream.set_downstream(task)


def _as_ref(value: Any) -> Any:
    """A task given as an argument stands for its return value."""
    return value.output if isinstance(value, Task) else value


class BashTask(Task):
    """Runs a shell command with LEDGER_* environment variables describing the run."""

    kind = "bash"
    template_fields = ("bash_command", "env")
    mappable_fields = ("bash_command", "env", "cwd")

    def __init__(self, task_id: str, bash_command: str | Mapped, *, env: dict[str, str] | Mapped | None = None,
                 cwd: str | Mapped | None = None, **kwargs: Any) -> None:
        bash_command = _as_ref(bash_command)
        given = bash_command.value if isinstance(bash_command, LiteralValue) else bash_command
        if not isinstance(given, (Mapped, XComRef)) and (not isinstance(given, str) or not given.strip()):
            raise DagDefinitionError(f"task {task_id!r}: bash_command must be a non-empty string or another "
                                     "task's value")
        self.bash_command: Any = bash_command
        self.env: Any = env if isinstance(env, Mapped) else dict(env or {})
        self.cwd: Any = cwd
        super().__init__(task_id, **kwargs)
        after_values(self, [self.bash_command, self.env])  # another task's value is resolved when a try runs

    def definition(self) -> dict[str, Any]:
        return {"bash_command": _jsonable(self.bash_command), "env": _jsonable(self.env), "cwd": _jsonable(self.cwd)}

    def check_mapped_value(self) -> None:
        if not isinstance(self.bash_command, str) or not self.bash_command.strip():
            raise ValueError(f"the mapped value of bash_command must be a non-empty string, not "
                             f"{self.bash_command!r:.60}")
        if not isinstance(self.env, dict):
            raise ValueError(f"the mapped value of env must be a dict, not {type(self.env).__name__}")


class DAG:
    """A directed acyclic graph of tasks with a schedule. Use as a context manager."""

    def __init__(
        self,
        dag_id: str,
        *,
        schedule: str | timedelta | Schedule | Timetable | Condition | DatasetOrTimeSchedule | Sequence[Condition]
        | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        catchup: bool = False,
        timezone: str | None = None,
        max_active_runs: int = 16,
        max_active_tasks: int = 16,
        default_args: dict[str, Any] | None = None,
        description: str = "",
        tags: Iterable[str] = (),
        on_failure_callback: Callback | list[Callback] | None = None,
        on_success_callback: Callback | list[Callback] | None = None,
        dagrun_timeout: timedelta | None = None,
        deadline: timedelta | None = None,
        on_deadline_missed: Callback | list[Callback] | None = None,
        params: Mapping[str, Any] | None = None,
        on_upstream_rewrite: str = "mark",
    ) -> None:
        problem = key_problem(dag_id)
        if problem is not None:
            raise DagDefinitionError(f"dag_id {_shown_key(dag_id)} {problem}")
        self.dag_id = dag_id
        unknown = sorted(set(default_args or {}) - set(TASK_ARGUMENTS) - set(IGNORED_AIRFLOW_ARGUMENTS))
        if unknown:
            close = difflib.get_close_matches(unknown[0], [*TASK_ARGUMENTS, *IGNORED_AIRFLOW_ARGUMENTS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(TASK_ARGUMENTS)}"
            raise DagDefinitionError(f"DAG {dag_id!r}: unknown default_args key {unknown[0]!r}{hint}")
        self.ignored_args = sorted(k for k in (default_args or {}) if k in IGNORED_AIRFLOW_ARGUMENTS)
        self.default_args = {k: v for k, v in (default_args or {}).items() if k in TASK_ARGUMENTS}
        # scheduled on datasets (ledger/sdk/datasets.py): the condition, and the time schedule of a dataset-or-time one
        self.datasets: Condition | None = None
        time_schedule: Any = schedule
        try:
            if isinstance(schedule, DatasetOrTimeSchedule):
                self.datasets, time_schedule = schedule.condition, schedule.timetable
            elif is_dataset_schedule(schedule):
                self.datasets, time_schedule = as_condition(schedule), None
            if self.datasets is not None:
                check_condition(self.datasets, where=f"DAG {dag_id!r}")
        except DatasetError as exc:
            raise DagDefinitionError(str(exc)) from None
        if on_upstream_rewrite not in UPSTREAM_REWRITE:
            raise DagDefinitionError(f"DAG {dag_id!r}: on_upstream_rewrite must be one of "
                                     f"{', '.join(UPSTREAM_REWRITE)}, not {on_upstream_rewrite!r}")
        self.on_upstream_rewrite = on_upstream_rewrite
        if start_date is None:
            if time_schedule is not None:
                raise DagDefinitionError(f"DAG {dag_id!r}: a scheduled DAG needs a start_date (the first interval "
                                         "it runs)")
            start_date = pendulum.datetime(1970, 1, 1, tz="UTC")
        tz = _timezone_name(start_date)
        if tz is None:
            raise DagDefinitionError(
                f"DAG {dag_id!r}: start_date {start_date.isoformat()} is naive; give it a timezone, "
                "e.g. pendulum.datetime(2024, 1, 1, tz='UTC')")
        if end_date is not None and end_date.tzinfo is None:
            raise DagDefinitionError(f"DAG {dag_id!r}: end_date {end_date.isoformat()} is naive")
        self.timezone = timezone or tz
        try:
            pendulum.timezone(self.timezone)
        except Exception:
            raise DagDefinitionError(f"DAG {dag_id!r}: unknown timezone {self.timezone!r}") from None
        self.start_date = _to_utc(start_date)
        self.end_date = _to_utc(end_date) if end_date is not None else None
        if self.end_date is not None and self.end_date < self.start_date:
            raise DagDefinitionError(f"DAG {dag_id!r}: end_date is before start_date")
        try:
            self.schedule: Schedule = to_schedule(time_schedule, timezone=self.timezone, start_date=self.start_date)
        except ScheduleError as exc:
            raise DagDefinitionError(f"DAG {dag_id!r}: {exc}") from None
        self.catchup = bool(catchup)
        if max_active_runs < 1 or max_active_tasks < 1:
            raise DagDefinitionError(f"DAG {dag_id!r}: max_active_runs and max_active_tasks must be >= 1")
        self.max_active_runs = max_active_runs
        self.max_active_tasks = max_active_tasks
        self.description = description
        self.tags = sorted(tags)
        for name, value in (("dagrun_timeout", dagrun_timeout), ("deadline", deadline)):
            if value is not None and (not isinstance(value, timedelta) or value.total_seconds() <= 0):
                raise DagDefinitionError(f"DAG {dag_id!r}: {name} must be a positive timedelta")
        self.dagrun_timeout = dagrun_timeout
        self.deadline = deadline
        given = {"on_failure_callback": on_failure_callback, "on_success_callback": on_success_callback,
                 "on_deadline_missed": on_deadline_missed}
        self.callbacks: dict[str, list[Callback]] = {
            kind: fns for arg, kind in DAG_CALLBACKS.items()
            if (fns := callback_list(given[arg], where=f"DAG {dag_id!r}: {arg}"))}
        self.params = as_params(params, where=f"DAG {dag_id!r}")
        self.tasks: dict[str, Task] = {}
        self.edge_labels: dict[tuple[str, str], str] = {}  # (upstream, downstream) -> its Label
        self.fileloc: str | None = None
        self.source_code: str | None = None  # the text of the file that defined it (set by the loader)
        self.code: CodeManifest | None = None  # its file and the helpers it imports (set by the loader)
        created.append(self)

    def add_task(self, task: Task) -> None:
        if task.task_id in self.tasks:
            raise DagDefinitionError(f"DAG {self.dag_id!r}: duplicate task_id {task.task_id!r}")
        self.tasks[task.task_id] = task

    def __enter__(self) -> DAG:
        _context_stack.append(self)
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        _context_stack.pop()
        if exc_type is None:
            self.validate()

    def validate(self) -> None:
        """Refuse cycles; called when the `with` block ends and again when the file is loaded."""
        upstream = {tid: sorted(self.tasks[tid].upstream_ids) for tid in sorted(self.tasks)}
        try:
            graphlib.TopologicalSorter(upstream).prepare()
        except graphlib.CycleError as exc:  # its args[1]: the cycle, each task upstream of the next
            raise DagDefinitionError(f"DAG {self.dag_id!r} has a cycle: {' >> '.join(exc.args[1])}") from None


    def about(self) -> dict[str, Any]:
        """What the version records about the DAG for people beyond its structure (Airflow's DAG: its display
        name, description, docs, tags, owner); only what is given, so that versions keep their hashes."""
        return {}

    def __repr__(self) -> str:
        return f"<DAG {self.dag_id}>"


F = TypeVar("F", bound=Callable[..., Any])


class TaskFunction:
    """A `@task` function: calling it inside a DAG adds the task (its arguments may be other tasks' values);
    `.partial(y=1)` fixes arguments every mapped instance shares and `.expand(x=[...])` (or another task's
    value) adds a mapped task, as Airflow's."""

    def __init__(self, func: Callable[..., Any], task_id: str | None, task_kwargs: dict[str, Any],
                 partial: dict[str, Any] | None = None) -> None:
        self.func = func
        self.task_id = task_id or func.__name__
        self.task_kwargs = task_kwargs
        self.partial_kwargs = dict(partial or {})
        functools.update_wrapper(self, func)

    # the task it adds (@task.virtualenv: ledger/sdk/python_envs.py; @task.branch, @task.sensor:
    # ledger/sdk/branching.py)
    task_class: Callable[..., Any] = PythonTask

    def __call__(self, *op_args: Any, **op_kwargs: Any) -> PythonTask:
        return self._make(op_args=op_args, op_kwargs=op_kwargs)

    def _make(self, **args: Any) -> PythonTask:
        """The task it adds, with these arguments (op_args, op_kwargs)."""
        made: PythonTask = self.task_class(self.task_id, self.func, **args, **self.task_kwargs)
        return made

    def override(self, **task_kwargs: Any) -> TaskFunction:
        """Airflow's `f.override(task_id=..., retries=...)`: the same function as another task, or with other
        task arguments."""
        task_id = task_kwargs.pop("task_id", self.task_id)
        return type(self)(self.func, task_id, {**self.task_kwargs, **task_kwargs}, self.partial_kwargs)

    def partial(self, **kwargs: Any) -> TaskFunction:
        self._check_names(kwargs, "partial")
        return type(self)(self.func, self.task_id, self.task_kwargs, {**self.partial_kwargs, **kwargs})

    def expand(self, **expand: Any) -> PythonTask:
        sources = _expand_sources(f"task {self.task_id!r}", expand, self._parameters(), self.partial_kwargs)
        made = self._make(op_kwargs=self.partial_kwargs)
        made._map(sources, "call")
        return made

    def expand_kwargs(self, kwargs: Any) -> PythonTask:
        """Airflow's `f.expand_kwargs([{"x": 1, "y": 2}, ...])`: one instance per dict of arguments."""
        sources = _kwargs_source(f"task {self.task_id!r}", kwargs, self._parameters(), self.partial_kwargs)
        made = self._make(op_kwargs=self.partial_kwargs)
        made._map(sources, "call")
        return made

    def _parameters(self) -> list[str] | None:
        """The names the function takes by keyword (None: any, it has **kwargs)."""
        params = inspect.signature(self.func).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None
        return [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     inspect.Parameter.KEYWORD_ONLY) and p.name != "context"]

    def _check_names(self, kwargs: Mapping[str, Any], method: str) -> None:
        known = self._parameters()
        for name in kwargs:
            if known is not None and name not in known:
                raise DagDefinitionError(f"task {self.task_id!r}: {method}() got an unknown argument {name!r}; it "
                                         f"takes: {', '.join(known) or 'none'}")


@overload
def task(fn: Callable[..., Any], /) -> TaskFunction: ...
@overload
def task(*, task_id: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], TaskFunction]: ...


def task(fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
         **kwargs: Any) -> Any:
    """Decorator form of PythonTask: calling the decorated function inside a DAG adds the task."""

    def wrap(func: Callable[..., Any]) -> TaskFunction:
        return TaskFunction(func, task_id, kwargs)

    return wrap(fn) if fn is not None else wrap
