"""Logs of tries that ran on other hosts (Celery workers), kept in the database once each try has ended. Every
function runs in the caller's transaction."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ledger.models import TaskInstance, TryLog


def keep(session: Session, ti_id: int, try_number: int, host: str | None, text: str) -> None:
    """Keep a try's log (written by the job that holds its run, as it records the try's end; a log recorded
    again replaces the first)."""
    session.execute(delete(TryLog).where(TryLog.task_instance_id == ti_id, TryLog.try_number == try_number))
    session.add(TryLog(task_instance_id=ti_id, try_number=try_number, host=host, text=text))


def find(session: Session, run_id: int, task_id: str, map_index: int, try_number: int) -> str | None:
    """The kept log of a try of a run's task instance (None: none kept: it ran here, or has not ended)."""
    return session.scalar(select(TryLog.text).join(TaskInstance, TaskInstance.id == TryLog.task_instance_id).where(
        TaskInstance.run_id == run_id, TaskInstance.task_id == task_id, TaskInstance.map_index == map_index,
        TryLog.try_number == try_number))


def instance_and_log(session: Session, run_id: int, task_id: str, map_index: int,
                     try_number: int) -> tuple[int, str | None] | None:
    """(the task instance's id, the try's kept log or None) of a run's task instance; None: no such instance.
    (Readers of a log need the id: a running remote try's log is found by it.)"""
    found = session.execute(
        select(TaskInstance.id, TryLog.text)
        .outerjoin(TryLog, (TryLog.task_instance_id == TaskInstance.id) & (TryLog.try_number == try_number))
        .where(TaskInstance.run_id == run_id, TaskInstance.task_id == task_id,
               TaskInstance.map_index == map_index)).first()
    return None if found is None else (int(found[0]), found[1])
