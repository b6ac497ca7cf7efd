from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Dag(Base):
    """One row per DAG id ever seen in the DAGs folder; structure lives in dag_version."""

    __tablename__ = "dag"

    dag_id: Mapped[str] = mapped_column(String(250), primary_key=True)
    fileloc: Mapped[str] = mapped_column(Text)
    current_version: Mapped[str | None] = mapped_column(String(64))
    schedule: Mapped[str] = mapped_column(String(250), default="None")
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    is_paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # paused with --stop-queued: its queued runs do not start either (until unpaused)
    hold_queued: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    last_parsed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
