"""Waiting for another DAG's run (ExternalTaskSensor) and clearing it with this one (ExternalTaskMarker), as
Airflow's: the other DAG's live run at the same logical date (or shifted by `execution_delta`, or chosen by
`execution_date_fn`), its tasks' states (named, or all of a task group's) or, with no task named, the run's own
state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pendulum

from ledger.core.errors import DagDefinitionError, SkipTask
from ledger.core.states import RunType
from ledger.sdk.dag import Task, _callable_definition
from ledger.sdk.ledger_client import client
from ledger.sdk.sensors import BaseSensor

if TYPE_CHECKING:
    from ledger.sdk.context import TaskContext

WAIT, DONE, FAILED, SKIPPED = "wait", "done", "failed", "skipped"


def external_outcome(found: Sequence[str], *, allowed: Iterable[str], failed: Iterable[str],
                     skipped: Iterable[str]) -> str:
    """What the states found (one per task instance watched; empty: nothing there yet) mean for the sensor:
    FAILED when any is in `failed`, SKIPPED when any is in `skipped`, DONE when all are `allowed`, else WAIT."""
    if any(s in set(failed) for s in found):
        return FAILED
    if any(s in set(skipped) for s in found):
        return SKIPPED
    return DONE if found and all(s in set(allowed) for s in found) else WAIT


def group_members(task_ids: Iterable[str], group_id: str) -> list[str]:
    """The tasks of task group `group_id` (and of the groups inside it) among `task_ids`: a task's id in a group
    starts with the group's id and a dot, as Airflow's group prefix makes it."""
    return sorted(t for t in task_ids if t.startswith(group_id + "."))


class ExternalTaskFailed(Exception):
    """An external task (or run) the sensor watches is in one of its failed_states."""


class ExternalTaskSensor(BaseSensor):
    """Waits for tasks of another DAG (`external_task_id` / `external_task_ids`, or every task of the task group
    `external_task_group_id`; none: the run itself) in the run
    at this run's logical date (minus `execution_delta`, or `execution_date_fn(logical_date)`) to reach
    `allowed_states`; fails on `failed_states`, is skipped on `skipped_states` (Airflow's ExternalTaskSensor)."""

    def __init__(self, task_id: str, *, external_dag_id: str, external_task_id: str | None = None,
                 external_task_ids: Sequence[str] | None = None, allowed_states: Iterable[str] | None = None,
                 failed_states: Iterable[str] | None = None, skipped_states: Iterable[str] | None = None,
                 execution_delta: dt.timedelta | None = None,
                 execution_date_fn: Callable[..., dt.datetime] | None = None, check_existence: bool = False,
                 external_task_group_id: str | None = None, **kwargs: Any) -> None:
        if external_task_id is not None and external_task_ids is not None:
            raise DagDefinitionError(f"task {task_id!r}: give external_task_id or external_task_ids, not both")
        if execution_delta is not None and execution_date_fn is not None:
            raise DagDefinitionError(f"task {task_id!r}: give execution_delta or execution_date_fn, not both")
        if external_task_group_id is not None and (external_task_id is not None or external_task_ids is not None):
            raise DagDefinitionError(f"task {task_id!r}: give external_task_group_id or external_task_id(s), not "
                                     "both")
        self.external_dag_id = external_dag_id
        self.external_task_group_id = external_task_group_id
        self.external_task_ids = [external_task_id] if external_task_id is not None else list(external_task_ids or [])
        self.allowed_states = list(allowed_states or ["success"])
        self.failed_states = list(failed_states or [])
        self.skipped_states = list(skipped_states or [])
        self.execution_delta = execution_delta
        self.execution_date_fn = execution_date_fn
        self.check_existence = bool(check_existence)
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"external_dag_id": self.external_dag_id, "external_task_ids": self.external_task_ids,
                "allowed_states": self.allowed_states, "failed_states": self.failed_states,
                "skipped_states": self.skipped_states,
                "execution_delta": self.execution_delta.total_seconds() if self.execution_delta else None,
                **({"external_task_group_id": self.external_task_group_id} if self.external_task_group_id else {}),
                **({"execution_date_fn": _callable_definition(self.execution_date_fn)}
                   if self.execution_date_fn else {})}

    def target_date(self, context: TaskContext) -> dt.datetime:
        at = pendulum.instance(context.logical_date)
        if self.execution_delta is not None:
            return at - self.execution_delta
        if self.execution_date_fn is not None:
            return pendulum.instance(self.execution_date_fn(at)).in_timezone("UTC")
        return at

    def poke(self, context: TaskContext) -> bool:
        at = self.target_date(context)
        found = client().states_at(self.external_dag_id, at)
        where = f"{self.external_dag_id} at {at.isoformat()}"
        if found is None:
            if context.run_type == RunType.TEST.value:  # a test waits on no one: `ledger dags test` keeps no runs
                raise ExternalTaskFailed(
                    f"no run of {where}: `ledger dags test` keeps no runs, so a test of {self.external_dag_id} "
                    f"made none; test it with --record first (`ledger dags test {self.external_dag_id} "
                    f"--record`), or trigger it (decision 0280)")
            print(f"[ledger] no run of {where} yet", flush=True)
            return False
        run_state, states = found
        if self.external_task_group_id is not None:
            members = group_members(states, self.external_task_group_id)
            if not members and self.check_existence:
                raise ExternalTaskFailed(f"the run of {where} has no task group {self.external_task_group_id!r}")
            watched = [s for t in members for s in states[t]]
        elif self.external_task_ids:
            missing = [t for t in self.external_task_ids if t not in states]
            if missing and self.check_existence:
                raise ExternalTaskFailed(f"the run of {where} has no task {missing[0]!r}")
            watched = [s for t in self.external_task_ids for s in states.get(t, [])]
            if missing:
                watched = []
        else:
            watched = [run_state]
        outcome = external_outcome(watched, allowed=self.allowed_states, failed=self.failed_states,
                                   skipped=self.skipped_states)
        print(f"[ledger] {where}: {', '.join(watched) or 'not there'} -> {outcome}", flush=True)
        if outcome == FAILED:
            if self.soft_fail:
                raise SkipTask(f"{where} is in a failed state ({', '.join(watched)}); soft_fail skips it")
            raise ExternalTaskFailed(f"{where} is in a failed state: {', '.join(watched)}")
        if outcome == SKIPPED:
            raise SkipTask(f"{where} is in a skipped state: {', '.join(watched)}")
        return outcome == DONE


