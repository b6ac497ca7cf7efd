"""Branch and short-circuit tasks, and setup / teardown decorators: the authoring side of ledger/core/flow.py.

    with DAG("report", ...):
        pick = BranchPythonTask("pick", python_callable=lambda: "weekday" if ... else "weekend")
        pick >> [BashTask("weekday", ...), BashTask("weekend", ...)]

A branch task returns the task id(s) to follow (a task group's id follows the group's roots; None follows
nothing); the other tasks directly downstream of it are skipped and the skip spreads by trigger rules. A
short-circuit task returns a condition: falsy skips what is downstream of it. The try records the choice as the
value `skipmixin_key` (Airflow's key); the scheduler's rules (ledger/core/flow.py) read it.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pendulum

from ledger.core.errors import DagDefinitionError
from ledger.core.flow import BRANCH, FLOW_KEY, FOLLOWED, SHORT_CIRCUIT, SKIPPED, branch_targets, short_circuit_skips
from ledger.infra.clock import Clock, SystemClock
from ledger.sdk.dag import PythonTask, Task, TaskFunction

if TYPE_CHECKING:
    from ledger.sdk.context import TaskContext


class WeekDay(enum.IntEnum):
    """Days of the week, Monday = 1 (ISO), as Airflow's `WeekDay`."""

    MONDAY = 1
    TUESDAY = 2
    WEDNESDAY = 3
    THURSDAY = 4
    FRIDAY = 5
    SATURDAY = 6
    SUNDAY = 7

    @classmethod
    def get_weekday_number(cls, week_day_str: str) -> int:
        """The number of a day given by name ("Monday", "monday", "MONDAY")."""
        name = week_day_str.upper()
        if name not in cls.__members__:
            raise AttributeError(f'Invalid Week Day passed: "{week_day_str}"')
        return cls[name].value

    @classmethod
    def convert(cls, day: str | WeekDay) -> int:
        return cls.get_weekday_number(day) if isinstance(day, str) else int(day)

    @classmethod
    def validate_week_day(cls, week_day: str | WeekDay | Iterable[str | WeekDay]) -> set[int]:
        """The day numbers of a day or a collection of days (names or WeekDay members)."""
        if isinstance(week_day, (str, WeekDay)):
            return {cls.convert(week_day)}
        try:
            days = list(week_day)
        except TypeError:
            raise TypeError(f"Unsupported Type for week_day parameter: {type(week_day).__name__}; it takes a day "
                            "name, a WeekDay, or a collection of them") from None
        return {cls.convert(day) for day in days}


# -- what a try records ----------------------------------------------------------------------------------------

def _groups(dag: Any) -> dict[str, list[str]]:
    """Task group id -> the ids of its root tasks, for every group of the DAG's tasks (and the groups around
    them)."""
    out: dict[str, list[str]] = {}
    for task in dag.tasks.values():
        group = task.group
        if group is None:
            continue
        name = group.group_id
        while name:
            out.setdefault(name, [])
            name = name.rpartition(".")[0]
    for name in out:
        members = [t for t in dag.tasks.values() if t.group is not None
                   and (t.group.group_id == name or t.group.group_id.startswith(name + "."))]
        ids = {t.task_id for t in members}
        out[name] = sorted(t.task_id for t in members if not (t.upstream_ids & ids))
    return out


def record_choice(task: Task, context: TaskContext, returned: Any) -> str:
    """Record a branch's or short-circuit's choice as the try's value `skipmixin_key`; returns a line for the log.
    ValueError (the try fails) for a branch that names no task of its DAG."""
    dag = task.dag
    if task.flow == BRANCH:
        followed = branch_targets(returned, dag.tasks, _groups(dag))
        context.xcom_push(FLOW_KEY, {FOLLOWED: followed})
        return f"branch: following {', '.join(followed) or 'nothing'}"
    if returned:
        context.xcom_push(FLOW_KEY, {SKIPPED: []})
        return f"short-circuit: condition {returned!r:.60} is truthy; downstream tasks proceed"
    downstream = {tid: sorted(t.downstream_ids) for tid, t in dag.tasks.items()}
    teardowns = [tid for tid, t in dag.tasks.items() if t.is_teardown]
    skipped = short_circuit_skips(downstream, teardowns, task.task_id,
                                  ignore_downstream_trigger_rules=getattr(task, "ignore_downstream_trigger_rules",
                                                                          True))
    context.xcom_push(FLOW_KEY, {SKIPPED: skipped})
    return f"short-circuit: condition {returned!r:.60} is falsy; skipping {', '.join(skipped) or 'nothing'}"


