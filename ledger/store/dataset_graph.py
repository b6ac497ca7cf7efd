"""Reads of the web view's dataset graph (ledger/web/dataset_graph.py): per dataset, the partitions written and the
newest write, from the dataset events (what producer tasks' outlets wrote) and the recorded writes (lineage), as
their tallies keep them (ledger/store/dataset_tally.py): a graph costs a row per dataset, not a count of its rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.models import DagRun, DatasetEvent, LineageWrite
from ledger.store import dataset_tally

PAGE = 500  # recorded writes read at a time, newest first


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


def written(session: Session, datasets: Sequence[str] | None = None, *, verify: bool = False) -> dict[str, Written]:
    """dataset -> Written, for every dataset with an event or a recorded write (or only `datasets`): its tallies
    (ledger/store/dataset_tally.py; checked against the rows first with `verify`), then the newest rows by id.
    `partitions`: those its events name or those its recorded writes name, whichever are more (a producer that
    records its writes names the same partitions in both; their union would cost a sort of both tables)."""
    tallies = (dataset_tally.verified if verify else dataset_tally.read)(session, datasets)
    newest_ids = {source: [t.newest_id for (_d, s), t in tallies.items() if s == source]
                  for source in dataset_tally.SOURCES}
    newest_events = {e.dataset: Newest(e.partition, e.dag_id, e.run_id, e.task_id, e.created_at)
                     for e in session.scalars(select(DatasetEvent).where(DatasetEvent.id.in_(newest_ids["event"])))}
    newest_writes = {w.dataset: Newest(w.partition, w.dag_id, w.run_id, w.task_id, w.recorded_at)
                     for w in session.scalars(select(LineageWrite).where(LineageWrite.id.in_(newest_ids["write"])))}
    none = dataset_tally.Tally(0, 0, 0)
    found = {}
    for key in sorted({d for d, _s in tallies}):
        events, writes = tallies.get((key, "event"), none), tallies.get((key, "write"), none)
        candidates = [n for n in (newest_events.get(key), newest_writes.get(key)) if n is not None]
        found[key] = Written(events.rows, writes.rows, max(events.partitions, writes.partitions),
                             max(candidates, key=lambda n: n.at) if candidates else None)
    return found


def newest_partitions(session: Session, dataset: str, *, limit: int) -> list[str]:
    """The `limit` partitions of a dataset with the newest recorded writes, newest first: its writes read newest
    first along the `(dataset, id)` index, PAGE at a time, until `limit` partitions are found (not every write
    grouped and sorted)."""
    found: dict[str, None] = {}
    before: int | None = None
    while len(found) < limit:
        stmt = select(LineageWrite.partition, LineageWrite.id).where(LineageWrite.dataset == dataset)
        if before is not None:
            stmt = stmt.where(LineageWrite.id < before)
        rows = session.execute(stmt.order_by(LineageWrite.id.desc()).limit(PAGE)).tuples().all()
        for partition, _id in rows:
            found.setdefault(partition, None)
            if len(found) == limit:
                break
        if len(rows) < PAGE:
            break
        before = rows[-1][1]
    return list(found)


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
