from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Job(Base):
    """A scheduler or backfill process; its heartbeat keeps its run locks valid."""

    __tablename__ = "job"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_type: Mapped[str] = mapped_column(String(30))
    state: Mapped[str] = mapped_column(String(16))
    hostname: Mapped[str] = mapped_column(String(250))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    latest_heartbeat: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
