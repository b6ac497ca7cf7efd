"""What `ledger audit` reads: the events' hash chains, their heads, the rows the events report, the code's rows
(decision 0260). Read-only; the checks are ledger/core/audit.py's and ledger/services/audit.py's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from ledger.core.audit import (
    GLOBAL_CHAIN,
    ChainedEvent,
    Head,
    TaskRow,
    TryRow,
    WriteRow,
    chain_of,
    rows_digest,
    run_cover,
    run_facts,
    timestamp,
    tries_digest,
)
from ledger.models import (
    CodeBlob,
    CodeBundle,
    Dag,
    DagRun,
    DagVersion,
    Event,
    EventChain,
    LineageWrite,
    TaskInstance,
    TaskTry,
)

BATCH = 2000


def chain_names(session: Session) -> set[str]:
    """Every chain there is or should be: those with a head, those with events, the DAGs' (a DAG with runs)."""
    names = set(session.scalars(select(EventChain.chain)))
    names.update(chain_of(d) for d in session.scalars(select(Event.dag_id).distinct()))
    names.update(session.scalars(select(DagRun.dag_id).distinct()))
    return names


def known_dag(session: Session, dag_id: str) -> bool:
    return session.scalar(select(Dag.dag_id).where(Dag.dag_id == dag_id)) is not None


def event_exists(session: Session, event_id: int) -> bool:
    return session.get(Event, event_id) is not None


def head(session: Session, chain: str) -> Head | None:
    row = session.get(EventChain, chain)
    return None if row is None else Head(row.head_hash, row.head_id, row.length)


def _of_chain(chain: str) -> Any:
    return Event.dag_id.is_(None) if chain == GLOBAL_CHAIN else Event.dag_id == chain


_COLUMNS = (Event.id, Event.seq, Event.at, Event.kind, Event.actor, Event.dag_id, Event.run_id, Event.details,
            Event.covers, Event.prev_hash, Event.hash)


def _chained(row: Any) -> ChainedEvent:
    return ChainedEvent(row[0], row[1], timestamp(row[2]), *row[3:])


def chain_events(session: Session, chain: str, *, since: int | None = None) -> Iterator[ChainedEvent]:
    """The chain's events in chain order (place, then id: an event with no place, written outside ledger, last),
    from event `since` on (its place and after)."""
    stmt = select(*_COLUMNS).where(_of_chain(chain))
    if since is not None:
        start = session.scalar(select(Event.seq).where(Event.id == since))
        stmt = stmt.where(or_(Event.seq >= start, Event.seq.is_(None)) if start is not None else Event.id >= since)
    rows = session.execute(stmt.order_by(Event.seq.is_(None), Event.seq, Event.id).execution_options(yield_per=BATCH))
    for row in rows:
        yield _chained(row)


def events_by_id(session: Session, ids: list[int]) -> list[ChainedEvent]:
    found: list[ChainedEvent] = []
    for i in range(0, len(ids), BATCH):
        found += [_chained(r) for r in session.execute(select(*_COLUMNS).where(Event.id.in_(ids[i:i + BATCH])))]
    return found


_FACTS = (DagRun.logical_date, DagRun.data_interval_start, DagRun.data_interval_end, DagRun.run_type,
          DagRun.backfill_id, DagRun.conf, DagRun.overridden_by)


def _runs_stmt() -> Any:
    return (select(DagRun.id, DagRun.state, DagRun.previous_run_id, DagRun.version_hash, DagVersion.code_snapshot,
                   *_FACTS)
            .outerjoin(DagVersion, and_(DagVersion.dag_id == DagRun.dag_id,
                                        DagVersion.version_hash == DagRun.version_hash)))


@dataclass(frozen=True)
class RunRows:
    """A DAG's runs as `verify` compares them: each as an event would record it now (run_cover, with every digest:
    compared only with an event that recorded one), and the facts of its row events state (run_facts)."""

    covers: dict[int, dict[str, Any]]
    facts: dict[int, dict[str, Any]]


def runs(session: Session, dag_id: str) -> RunRows:
    """Each run of the DAG, its task instances, tries and lineage writes."""
    tasks: dict[int, list[TaskRow]] = {}
    for run_id, task_id, map_index, try_number, state in session.execute(
            select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskInstance.try_number,
                   TaskInstance.state).where(TaskInstance.dag_id == dag_id).execution_options(yield_per=BATCH)):
        tasks.setdefault(run_id, []).append((task_id, map_index, try_number, state))
    tries: dict[int, list[TryRow]] = {}
    for run_id, *row in session.execute(
            select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskTry.try_number,
                   TaskTry.state, TaskTry.dag_version).join(TaskTry, TaskTry.task_instance_id == TaskInstance.id)
            .where(TaskInstance.dag_id == dag_id).execution_options(yield_per=BATCH)):
        tries.setdefault(run_id, []).append((row[0], row[1], row[2], row[3], row[4]))
    writes: dict[int, list[WriteRow]] = {}
    for run_id, *row in session.execute(
            select(LineageWrite.run_id, *_WRITE_COLUMNS).where(LineageWrite.dag_id == dag_id)
            .execution_options(yield_per=BATCH)):
        writes.setdefault(run_id, []).append((row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]))
    found = RunRows({}, {})
    for run in session.execute(_runs_stmt().where(DagRun.dag_id == dag_id).execution_options(yield_per=BATCH)):
        run_id, state, previous, version, code, *facts = run
        found.covers[run_id] = run_cover(run_id, state, previous, version, code,
                                         tries=tries_digest(tasks.get(run_id, []), only_finished=False),
                                         try_rows=rows_digest(tries.get(run_id, [])),
                                         writes=rows_digest(writes.get(run_id, [])))
        found.facts[run_id] = run_facts(*facts)
    return found


