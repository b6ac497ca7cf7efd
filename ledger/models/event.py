from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Event(Base):
    """Append-only audit log: every change to a timeline, with time, actor and details; each event is a link of
    its DAG's hash chain (decision 0260): its place in the chain, the hash of the event before it, what it
    recorded of the rows it reports and its own hash. All four are written when its transaction commits."""

    __table__ = tables.event

    id: Mapped[int]
    at: Mapped[datetime]
    kind: Mapped[str]
    actor: Mapped[str]
    dag_id: Mapped[str | None]
    run_id: Mapped[int | None]
    details: Mapped[dict[str, Any]]
    seq: Mapped[int | None]
    prev_hash: Mapped[str | None]
    covers: Mapped[Any]
    hash: Mapped[str | None]


class EventChain(Base):
    """The head of one hash chain of events: a DAG's (`chain` is its id) or the events' with no DAG (`chain`
    ''). Its row is locked while a transaction links its events, so that concurrent writers keep one chain."""

    __table__ = tables.event_chain

    chain: Mapped[str]
    head_id: Mapped[int | None]
    head_hash: Mapped[str]
    length: Mapped[int]
