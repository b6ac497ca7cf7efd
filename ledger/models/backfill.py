from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Backfill(Base):
    """A request to rewrite a DAG's history over a range of logical dates."""

    __tablename__ = "backfill"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(250), index=True)
    range_start: Mapped[datetime] = mapped_column(UtcDateTime)
    range_end: Mapped[datetime] = mapped_column(UtcDateTime)
    reprocess: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    requested_by: Mapped[str] = mapped_column(String(250))
    backwards: Mapped[bool] = mapped_column(Boolean, default=False)
    submit_only: Mapped[bool] = mapped_column(Boolean, default=False)
    max_active_runs: Mapped[int | None] = mapped_column(Integer)
    conf: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    downstream: Mapped[bool] = mapped_column(Boolean, default=False)  # its rewrites re-run the consumer runs
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