# -- tasks -----------------------------------------------------------------------------------------------------

class BranchPythonTask(PythonTask):
    """A Python callable that returns the task id(s) to follow (Airflow's BranchPythonOperator)."""

    flow = BRANCH


class ShortCircuitTask(PythonTask):
    """A Python callable whose falsy result skips the tasks downstream (Airflow's ShortCircuitOperator): all of
    them, ignoring their trigger rules (`ignore_downstream_trigger_rules=True`, the default), or only the direct
    downstream tasks, the trigger rules deciding the rest."""

    flow = SHORT_CIRCUIT

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *,
                 ignore_downstream_trigger_rules: bool = True, **kwargs: Any) -> None:
        self.ignore_downstream_trigger_rules = bool(ignore_downstream_trigger_rules)
        super().__init__(task_id, python_callable, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "ignore_downstream_trigger_rules": self.ignore_downstream_trigger_rules}


def _ids(value: str | Iterable[str] | None, where: str) -> list[str]:
    if value is None:
        return []
    found = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) for v in found):
        raise DagDefinitionError(f"{where} takes a task id or a list of task ids")
    return found


class _ConditionBranch(Task):
    """A branch that follows `follow_task_ids_if_true` when its condition holds, else `follow_task_ids_if_false`."""

    flow = BRANCH
    clock: Clock = SystemClock()

    def __init__(self, task_id: str, *, follow_task_ids_if_true: str | Iterable[str],
                 follow_task_ids_if_false: str | Iterable[str], use_task_logical_date: bool = False,
                 **kwargs: Any) -> None:
        where = f"task {task_id!r}"
        self.follow_task_ids_if_true = _ids(follow_task_ids_if_true, f"{where}: follow_task_ids_if_true")
        self.follow_task_ids_if_false = _ids(follow_task_ids_if_false, f"{where}: follow_task_ids_if_false")
        self.use_task_logical_date = bool(kwargs.pop("use_task_execution_day", use_task_logical_date))
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"follow_task_ids_if_true": self.follow_task_ids_if_true,
                "follow_task_ids_if_false": self.follow_task_ids_if_false,
                "use_task_logical_date": self.use_task_logical_date}

    def when(self, context: TaskContext) -> pendulum.DateTime:
        """The moment the condition is about: the run's logical date, or now, in the DAG's timezone."""
        at = pendulum.instance(context.logical_date) if self.use_task_logical_date else self.clock.now()
        return at.in_timezone(self.dag.timezone)

    def holds(self, at: pendulum.DateTime) -> bool:
        raise NotImplementedError

    def execute(self, context: TaskContext) -> list[str]:
        at = self.when(context)
        chosen = self.follow_task_ids_if_true if self.holds(at) else self.follow_task_ids_if_false
        print(f"[ledger] {record_choice(self, context, chosen)} ({at.isoformat()})", flush=True)
        return chosen


Moment = dt.datetime | dt.time


def in_window(at: dt.datetime, lower: Moment | None, upper: Moment | None) -> bool:
    """Whether `at` (aware) is within [lower, upper] (Airflow's BranchDateTimeOperator): a time of day is on
    `at`'s date, a naive datetime in `at`'s timezone; with two times, an upper before the lower is the next
    day's."""
    def as_datetime(value: Moment | None) -> dt.datetime | None:
        if value is None:
            return None
        if isinstance(value, dt.time):
            value = dt.datetime.combine(at.date(), value)
        return value if value.tzinfo is not None else value.replace(tzinfo=at.tzinfo)

    low, high = as_datetime(lower), as_datetime(upper)
    if isinstance(lower, dt.time) and isinstance(upper, dt.time) and low is not None and high is not None \
            and high < low:
        high += dt.timedelta(days=1)
    if high is not None and high < at:
        return False
    return not (low is not None and low > at)


def is_latest(interval_end: dt.datetime, next_interval_end: dt.datetime, now: dt.datetime) -> bool:
    """Whether a run whose data interval ends at `interval_end` is the latest (Airflow's LatestOnlyOperator): now
    is after that end and not after the end of the next interval."""
    return interval_end < now <= next_interval_end


