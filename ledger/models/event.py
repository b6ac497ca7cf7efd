from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Event(Base):
    """Append-only audit log: every change to a timeline, with time, actor and details."""

    __tablename__ = "event"
    __table_args__ = (Index("ix_event_dag_id", "dag_id"), Index("ix_event_run_id", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(40))
    actor: Mapped[str] = mapped_column(String(250))
    dag_id: Mapped[str | None] = mapped_column(String(250))
    run_id: Mapped[int | None] = mapped_column(Integer)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
