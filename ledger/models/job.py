from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Job(Base):
    """A scheduler or backfill process; its heartbeat keeps its run locks valid."""

    __table__ = tables.job

    id: Mapped[int]
    job_type: Mapped[str]
    state: Mapped[str]
    hostname: Mapped[str]
    pid: Mapped[int]
    started_at: Mapped[datetime]
    latest_heartbeat: Mapped[datetime]
    ended_at: Mapped[datetime | None]
