"""Airflow's helpers for edges and its enums: chain, cross_downstream, chain_linear, TriggerRule (WeekDay is
ledger.sdk.branching's); its exceptions; `airflow.utils.dates` and `airflow.utils.timezone`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pendulum

from ledger.core.errors import DagDefinitionError, FailWithoutRetry, SensorTimeout, SkipTask
from ledger.sdk import dag as ledger_dag
from ledger.sdk.xcom import XComRef


def _node(item: Any) -> Any:
    """A task, a group, or the task an XComArg stands for."""
    if isinstance(item, XComRef):
        dag = ledger_dag._context_stack[-1] if ledger_dag._context_stack else None
        if dag is None or item.task_id not in dag.tasks:
            raise DagDefinitionError(f"chain: the value of {item.task_id!r} is not of a task in this DAG")
        return dag.tasks[item.task_id]
    return item


def chain(*elements: Any) -> None:
    """`chain(a, [b, c], d)`: each element upstream of the next; two lists next to each other must be of equal
    length and are linked pairwise (b1 >> c1, b2 >> c2), as Airflow's chain."""
    for up, down in zip(elements, elements[1:], strict=False):
        ups = up if isinstance(up, list | tuple) else None
        downs = down if isinstance(down, list | tuple) else None
        if ups is not None and downs is not None:
            if len(ups) != len(downs):
                raise DagDefinitionError(f"chain: lists next to each other must have the same length, not "
                                         f"{len(ups)} and {len(downs)}")
            for a, b in zip(ups, downs, strict=True):
                _node(a) >> _node(b)
        elif ups is not None:
            for a in ups:
                _node(a) >> _node(down)
        elif downs is not None:
            for b in downs:
                _node(up) >> _node(b)
        else:
            _node(up) >> _node(down)


def cross_downstream(from_tasks: Sequence[Any], to_tasks: Any) -> None:
    """Every task of `from_tasks` upstream of every task of `to_tasks`."""
    targets = to_tasks if isinstance(to_tasks, list | tuple) else [to_tasks]
    for a in from_tasks:
        for b in targets:
            _node(a) >> _node(b)


def chain_linear(*elements: Any) -> None:
    """Every task of each element upstream of every task of the next (Airflow's chain_linear)."""
    if len(elements) < 2:
        raise DagDefinitionError("chain_linear needs at least two elements")
    for up, down in zip(elements, elements[1:], strict=False):
        ups = up if isinstance(up, list | tuple) else [up]
        downs = down if isinstance(down, list | tuple) else [down]
        for a in ups:
            for b in downs:
                _node(a) >> _node(b)


class TriggerRule(StrEnum):
    """Airflow's trigger rules (the strings ledger's tasks take)."""

    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ALL_DONE_MIN_ONE_SUCCESS = "all_done_min_one_success"
    ALL_SKIPPED = "all_skipped"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    ONE_DONE = "one_done"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"

    @classmethod
    def is_valid(cls, trigger_rule: str) -> bool:
        return trigger_rule in cls.all_triggers()

    @classmethod
    def all_triggers(cls) -> set[str]:
        return {rule.value for rule in cls}


# -- exceptions ------------------------------------------------------------------------------------

class AirflowException(Exception):
    """Airflow's base exception: raised in a task, the try fails."""


AirflowSkipException = SkipTask


class AirflowFailException(AirflowException, FailWithoutRetry):
    """Raised in a task: the try fails without spending its remaining retries, as in Airflow."""


class AirflowNotFoundException(AirflowException):
    pass


class AirflowBadRequest(AirflowException):
    pass


class AirflowConfigException(AirflowException):
    pass


class AirflowTaskTimeout(AirflowException):
    pass


# what ledger's sensors raise when their timeout passes: the task fails without retry
AirflowSensorTimeout = SensorTimeout


class DagRunAlreadyExists(AirflowException):
    pass


class ParamValidationError(AirflowException):
    pass


class DuplicateTaskIdFound(AirflowException):
    pass


class TaskDeferred(BaseException):
    pass


# -- airflow.utils.dates / airflow.utils.timezone -------------------------------------------------------

def days_ago(n: int, hour: int = 0, minute: int = 0, second: int = 0, microsecond: int = 0) -> pendulum.DateTime:
    """Midnight UTC today minus `n` days (Airflow's deprecated days_ago)."""
    today = pendulum.now("UTC").replace(hour=hour, minute=minute, second=second, microsecond=microsecond)
    return today.subtract(days=n)


def utcnow() -> pendulum.DateTime:
    return pendulum.now("UTC")


def make_aware(value: dt.datetime, timezone: Any = None) -> pendulum.DateTime:
    return pendulum.instance(value, tz=timezone or "UTC") if value.tzinfo is None else pendulum.instance(value)


def datetime(*args: Any, **kwargs: Any) -> pendulum.DateTime:
    """airflow.utils.timezone.datetime: a datetime in UTC unless given a tzinfo."""
    tz = kwargs.pop("tzinfo", None) or "UTC"
    return pendulum.instance(dt.datetime(*args, **kwargs), tz=tz)


utc = pendulum.timezone("UTC")


# -- airflow.utils.state -------------------------------------------------------------------------------

class DagRunState(StrEnum):
    """Airflow's run states (ledger's run states have the same names for these)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


class TaskInstanceState(StrEnum):
    """Airflow's task instance states that ledger's task instances also take."""

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    UP_FOR_RETRY = "up_for_retry"
    UPSTREAM_FAILED = "upstream_failed"
    SKIPPED = "skipped"
    REMOVED = "removed"


class State:
    """Airflow 2's State: the states by their old names."""

    QUEUED = DagRunState.QUEUED
    RUNNING = DagRunState.RUNNING
    SUCCESS = DagRunState.SUCCESS
    FAILED = DagRunState.FAILED
    SCHEDULED = TaskInstanceState.SCHEDULED
    UP_FOR_RETRY = TaskInstanceState.UP_FOR_RETRY
    UPSTREAM_FAILED = TaskInstanceState.UPSTREAM_FAILED
    SKIPPED = TaskInstanceState.SKIPPED
    REMOVED = TaskInstanceState.REMOVED


# -- airflow.utils.dag_parsing_context -----------------------------------------------------------------

@dataclass(frozen=True)
class ParsingContext:
    """What Airflow's get_parsing_context() tells a DAG file: the DAG and task a try is importing it for. ledger
    imports a file whole, with its DAGs folder or version snapshot, so both are None: generate every DAG."""

    dag_id: str | None = None
    task_id: str | None = None


def get_parsing_context() -> ParsingContext:
    return ParsingContext()
