from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Callback(Base):
    """One call of one callback (or notifier) for one event: requested in the transaction that recorded the
    event, run once by a job in a process of its own, its outcome kept (ok, error, timeout, lost)."""

    __tablename__ = "callback"
    __table_args__ = (Index("ix_callback_state", "state"), Index("ix_callback_run_id", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))  # task_failure, task_success, task_retry, run_failure, ...
    dag_id: Mapped[str] = mapped_column(String(250))
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"))
    task_id: Mapped[str | None] = mapped_column(String(250))
    try_number: Mapped[int | None] = mapped_column(Integer)
    dag_version: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(Integer)  # which of the callables given for this kind
    target: Mapped[str] = mapped_column(String(500))  # what is called, as the version records it
    state: Mapped[str] = mapped_column(String(16))  # pending, running, ok, error, timeout, lost
    context: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    job_id: Mapped[int | None] = mapped_column(Integer)
    message: Mapped[str | None] = mapped_column(Text)
