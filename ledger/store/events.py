"""The append-only events table: every change to a timeline, with time, actor and details."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import String, select
from sqlalchemy import cast as cast_sql
from sqlalchemy.orm import Session

from ledger.core.mapping import split_label
from ledger.models import Event, SignalRecord, tables
from ledger.store import chain

EVENTS = tables.event
_COLUMNS = ("at", "kind", "actor", "dag_id", "run_id", "details")


def record(session: Session, kind: str, *, at: datetime, actor: str, dag_id: str | None = None,
           run_id: int | None = None, **details: Any) -> None:
    record_many(session, [{"at": at, "kind": kind, "actor": actor, "dag_id": dag_id, "run_id": run_id,
                           "details": details}])


def record_many(session: Session, rows: list[dict[str, Any]]) -> None:
    """Append events; each row has at, kind, actor and details, and may have dag_id and run_id.

    Inserted as the transaction commits, each with its place in its chain and its hash (ledger/store/chain.py); a
    statement of the session on the event table before then finds them all the same."""
    if rows:
        session.flush()  # (as when events were inserted at once: what the caller changed is written before them)
        chain.to_link(session, [{c: r.get(c) for c in _COLUMNS} for r in rows])


def written_ids(session: Session) -> list[int]:
    """The ids of the events this session appended (inside its transaction, they are written out first: read once
    it has committed, they cost nothing): a job tells its own changes from other processes' by them
    (ledger.store.loop.events_since)."""
    return chain.written_ids(session)


def listing(session: Session, *, dag_id: str | None = None, run_id: int | None = None,
            kinds: list[str] | None = None, limit: int | None = None, task_id: str | None = None,
            before: int | None = None) -> list[Event]:
    """Events, oldest first: with `limit`, the newest N (of those with an id below `before`, the keyset of the
    next older page). `task_id` keeps those about one task: its id is their details' `task_id` or one of their
    `tasks` (a clear or a mark of several). The JSON text is searched for the quoted id, portably on SQLite and
    PostgreSQL, and each match is checked exactly."""
    stmt = select(Event)
    if dag_id is not None:
        stmt = stmt.where(Event.dag_id == dag_id)
    if run_id is not None:
        stmt = stmt.where(Event.run_id == run_id)
    if kinds:
        stmt = stmt.where(Event.kind.in_(kinds))
    if before is not None:
        stmt = stmt.where(Event.id < before)
    if task_id is not None:
        # the quoted id, or its start: a mapped task's instances are named `task[i]` in lists of tasks
        stmt = stmt.where(cast_sql(Event.details, String).contains(json.dumps(task_id)[:-1], autoescape=True))
        about: list[Event] = []
        newest_first = session.scalars(stmt.order_by(Event.id.desc()).execution_options(yield_per=500))
        for e in newest_first:  # read in batches, up to the newest `limit` that match
            if _about_task(e.details, task_id):
                about.append(e)
                if limit is not None and len(about) >= limit:
                    break
        newest_first.close()
        return about[::-1]
    if limit is None:
        return list(session.scalars(stmt.order_by(Event.id)))
    return list(session.scalars(stmt.order_by(Event.id.desc()).limit(limit)))[::-1]


def _about_task(details: dict[str, Any] | None, task_id: str) -> bool:
    details = details or {}
    tasks = details.get("tasks")
    return details.get("task_id") == task_id or (
        isinstance(tasks, list) and any(isinstance(t, str) and split_label(t)[0] == task_id for t in tasks))


def as_json(event: Event) -> dict[str, Any]:
    return {"id": event.id, "at": event.at.isoformat(), "kind": event.kind, "actor": event.actor,
            "dag_id": event.dag_id, "run_id": None if event.run_id is None else str(event.run_id),
            "details": event.details}


# -- task state signals, listed with the events ---------------------------------------------------------

TASK_STATE_KIND = "task_state_signal"
TASK_STATE_PREFIX = "ledger.task."  # the keys of task state signals: ledger.task.<dag>.<task>


def listing_json(session: Session, *, dag_id: str | None = None, run_id: int | None = None,
                 kinds: list[str] | None = None, limit: int | None = None,
                 task_signals: bool = True, task_id: str | None = None, before: int | None = None,
                 before_signal: int | None = None) -> list[dict[str, Any]]:
    """The events as JSON rows (as_json), oldest first, with the task state signals among them.

    Task state signals are stored once, in the signal table, and not written as events too (each is a
    `task_try` change already, and the scheduler sends them in its hot loop); here they are read from
    there and merged in by time as rows of kind `task_state_signal` with no event id (the signal id is
    in the details). `limit` is the newest N rows of the merged list; the next older page is the one
    `before` the oldest event id and `before_signal` the oldest signal id of this one (page_keys)."""
    found = [(e.at, 0, e.id, as_json(e)) for e in listing(session, dag_id=dag_id, run_id=run_id, kinds=kinds,
                                                           limit=limit, task_id=task_id, before=before)]
    if task_signals and (not kinds or TASK_STATE_KIND in kinds):
        found += [(s.sent_at, 1, s.id, task_state_as_json(s, dag_id))
                  for s in task_state_signals(session, dag_id=dag_id, run_id=run_id, limit=limit, task_id=task_id,
                                              before=before_signal)]
        found.sort(key=lambda row: row[:3])
    rows = [row[3] for row in found]
    return rows[-limit:] if limit is not None else rows


def page_keys(rows: list[dict[str, Any]], *, before: int | None, before_signal: int | None
              ) -> tuple[int | None, int | None]:
    """The keyset of the page older than `rows` (listing_json's, of a listing read `before`, `before_signal`):
    the oldest event id and the oldest task state signal id among them; a kind absent from the page keeps its
    key (every row of it not shown is older than the page)."""
    events_ = [r["id"] for r in rows if r["id"] is not None]
    signals_ = [r["details"]["signal_id"] for r in rows if r["id"] is None]
    return (min(events_) if events_ else before), (min(signals_) if signals_ else before_signal)


def task_state_signals(session: Session, *, dag_id: str | None = None, run_id: int | None = None,
                       limit: int | None = None, task_id: str | None = None,
                       before: int | None = None) -> list[SignalRecord]:
    prefix = TASK_STATE_PREFIX + (f"{dag_id}." if dag_id is not None else "")
    stmt = select(SignalRecord).where(SignalRecord.key.startswith(prefix, autoescape=True))
    if dag_id is not None:  # DAG `ops.v2`'s keys start with DAG `ops`'s prefix too
        stmt = stmt.where(SignalRecord.meta["dag_id"].as_string() == dag_id)
    if run_id is not None:
        stmt = stmt.where(SignalRecord.meta["run_id"].as_integer() == run_id)
    if task_id is not None:
        stmt = stmt.where(SignalRecord.meta["task_id"].as_string() == task_id)
    if before is not None:
        stmt = stmt.where(SignalRecord.id < before)
    if limit is not None:
        return list(reversed(session.scalars(stmt.order_by(SignalRecord.id.desc()).limit(limit)).all()))
    return list(session.scalars(stmt.order_by(SignalRecord.id)))


def task_state_as_json(signal: SignalRecord, dag_id: str | None = None) -> dict[str, Any]:
    meta = signal.meta or {}
    run = meta.get("run_id")
    details: dict[str, Any] = {"signal_id": signal.id, "key": signal.key, "version": signal.version,
                               "state": signal.value}
    details.update({k: meta[k] for k in ("task_id", "try_number") if k in meta})
    return {"id": None, "at": signal.sent_at.isoformat(),
            "kind": TASK_STATE_KIND, "actor": signal.sender, "dag_id": meta.get("dag_id", dag_id),
            "run_id": None if run is None else str(run), "details": details}
