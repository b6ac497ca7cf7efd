"""The append-only events table: every change to a timeline, with time, actor and details."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from ledger.models import Event

EVENTS = cast(Table, Event.__table__)
_COLUMNS = ("at", "kind", "actor", "dag_id", "run_id", "details")


def record(session: Session, kind: str, *, at: datetime, actor: str, dag_id: str | None = None,
           run_id: int | None = None, **details: Any) -> None:
    record_many(session, [{"at": at, "kind": kind, "actor": actor, "dag_id": dag_id, "run_id": run_id,
                           "details": details}])


def record_many(session: Session, rows: list[dict[str, Any]]) -> None:
    """Append events; each row has at, kind, actor and details, and may have dag_id and run_id.

    A Core insert on the table (one cached statement; executemany for several rows): the ORM's bulk
    insert costs about a millisecond more per call, and events are written in the scheduler's hot loop."""
    if rows:
        session.connection().execute(EVENTS.insert(), [{c: r.get(c) for c in _COLUMNS} for r in rows])


def listing(session: Session, *, dag_id: str | None = None, run_id: int | None = None,
            kinds: list[str] | None = None, limit: int | None = None) -> list[Event]:
    stmt = select(Event).order_by(Event.id)
    if dag_id is not None:
        stmt = stmt.where(Event.dag_id == dag_id)
    if run_id is not None:
        stmt = stmt.where(Event.run_id == run_id)
    if kinds:
        stmt = stmt.where(Event.kind.in_(kinds))
    if limit is not None:
        stmt = select(Event).where(Event.id.in_(
            stmt.with_only_columns(Event.id).order_by(Event.id.desc()).limit(limit))).order_by(Event.id)
    return list(session.scalars(stmt))


def as_json(event: Event) -> dict[str, Any]:
    return {"id": event.id, "at": event.at.isoformat(), "kind": event.kind, "actor": event.actor,
            "dag_id": event.dag_id, "run_id": None if event.run_id is None else str(event.run_id),
            "details": event.details}
