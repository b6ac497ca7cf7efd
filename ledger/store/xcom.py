"""Stored XCom values (ledger/sdk/xcom.py) and the templates each try rendered."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from ledger.core.mapping import NOT_MAPPED, label
from ledger.core.states import TaskState
from ledger.models import TaskInstance, TaskTry, XCom


def record(session: Session, pushed: list[tuple[str, Any]], *, run_id: int, task_id: str, try_number: int,
           now: datetime, map_index: int = NOT_MAPPED) -> int:
    """Store what a try passed on (a key pushed twice keeps its last value)."""
    last = dict(pushed)
    if last:
        session.execute(insert(XCom), [{"run_id": run_id, "task_id": task_id, "map_index": map_index,
                                        "try_number": try_number, "key": key[:250], "value": value,
                                        "created_at": now} for key, value in last.items()])
    return len(last)


# not the instances a mapped task lost when it was expanded again over a shorter list (`removed`)
_REMOVED = select(TaskInstance.id).where(TaskInstance.run_id == XCom.run_id, TaskInstance.task_id == XCom.task_id,
                                         TaskInstance.map_index == XCom.map_index,
                                         TaskInstance.state == TaskState.REMOVED.value)
_VALUES = select(XCom.run_id, XCom.task_id, XCom.map_index, XCom.key, XCom.value).where(
    XCom.run_id.in_(bindparam("ids", expanding=True)), (XCom.map_index < 0) | ~_REMOVED.exists()).order_by(
    XCom.try_number, XCom.id)  # built once: a job reads the values of the runs it claims, every few loops


def values_for_runs(session: Session, run_ids: Iterable[int]) -> dict[int, dict[str, dict[str, Any]]]:
    """run -> label (task id, `task[i]` for a mapped instance) -> key -> value, from each task instance's
    newest try that stored that key (ledger.sdk.xcom.pull_view makes what tries pull of it)."""
    ids = sorted(set(run_ids))
    out: dict[int, dict[str, dict[str, Any]]] = {i: {} for i in ids}
    if not ids:
        return out
    rows = session.execute(_VALUES, {"ids": ids})
    for run_id, task_id, map_index, key, value in rows:
        out[run_id].setdefault(label(task_id, map_index), {})[key] = value
    return out


def for_task(session: Session, run_id: int, task_id: str, map_index: int = NOT_MAPPED) -> list[XCom]:
    return list(session.scalars(select(XCom).where(XCom.run_id == run_id, XCom.task_id == task_id,
                                                   XCom.map_index == map_index)
                                .order_by(XCom.try_number, XCom.key)))


def set_rendered(session: Session, ti_id: int, try_number: int, rendered: dict[str, Any]) -> None:
    session.execute(update(TaskTry).where(TaskTry.task_instance_id == ti_id, TaskTry.try_number == try_number)
                    .values(rendered=rendered))


def rendered_tries(session: Session, run_id: int, task_id: str, map_index: int = NOT_MAPPED) -> list[TaskTry]:
    return list(session.scalars(select(TaskTry).join(TaskInstance, TaskInstance.id == TaskTry.task_instance_id)
                                .where(TaskInstance.run_id == run_id, TaskInstance.task_id == task_id,
                                       TaskInstance.map_index == map_index)
                                .order_by(TaskTry.try_number)))
