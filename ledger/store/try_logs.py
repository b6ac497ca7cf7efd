"""Logs of tries that ran on other hosts (Celery workers), kept in the database once each try has ended. Every
function runs in the caller's transaction."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.orm import Session

from ledger.models import TaskInstance, TryLog, tables

TRY_LOGS = tables.try_log


def keep(session: Session, logs: list[tuple[int, int, str | None, str]]) -> None:
    """Keep tries' logs, (task instance id, try number, host, text) each (written by the job that holds their runs,
    as it records their ends; a log recorded again replaces the first). Two Core statements for them all, each
    executed for many rows: the ORM's bulk delete and unit of work, once per try, cost about four times as much."""
    logs = list({(ti_id, number): (ti_id, number, host, text) for ti_id, number, host, text in logs}.values())
    if not logs:  # (a try named twice keeps its last log, as two calls would)
        return
    session.execute(delete(TRY_LOGS).where(TRY_LOGS.c.task_instance_id == bindparam("ti"),
                                           TRY_LOGS.c.try_number == bindparam("n")),
                    [{"ti": ti_id, "n": number} for ti_id, number, _host, _text in logs])
    session.execute(insert(TRY_LOGS), [{"task_instance_id": ti_id, "try_number": number, "host": host, "text": text}
                                       for ti_id, number, host, text in logs])


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
