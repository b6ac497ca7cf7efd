"""Reads of the web view's dataset graph (ledger/web/dataset_graph.py): per dataset, the partitions written and the
newest write, from the dataset events (what producer tasks' outlets wrote) and the recorded writes (lineage), each
read through its `(dataset, partition)` index, so a graph of a 10,000-run ledger costs a scan of two indexes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, union
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
    """dataset -> Written, for every dataset with an event or a recorded write (or only `datasets`)."""
    events = select(DatasetEvent.dataset, func.count(), func.max(DatasetEvent.id)).group_by(DatasetEvent.dataset)
    writes = select(LineageWrite.dataset, func.count(), func.max(LineageWrite.id)).group_by(LineageWrite.dataset)
    named = (select(DatasetEvent.dataset, DatasetEvent.partition).where(DatasetEvent.partition.is_not(None)),
             select(LineageWrite.dataset, LineageWrite.partition))
    if datasets is not None:
        events = events.where(DatasetEvent.dataset.in_(list(datasets)))
        writes = writes.where(LineageWrite.dataset.in_(list(datasets)))
        named = (named[0].where(DatasetEvent.dataset.in_(list(datasets))),
                 named[1].where(LineageWrite.dataset.in_(list(datasets))))
    by_events = {d: (n, last) for d, n, last in session.execute(events).tuples()}
    by_writes = {d: (n, last) for d, n, last in session.execute(writes).tuples()}
    both = union(*named).subquery()
    partitions = {d: n for d, n in session.execute(select(both.c[0], func.count()).group_by(both.c[0])).tuples()}
    newest_events = {e.dataset: Newest(e.partition, e.dag_id, e.run_id, e.task_id, e.created_at)
                     for e in session.scalars(select(DatasetEvent).where(
                         DatasetEvent.id.in_([last for _n, last in by_events.values()])))}
    newest_writes = {w.dataset: Newest(w.partition, w.dag_id, w.run_id, w.task_id, w.recorded_at)
                     for w in session.scalars(select(LineageWrite).where(
                         LineageWrite.id.in_([last for _n, last in by_writes.values()])))}
    found = {}
    for key in sorted(set(by_events) | set(by_writes)):
        candidates = [n for n in (newest_events.get(key), newest_writes.get(key)) if n is not None]
        found[key] = Written(by_events.get(key, (0, 0))[0], by_writes.get(key, (0, 0))[0], partitions.get(key, 0),
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