_WRITE_COLUMNS = (LineageWrite.task_id, LineageWrite.try_number, LineageWrite.dataset, LineageWrite.partition,
                  LineageWrite.dag_version, LineageWrite.try_state, LineageWrite.rows, LineageWrite.path)


def runs_in_range(session: Session, dag_id: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The DAG's runs (overridden ones too) with a logical date in [start, end], as an export holds them: as an
    event records them, and the facts of their rows (run_facts)."""
    rows = session.execute(_runs_stmt().where(DagRun.dag_id == dag_id, DagRun.logical_date >= start,
                                              DagRun.logical_date <= end)
                           .order_by(DagRun.logical_date, DagRun.id))
    return [{**run_cover(*row[:5]), **run_facts(*row[5:])} for row in rows]


def tries(session: Session, run_ids: list[int]) -> list[dict[str, Any]]:
    """The task instances of these runs: their last try's number and outcome."""
    found = []
    for i in range(0, len(run_ids), BATCH):
        found += [{"run_id": r, "task_id": t, "map_index": m, "try_number": n, "state": s}
                  for r, t, m, n, s in session.execute(
                      select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                             TaskInstance.try_number, TaskInstance.state)
                      .where(TaskInstance.run_id.in_(run_ids[i:i + BATCH]))
                      .order_by(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index))]
    return found


def try_rows(session: Session, run_ids: list[int]) -> list[dict[str, Any]]:
    """The tries of these runs: each one's number, state and the version whose code it ran."""
    found = []
    for i in range(0, len(run_ids), BATCH):
        found += [{"run_id": r, "task_id": t, "map_index": m, "try_number": n, "state": s, "dag_version": v}
                  for r, t, m, n, s, v in session.execute(
                      select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskTry.try_number,
                             TaskTry.state, TaskTry.dag_version)
                      .join(TaskTry, TaskTry.task_instance_id == TaskInstance.id)
                      .where(TaskInstance.run_id.in_(run_ids[i:i + BATCH]))
                      .order_by(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                                TaskTry.try_number))]
    return found


def writes(session: Session, run_ids: list[int]) -> list[dict[str, Any]]:
    """The lineage writes of these runs."""
    names = ("task_id", "try_number", "dataset", "partition", "dag_version", "try_state", "rows", "path")
    found = []
    for i in range(0, len(run_ids), BATCH):
        found += [{"run_id": row[0], **dict(zip(names, row[1:], strict=True))}
                  for row in session.execute(select(LineageWrite.run_id, *_WRITE_COLUMNS)
                                             .where(LineageWrite.run_id.in_(run_ids[i:i + BATCH]))
                                             .order_by(LineageWrite.run_id, LineageWrite.id))]
    return found


def first_place(session: Session, dag_id: str, run_ids: list[int]) -> int | None:
    """The place in the DAG's chain of the first event about any of these runs."""
    found: list[int] = []
    for i in range(0, len(run_ids), BATCH):
        n = session.scalar(select(func.min(Event.seq)).where(Event.dag_id == dag_id,
                                                             Event.run_id.in_(run_ids[i:i + BATCH])))
        if n is not None:
            found.append(n)
    return min(found) if found else None


def versions(session: Session, dag_id: str | None = None, hashes: list[str] | None = None) -> list[DagVersion]:
    stmt = select(DagVersion).order_by(DagVersion.id)
    if dag_id is not None:
        stmt = stmt.where(DagVersion.dag_id == dag_id)
    if hashes is not None:
        stmt = stmt.where(DagVersion.version_hash.in_(hashes))
    return list(session.scalars(stmt))


def bundles(session: Session, hashes: list[str] | None = None) -> dict[str, str]:
    stmt = select(CodeBundle.bundle_hash, CodeBundle.manifest)
    if hashes is not None:
        stmt = stmt.where(CodeBundle.bundle_hash.in_(hashes))
    return {h: m for h, m in session.execute(stmt)}


def blobs(session: Session, shas: list[str] | None = None) -> Iterator[tuple[str, bytes]]:
    """(sha256 key, stored compressed bytes) of each blob, or of these."""
    if shas is None:
        yield from session.execute(select(CodeBlob.sha256, CodeBlob.data).execution_options(yield_per=100)).tuples()
        return
    for i in range(0, len(shas), BATCH):
        yield from session.execute(select(CodeBlob.sha256, CodeBlob.data)
                                   .where(CodeBlob.sha256.in_(shas[i:i + BATCH]))).tuples()
