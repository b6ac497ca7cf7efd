"""What a try receives, built in one place for whoever runs the run: the scheduler's job (scheduler/loop/job.py,
from the database) and `ledger dags test` (scheduler/runtime/local_testing.py, from memory) describe the run with
a `RunGives` and call `work_item`, so that a try gets the same context values, passed-on values and inlet events
from both; only where the facts come from differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.core.versions import TaskSpec
from ledger.scheduler.executors.base import WorkItem


@dataclass(frozen=True)
class RunGives:
    """What one run gives every try of it."""

    run_id: int
    dag_id: str
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    dag_version: str
    run_type: str
    fileloc: str
    code_root: str | None
    code_captured: bool = True
    conf: Mapping[str, Any] = field(default_factory=dict)
    prev_interval: tuple[str, str] | None = None
    prev_success: tuple[str, str, str | None, str | None] | None = None
    triggering_events: dict[str, list[dict[str, Any]]] | None = None  # a dataset-triggered run's, by dataset
    started: str | None = None  # when the run started (ISO), if it has


def work_item(run: RunGives, task: TaskSpec, *, ti_id: int, try_number: int, map_index: int, log_path: str,
              xcom: dict[str, dict[str, Any]], inlet_events: dict[str, list[dict[str, Any]]] | None,
              priority_weight: int = 1, signal: dict[str, Any] | None = None, database: str = "",
              max_tries: int | None = None) -> WorkItem:
    """The work item of one try of `task` in `run`. `xcom`: the run's passed-on values as tries read them
    (ledger.sdk.xcom.pull_view); `inlet_events`: what the try is given of the task's inlets
    (ledger.sdk.datasets.given_inlets; None when it has none); `database`: what its task id carries of the
    database's identity (DatabaseIdentity.of); `max_tries`: the tries its task instance may have in all (default:
    the task's retries plus one, as a task instance no clear has given more)."""
    return WorkItem(
        ti_id=ti_id, run_id=run.run_id, dag_id=run.dag_id, task_id=task.task_id, try_number=try_number,
        fileloc=run.fileloc, code_root=run.code_root, code_captured=run.code_captured,
        logical_date=run.logical_date, data_interval_start=run.data_interval_start,
        data_interval_end=run.data_interval_end, dag_version=run.dag_version, run_type=run.run_type,
        log_path=log_path, map_index=map_index, queue=task.queue, execution_timeout=task.execution_timeout,
        conf=dict(run.conf), priority_weight=priority_weight, xcom=xcom, prev_interval=run.prev_interval,
        prev_success=run.prev_success, triggering_events=run.triggering_events, inlet_events=inlet_events,
        signal=signal, database=database, max_tries=task.retries + 1 if max_tries is None else max_tries,
        run_started=run.started)
