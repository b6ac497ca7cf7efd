from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Callback(Base):
    """One call of one callback (or notifier) for one event: requested in the transaction that recorded the
    event, run once by a job in a process of its own, its outcome kept (ok, error, timeout, lost)."""

    __table__ = tables.callback

    id: Mapped[int]
    kind: Mapped[str]
    dag_id: Mapped[str]
    run_id: Mapped[int]
    task_id: Mapped[str | None]
    try_number: Mapped[int | None]
    dag_version: Mapped[str]
    position: Mapped[int]
    target: Mapped[str]
    state: Mapped[str]
    context: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    job_id: Mapped[int | None]
    message: Mapped[str | None]
