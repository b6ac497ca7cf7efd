"""Reads of the web view's dataset graph (ledger/web/dataset_graph.py): per dataset, the partitions written and the
newest write, from the dataset events (what producer tasks' outlets wrote) and the recorded writes (lineage), each
read through its `(dataset, partition)` index, so a graph of a 10,000-run ledger costs a scan of two indexes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.models import DagRun, DatasetEvent, LineageWrite


@dataclass(frozen=True)
class Newest:
    """The newest write of a dataset: its partition (None: an unpartitioned event), the run and task that wrote
    it, and when."""

    partition: str | None
    dag_id: str
    run_id: int
    task_id: str
    at: datetime


@dataclass(frozen=True)
class Written:
    """What was written of a dataset: its events and recorded writes, the partitions either names, the newest."""

    events: int
    writes: int
    partitions: int
    newest: Newest | None


def written(session: Session, datasets: Sequence[str] | None = None) -> dict[str, Written]:
    """dataset -> Written, for every dataset with an event or a recorded write (or only `datasets`). Two scans of
    each table's `(dataset, partition)` index (a count and the newest id per dataset; the distinct partitions), then
    the newest rows by id. `partitions`: those its events name or those its recorded writes name, whichever
    are more (a producer that records its writes names the same partitions in both; their union would cost a sort
    of both tables)."""
    def per_dataset(model: Any) -> dict[str, tuple[int, int, int]]:
        # two statements: with count(DISTINCT) beside other aggregates SQLite sorts the partitions in a temporary
        # B-tree; alone, it counts them in the index's order
        counts = select(model.dataset, func.count(), func.max(model.id))
        distinct = select(model.dataset, func.count(model.partition.distinct()))
        if datasets is not None:
            counts = counts.where(model.dataset.in_(list(datasets)))
            distinct = distinct.where(model.dataset.in_(list(datasets)))
        parts = dict(session.execute(distinct.group_by(model.dataset)).tuples().all())
        rows = session.execute(counts.group_by(model.dataset)).tuples()
        return {d: (n, parts.get(d, 0), last) for d, n, last in rows}

    by_events, by_writes = per_dataset(DatasetEvent), per_dataset(LineageWrite)
    newest_events = {e.dataset: Newest(e.partition, e.dag_id, e.run_id, e.task_id, e.created_at)
                     for e in session.scalars(select(DatasetEvent).where(
                         DatasetEvent.id.in_([last for _n, _p, last in by_events.values()])))}
    newest_writes = {w.dataset: Newest(w.partition, w.dag_id, w.run_id, w.task_id, w.recorded_at)
                     for w in session.scalars(select(LineageWrite).where(
                         LineageWrite.id.in_([last for _n, _p, last in by_writes.values()])))}
    found = {}
    for key in sorted(set(by_events) | set(by_writes)):
        events, event_parts, _e = by_events.get(key, (0, 0, 0))
        writes, write_parts, _w = by_writes.get(key, (0, 0, 0))
        candidates = [n for n in (newest_events.get(key), newest_writes.get(key)) if n is not None]
        found[key] = Written(events, writes, max(event_parts, write_parts),
                             max(candidates, key=lambda n: n.at) if candidates else None)
    return found


def newest_partitions(session: Session, dataset: str, *, limit: int) -> list[str]:
    """The `limit` partitions of a dataset with the newest recorded writes, newest first."""
    newest = func.max(LineageWrite.id)
    return list(session.scalars(select(LineageWrite.partition).where(LineageWrite.dataset == dataset)
                                .group_by(LineageWrite.partition).order_by(newest.desc()).limit(limit)))


def writes_of(session: Session, dataset: str, partitions: Sequence[str]) -> list[Any]:
    """Every recorded write of those partitions of a dataset, oldest first, with its run's state (the rows of
    ledger/store/lineage.py `history`)."""
    if not partitions:
        return []
    return list(session.execute(
        select(LineageWrite, DagRun.state.label("run_state"), DagRun.overridden_by, DagRun.run_type,
               DagRun.logical_date)
        .join(DagRun, DagRun.id == LineageWrite.run_id)
        .where(LineageWrite.dataset == dataset, LineageWrite.partition.in_(list(partitions)))
        .order_by(LineageWrite.partition, LineageWrite.written_at, LineageWrite.id)))


def newest_partition_events(session: Session, dataset: str, *, limit: int) -> list[DatasetEvent]:
    """The newest event of each of the `limit` greatest partitions of a dataset (time partitions' keys sort by
    time), greatest first: read backwards along the `(dataset, partition)` index, not every partition."""
    newest = (select(func.max(DatasetEvent.id)).where(DatasetEvent.dataset == dataset,
                                                      DatasetEvent.partition.is_not(None))
              .group_by(DatasetEvent.partition).order_by(DatasetEvent.partition.desc()).limit(limit))
    found = session.scalars(select(DatasetEvent).where(DatasetEvent.id.in_(list(session.scalars(newest)))))
    return sorted(found, key=lambda e: e.partition or "", reverse=True)
