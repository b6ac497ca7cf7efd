"""Lineage: which try of which run (and DAG version) wrote each partition of a dataset."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from ledger.models import DagRun, LineageWrite
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


def datasets(session: Session) -> list[str]:
    return list(session.scalars(select(LineageWrite.dataset).distinct().order_by(LineageWrite.dataset)))