class ExternalTaskMarker(Task):
    """Does nothing when it runs; clearing it (`ledger tasks clear`) clears `external_task_id` of
    `external_dag_id` and its downstream tasks in the run at the same logical date (or `execution_date`, an ISO
    datetime), up to `recursion_depth` markers deep (Airflow's ExternalTaskMarker)."""

    kind = "external_task_marker"

    def __init__(self, task_id: str, *, external_dag_id: str, external_task_id: str,
                 execution_date: str | dt.datetime | None = None, recursion_depth: int = 10,
                 **kwargs: Any) -> None:
        if recursion_depth <= 0:
            raise DagDefinitionError(f"task {task_id!r}: recursion_depth must be positive")
        self.external_dag_id, self.external_task_id = external_dag_id, external_task_id
        if isinstance(execution_date, dt.datetime):
            execution_date = execution_date.isoformat()
        # the default template, {{ logical_date.isoformat() }}, is this run's date: recorded as none
        self.execution_date = None if execution_date is None or "{{" in execution_date else execution_date
        self.recursion_depth = recursion_depth
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"external_dag_id": self.external_dag_id, "external_task_id": self.external_task_id,
                "execution_date": self.execution_date, "recursion_depth": self.recursion_depth}

    def execute(self, context: TaskContext) -> None:
        return None