class BranchDateTimeTask(_ConditionBranch):
    kind = "branch_datetime"
    """Follows `follow_task_ids_if_true` when now (or the logical date) is between `target_lower` and
    `target_upper` (datetimes or times of day; one may be None), as Airflow's BranchDateTimeOperator."""

    def __init__(self, task_id: str, *, target_lower: Moment | None = None, target_upper: Moment | None = None,
                 **kwargs: Any) -> None:
        if target_lower is None and target_upper is None:
            raise DagDefinitionError(f"task {task_id!r}: give target_lower, target_upper or both")
        for name, value in (("target_lower", target_lower), ("target_upper", target_upper)):
            if value is not None and not isinstance(value, (dt.datetime, dt.time)):
                raise DagDefinitionError(f"task {task_id!r}: {name} must be a datetime or a time, not "
                                         f"{type(value).__name__}")
        self.target_lower, self.target_upper = target_lower, target_upper
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "target_lower": _iso(self.target_lower),
                "target_upper": _iso(self.target_upper)}

    def holds(self, at: pendulum.DateTime) -> bool:
        return in_window(at, self.target_lower, self.target_upper)


def _iso(value: Moment | None) -> str | None:
    return None if value is None else value.isoformat()


class BranchDayOfWeekTask(_ConditionBranch):
    kind = "branch_day_of_week"
    """Follows `follow_task_ids_if_true` on the given day(s) of the week (names or WeekDay members), as Airflow's
    BranchDayOfWeekOperator."""

    def __init__(self, task_id: str, *, week_day: str | WeekDay | Iterable[str | WeekDay], **kwargs: Any) -> None:
        try:
            self.week_day = sorted(WeekDay.validate_week_day(week_day))
        except (AttributeError, TypeError) as exc:
            raise DagDefinitionError(f"task {task_id!r}: {exc}") from None
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "week_day": self.week_day}

    def holds(self, at: pendulum.DateTime) -> bool:
        return at.isoweekday() in self.week_day


class BaseBranchTask(Task):
    """A task whose `choose_branch(context)` returns the task id(s) to follow (Airflow's BaseBranchOperator)."""

    flow = BRANCH

    def choose_branch(self, context: TaskContext) -> str | Iterable[str] | None:
        raise NotImplementedError(f"{type(self).__name__} must define choose_branch(context)")

    def execute(self, context: TaskContext) -> Any:
        chosen = self.choose_branch(context)
        print(f"[ledger] {record_choice(self, context, chosen)}", flush=True)
        return chosen


# -- decorators --------------------------------------------------------------------------------------------------

class FlowTaskFunction(TaskFunction):
    """A decorated function that makes a task of another class than PythonTask (`@task.branch`,
    `@task.short_circuit`), or a setup or teardown task (`@setup`, `@teardown`)."""

    def __init__(self, func: Callable[..., Any], task_id: str | None, task_kwargs: dict[str, Any],
                 partial: dict[str, Any] | None = None, *, task_class: Callable[..., Task] = PythonTask,
                 role: str | None = None) -> None:
        super().__init__(func, task_id, task_kwargs, partial)
        self.task_class = task_class
        self.role = role

    def _make(self, **args: Any) -> Any:
        kwargs = dict(self.task_kwargs)
        fail_dagrun = kwargs.pop("on_failure_fail_dagrun", None)
        made = self.task_class(self.task_id, self.func, **args, **kwargs)
        if self.role == "setup":
            made.as_setup()
        elif self.role == "teardown":
            made.as_teardown(on_failure_fail_dagrun=fail_dagrun)
        return made

    def override(self, **task_kwargs: Any) -> FlowTaskFunction:
        task_id = task_kwargs.pop("task_id", self.task_id)
        return FlowTaskFunction(self.func, task_id, {**self.task_kwargs, **task_kwargs}, self.partial_kwargs,
                                task_class=self.task_class, role=self.role)

    def expand(self, **expand: Any) -> PythonTask:
        raise DagDefinitionError(f"task {self.task_id!r}: a {self.role or getattr(self.task_class, '__name__', '')} "
                                 "task cannot be mapped")

    def expand_kwargs(self, kwargs: Any) -> PythonTask:
        return self.expand()


def _decorator(task_class: Callable[..., Task], role: str | None = None) -> Callable[..., Any]:
    def decorate(fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        def wrap(func: Callable[..., Any]) -> FlowTaskFunction:
            return FlowTaskFunction(func, task_id, kwargs, task_class=task_class, role=role)

        return wrap(fn) if fn is not None else wrap

    return decorate


decorator = _decorator
branch_task = _decorator(BranchPythonTask)
short_circuit_task = _decorator(ShortCircuitTask)
setup = _decorator(PythonTask, "setup")
teardown = _decorator(PythonTask, "teardown")


__all__ = ["BaseBranchTask", "BranchDateTimeTask", "BranchDayOfWeekTask", "BranchPythonTask", "FlowTaskFunction",
           "ShortCircuitTask", "WeekDay", "branch_task", "in_window", "record_choice", "setup", "short_circuit_task",
           "teardown"]
