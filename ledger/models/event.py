from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Event(Base):
    """Append-only audit log: every change to a timeline, with time, actor and details; each event is a link of
    its DAG's hash chain (decision 0260): its place in the chain, the hash of the event before it, what it
    recorded of the rows it reports and its own hash. All four are written when its transaction commits."""

    __tablename__ = "event"
    __table_args__ = (Index("ix_event_dag_id", "dag_id"), Index("ix_event_run_id", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(40))
    actor: Mapped[str] = mapped_column(String(250))
    dag_id: Mapped[str | None] = mapped_column(String(250))
    run_id: Mapped[int | None] = mapped_column(Integer)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    seq: Mapped[int | None] = mapped_column(Integer)
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    covers: Mapped[Any] = mapped_column(JSON, nullable=True)
    hash: Mapped[str | None] = mapped_column(String(64))


class EventChain(Base):
    """The head of one hash chain of events: a DAG's (`chain` is its id) or the events' with no DAG (`chain`
    ''). Its row is locked while a transaction links its events, so that concurrent writers keep one chain."""

    __tablename__ = "event_chain"

    chain: Mapped[str] = mapped_column(String(250), primary_key=True)
    head_id: Mapped[int | None] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    length: Mapped[int] = mapped_column(Integer)
