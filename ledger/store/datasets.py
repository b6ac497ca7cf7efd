"""Dataset events (what producer tries wrote) and what each consumer run consumed (ledger/sdk/datasets.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, or_, select
from sqlalchemy.orm import Session

from ledger.core.dataset_rules import Consumed, EventRow, TryRead, what_runs_read
from ledger.core.states import RunState
from ledger.models import Backfill, DagRun, DatasetConsumed, DatasetEvent, Event
from ledger.store import dataset_tally
from ledger.store.run_reads import consumed_of as consumed_of  # read through the tables, for the run's document
from ledger.store.run_reads import writers_of as writers_of

LIVE = DagRun.state != RunState.OVERRIDDEN.value


def _row(e: Any) -> EventRow:
    return EventRow(e.id, e.dataset, e.partition, e.alias, e.created_at, bool(e.downstream))


def record_events(session: Session, rows: list[dict[str, Any]]) -> int:
    if rows:
        ids = session.scalars(insert(DatasetEvent).returning(DatasetEvent.id, sort_by_parameter_order=True), rows)
        dataset_tally.note(session, "event", list(ids), rows)
    return len(rows)


def newest_event_id(session: Session) -> int:
    return session.scalar(select(func.max(DatasetEvent.id))) or 0


def written_since(session: Session, after: int) -> set[str]:
    """The leaves (`dataset:KEY`, `alias:NAME`, as ledger.core.dataset_rules.leaf_keys names them) that got an event
    with an id above `after`."""
    found: set[str] = set()
    for dataset, alias in session.execute(select(DatasetEvent.dataset, DatasetEvent.alias).where(
            DatasetEvent.id > after).distinct()).tuples():
        found.add(f"dataset:{dataset}")
        if alias:
            found.add(f"alias:{alias}")
    return found


def run_of(session: Session, run_id: int) -> DagRun | None:
    return session.get(DagRun, run_id)


def sends_downstream(session: Session, run: DagRun) -> bool:
    """Whether what `run` writes re-runs the consumers: it belongs to a `--downstream` backfill, or is itself a
    re-run caused by such a rewrite."""
    if run.backfill_id is not None and session.scalar(
            select(Backfill.downstream).where(Backfill.id == run.backfill_id)):
        return True
    return (session.scalar(select(func.count()).select_from(DatasetConsumed).join(
        DatasetEvent, DatasetEvent.id == DatasetConsumed.event_id).where(
        DatasetConsumed.run_id == run.id, DatasetConsumed.cause.is_(True), DatasetEvent.downstream.is_(True))) or 0) > 0


def pending(session: Session, dag_id: str, datasets: Sequence[str], aliases: Sequence[str]) -> list[EventRow]:
    """The unpartitioned events of `datasets` (or added to `aliases`) that DAG `dag_id` has not consumed: newer
    than the newest unpartitioned event it consumed."""
    cursor = session.scalar(select(func.max(DatasetConsumed.event_id)).join(
        DatasetEvent, DatasetEvent.id == DatasetConsumed.event_id).where(
        DatasetConsumed.dag_id == dag_id, DatasetEvent.partition.is_(None))) or 0
    which = []
    if datasets:
        which.append(DatasetEvent.dataset.in_(list(datasets)))
    if aliases:
        which.append(DatasetEvent.alias.in_(list(aliases)))
    if not which:
        return []
    return [_row(e) for e in session.execute(select(DatasetEvent).where(
        DatasetEvent.id > cursor, DatasetEvent.partition.is_(None), or_(*which)).order_by(DatasetEvent.id)).scalars()]


def latest_partitions(session: Session, datasets: Sequence[str]) -> dict[tuple[str, str], EventRow]:
    """The newest event of each partition of `datasets`."""
    if not datasets:
        return {}
    newest = (select(func.max(DatasetEvent.id)).where(DatasetEvent.dataset.in_(list(datasets)),
                                                      DatasetEvent.partition.is_not(None))
              .group_by(DatasetEvent.dataset, DatasetEvent.partition))
    rows = session.execute(select(DatasetEvent).where(DatasetEvent.id.in_(newest))).scalars()
    return {(e.dataset, e.partition or ""): _row(e) for e in rows}


def consumed_by_live_runs(session: Session, dag_id: str) -> list[Consumed]:
    """The events the live runs of `dag_id` consumed."""
    rows = session.execute(select(DatasetConsumed.run_id, DatasetEvent).join(
        DatasetEvent, DatasetEvent.id == DatasetConsumed.event_id).join(
        DagRun, DagRun.id == DatasetConsumed.run_id).where(DatasetConsumed.dag_id == dag_id, LIVE))
    return [Consumed(run_id, _row(e)) for run_id, e in rows.tuples()]


def read_by_live_runs(session: Session, dag_id: str) -> list[Consumed]:
    """What the live runs of `dag_id` read of each partition (ledger.core.dataset_rules.what_runs_read): the events
    their tasks' latest tries read of their inlets, else the events the runs consumed when they were made. Two
    statements besides consumed_by_live_runs: the runs' `inlets_read` events, and the partition events they name."""
    consumed = consumed_by_live_runs(session, dag_id)
    tried: list[tuple[int, tuple[str, int], int, int]] = []
    for run_id, d in session.execute(select(Event.run_id, Event.details).join(DagRun, DagRun.id == Event.run_id).where(
            DagRun.dag_id == dag_id, LIVE, Event.kind == "inlets_read")).tuples():
        task = (str(d.get("task_id")), int(d.get("map_index", -1)))
        tried += [(run_id, task, int(d.get("try_number") or 0), int(r["event_id"])) for r in d.get("read", [])
                  if r.get("partition") is not None]
    if not tried:
        return consumed
    rows = {e.id: _row(e) for e in session.scalars(select(DatasetEvent).where(
        DatasetEvent.id.in_(sorted({t[3] for t in tried}))))}
    return what_runs_read(consumed, [TryRead(run_id, task, number, rows[event_id])
                                     for run_id, task, number, event_id in tried if event_id in rows])


