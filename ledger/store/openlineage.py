"""What the OpenLineage relay reads (ledger/services/openlineage.py): tries by id, after a keyset or by their ids,
and the facts of their runs, tasks, versions and datasets that an OpenLineage event of a try carries. Reads only."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.models import DagRun, DagVersion, DatasetEvent, Event, LineageWrite, TaskInstance, TaskTry


@dataclass(frozen=True, slots=True)
class TryRow:
    id: int
    ti_id: int
    try_number: int
    state: str
    started_at: datetime | None
    ended_at: datetime | None
    dag_version: str | None
    hostname: str | None


@dataclass(frozen=True, slots=True)
class TryFacts:
    """A try with what its OpenLineage events say of it."""

    row: TryRow
    dag_id: str
    task_id: str
    map_index: int
    run_id: int
    logical_date: datetime
    data_interval: tuple[datetime, datetime]
    run_type: str
    previous_run_id: int | None
    overridden_by: int | None
    overrode: tuple[int, ...]
    backfill_id: int | None
    version_hash: str
    code_snapshot: str | None
    inlets: tuple[dict[str, Any], ...] = ()  # the task's declared datasets, as its version describes them
    outlets: tuple[dict[str, Any], ...] = ()
    written: tuple[dict[str, Any], ...] = field(default=())  # dataset events and lineage writes of this try
    read: tuple[dict[str, Any], ...] = field(default=())  # what this try was given of its inlets


_TRY_COLUMNS = (TaskTry.id, TaskTry.task_instance_id, TaskTry.try_number, TaskTry.state, TaskTry.started_at,
                TaskTry.ended_at, TaskTry.dag_version, TaskTry.hostname)


def newest_try_id(session: Session) -> int:
    return int(session.scalar(select(TaskTry.id).order_by(TaskTry.id.desc()).limit(1)) or 0)


def tries_after(session: Session, after: int, limit: int) -> list[TryRow]:
    """The tries with an id above `after`, oldest first, at most `limit`."""
    stmt = select(*_TRY_COLUMNS).where(TaskTry.id > after).order_by(TaskTry.id).limit(limit)
    return [TryRow(*r) for r in session.execute(stmt)]


def tries_by_id(session: Session, ids: Iterable[int]) -> list[TryRow]:
    wanted = sorted(set(ids))
    if not wanted:
        return []
    return [TryRow(*r) for r in session.execute(select(*_TRY_COLUMNS).where(TaskTry.id.in_(wanted))
                                                .order_by(TaskTry.id))]


def facts_of(session: Session, tries: list[TryRow]) -> list[TryFacts]:
    """The facts of each try (in the same order); a try whose task instance or run is gone is left out."""
    if not tries:
        return []
    instances = {ti.id: ti for ti in session.scalars(
        select(TaskInstance).where(TaskInstance.id.in_({t.ti_id for t in tries})))}
    runs = {r.id: r for r in session.scalars(
        select(DagRun).where(DagRun.id.in_({ti.run_id for ti in instances.values()})))}
    overrode: dict[int, list[int]] = {}
    for old_id, new_id in session.execute(select(DagRun.id, DagRun.overridden_by).where(
            DagRun.overridden_by.in_(list(runs))).order_by(DagRun.id)):
        overrode.setdefault(new_id, []).append(old_id)
    hashes = {t.dag_version for t in tries if t.dag_version} | {r.version_hash for r in runs.values()}
    versions = {(v.dag_id, v.version_hash): v for v in session.scalars(
        select(DagVersion).where(DagVersion.version_hash.in_(hashes)))}
    run_ids = list(runs)
    events = list(session.scalars(select(DatasetEvent).where(DatasetEvent.run_id.in_(run_ids))
                                  .order_by(DatasetEvent.id)))
    writes = list(session.scalars(select(LineageWrite).where(LineageWrite.run_id.in_(run_ids))
                                  .order_by(LineageWrite.id)))
    reads = list(session.scalars(select(Event).where(Event.run_id.in_(run_ids), Event.kind == "inlets_read")
                                 .order_by(Event.id)))
    out = []
    for t in tries:
        ti = instances.get(t.ti_id)
        run = runs.get(ti.run_id) if ti is not None else None
        if ti is None or run is None:
            continue
        version_hash = t.dag_version or run.version_hash
        version = versions.get((run.dag_id, version_hash))
        task = _task_of(version, ti.task_id)
        mine = (run.id, ti.task_id, t.try_number)
        written: list[dict[str, Any]] = [
            {"dataset": e.dataset, "partition": e.partition, "alias": e.alias, "event_id": str(e.id)}
            for e in events if (e.run_id, e.task_id, e.try_number) == mine]
        written += [{"dataset": w.dataset, "partition": w.partition, "rows": w.rows, "path": w.path}
                    for w in writes if (w.run_id, w.task_id, w.try_number) == mine]
        read = [r for e in reads
                if (e.details or {}).get("task_id") == ti.task_id
                and (e.details or {}).get("map_index", -1) == ti.map_index
                and (e.details or {}).get("try_number") == t.try_number
                for r in (e.details or {}).get("read", [])]
        out.append(TryFacts(
            row=t, dag_id=run.dag_id, task_id=ti.task_id, map_index=ti.map_index, run_id=run.id,
            logical_date=run.logical_date, data_interval=(run.data_interval_start, run.data_interval_end),
            run_type=run.run_type, previous_run_id=run.previous_run_id, overridden_by=run.overridden_by,
            overrode=tuple(overrode.get(run.id, ())), backfill_id=run.backfill_id, version_hash=version_hash,
            code_snapshot=version.code_snapshot if version is not None else None,
            inlets=tuple(task.get("inlets", ())), outlets=tuple(task.get("outlets", ())),
            written=tuple(written), read=tuple(read)))
    return out


def _task_of(version: DagVersion | None, task_id: str) -> dict[str, Any]:
    if version is None:
        return {}
    try:
        tasks = json.loads(version.structure).get("tasks", ())
    except ValueError:
        return {}
    return next((t for t in tasks if isinstance(t, dict) and t.get("task_id") == task_id), {})
