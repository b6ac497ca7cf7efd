"""Lineage: which try of which run (and DAG version) wrote each partition of a dataset, by the writes tries
recorded (lineage_write) and the dataset events of producers' successful tries (dataset_event)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, union
from sqlalchemy.orm import Session

from ledger.models import DagRun, DatasetEvent, LineageWrite, TaskInstance, TaskTry
from ledger.store import dataset_tally


def record(session: Session, writes: list[dict[str, Any]], *, run_id: int, dag_id: str, task_id: str,
           try_number: int, dag_version: str, try_state: str, now: datetime) -> int:
    if not writes:
        return 0
    rows = [{"dataset": str(w["dataset"])[:500], "partition": str(w["partition"])[:500], "run_id": run_id,
             "dag_id": dag_id, "task_id": task_id, "try_number": try_number, "dag_version": dag_version,
             "try_state": try_state, "rows": w.get("rows") if isinstance(w.get("rows"), int) else None,
             "path": w.get("path"), "written_at": _parse(w.get("at"), now), "recorded_at": now} for w in writes]
    ids = session.scalars(insert(LineageWrite).returning(LineageWrite.id, sort_by_parameter_order=True), rows)
    dataset_tally.note(session, "write", list(ids), rows)
    return len(writes)


def _parse(value: Any, default: datetime) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return default
    return parsed if parsed.tzinfo else default


def history(session: Session, dataset: str, partition: str | None = None) -> list[Any]:
    """Every recorded write of a dataset (optionally one partition), oldest first, with its run's state."""
    stmt = (select(LineageWrite, DagRun.state.label("run_state"), DagRun.overridden_by, DagRun.run_type,
                   DagRun.logical_date)
            .join(DagRun, DagRun.id == LineageWrite.run_id)
            .where(LineageWrite.dataset == dataset)
            .order_by(LineageWrite.partition, LineageWrite.written_at, LineageWrite.id))
    if partition is not None:
        stmt = stmt.where(LineageWrite.partition == partition)
    return list(session.execute(stmt))


def event_history(session: Session, dataset: str, partition: str | None = None) -> list[Any]:
    """Every dataset event of a dataset (optionally one partition), oldest first, with its run's state and the DAG
    version its try ran (the run's when the try names none)."""
    version = (select(TaskTry.dag_version).join(TaskInstance, TaskInstance.id == TaskTry.task_instance_id)
               .where(TaskInstance.run_id == DatasetEvent.run_id, TaskInstance.task_id == DatasetEvent.task_id,
                      TaskTry.try_number == DatasetEvent.try_number).limit(1).scalar_subquery())
    stmt = (select(DatasetEvent, DagRun.state.label("run_state"), DagRun.overridden_by, DagRun.run_type,
                   DagRun.logical_date, func.coalesce(version, DagRun.version_hash).label("dag_version"))
            .join(DagRun, DagRun.id == DatasetEvent.run_id)
            .where(DatasetEvent.dataset == dataset).order_by(DatasetEvent.id))
    if partition is not None:
        stmt = stmt.where(DatasetEvent.partition == partition)
    return list(session.execute(stmt))


def datasets(session: Session) -> list[str]:
    """The datasets with a recorded write or a dataset event."""
    names = union(select(LineageWrite.dataset), select(DatasetEvent.dataset)).subquery()
    return list(session.scalars(select(names.c.dataset).order_by(names.c.dataset)))