def newest_of_partition(session: Session, datasets: Sequence[str], partition: str) -> list[EventRow]:
    """The newest event of `partition` of each of `datasets` that has one."""
    if not datasets:
        return []
    newest = (select(func.max(DatasetEvent.id)).where(DatasetEvent.dataset.in_(list(datasets)),
                                                      DatasetEvent.partition == partition)
              .group_by(DatasetEvent.dataset))
    return [_row(e) for e in session.scalars(select(DatasetEvent).where(DatasetEvent.id.in_(newest))
                                             .order_by(DatasetEvent.id))]


def live_runs(session: Session, dag_id: str) -> dict[datetime, tuple[int, int | None]]:
    """logical date -> (run id, the job holding it) of the live runs of `dag_id`."""
    return {d: (i, h) for i, d, h in session.execute(select(DagRun.id, DagRun.logical_date, DagRun.lock_holder)
                                                     .where(DagRun.dag_id == dag_id, LIVE)).tuples()}


def record_consumed(session: Session, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(insert(DatasetConsumed), rows)


def events_of(session: Session, *, dataset: str | None = None, run_ids: Iterable[int] | None = None,
              limit: int | None = None) -> list[DatasetEvent]:
    """Events, newest first: of one dataset, or written by some runs."""
    stmt = select(DatasetEvent).order_by(DatasetEvent.id.desc())
    if dataset is not None:
        stmt = stmt.where(DatasetEvent.dataset == dataset)
    if run_ids is not None:
        stmt = stmt.where(DatasetEvent.run_id.in_(list(run_ids)))
    if limit is not None:
        stmt = stmt.limit(limit)
    return list(session.scalars(stmt))


def event_counts(session: Session) -> dict[str, tuple[int, datetime | None]]:
    """dataset -> (events, time of the newest)."""
    return {d: (n, last) for d, n, last in session.execute(
        select(DatasetEvent.dataset, func.count(), func.max(DatasetEvent.created_at))
        .group_by(DatasetEvent.dataset)).tuples()}


def run_dates(session: Session, run_ids: Iterable[int]) -> dict[int, tuple[str, datetime, str]]:
    """run id -> (dag id, logical date, state)."""
    return {i: (d, t, s) for i, d, t, s in session.execute(
        select(DagRun.id, DagRun.dag_id, DagRun.logical_date, DagRun.state).where(
            DagRun.id.in_(list(run_ids)))).tuples()}


def causes_of_dag(session: Session, dag_id: str) -> dict[int, list[DatasetEvent]]:
    """run id -> the events that caused it (re-runs of a rewritten partition), for every run of `dag_id`."""
    found: dict[int, list[DatasetEvent]] = {}
    for run_id, e in session.execute(select(DatasetConsumed.run_id, DatasetEvent).join(
            DatasetEvent, DatasetEvent.id == DatasetConsumed.event_id).where(
            DatasetConsumed.dag_id == dag_id, DatasetConsumed.cause.is_(True))).tuples():
        found.setdefault(run_id, []).append(e)
    return found


def inlet_events(session: Session, leaf: str, partitions: Sequence[str] | None, limit: int) -> list[DatasetEvent]:
    """The events a try reads of one inlet (`dataset:KEY` or `alias:NAME`), oldest first: the newest of each of
    `partitions`, or (None) the newest `limit` events."""
    kind, name = leaf.split(":", 1)
    if partitions is not None:
        if not partitions:
            return []
        newest = (select(func.max(DatasetEvent.id)).where(DatasetEvent.dataset == name,
                                                          DatasetEvent.partition.in_(list(partitions)))
                  .group_by(DatasetEvent.partition))
        order = {p: i for i, p in enumerate(partitions)}
        found = session.scalars(select(DatasetEvent).where(DatasetEvent.id.in_(newest)))
        return sorted(found, key=lambda e: order.get(e.partition or "", 0))
    which = DatasetEvent.dataset == name if kind == "dataset" else DatasetEvent.alias == name
    rows = list(session.scalars(select(DatasetEvent).where(which).order_by(DatasetEvent.id.desc()).limit(limit)))
    return rows[::-1]
