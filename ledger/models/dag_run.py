from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class DagRun(Base):
    """A run of a DAG for one logical date; the live runs of a DAG form a chain through `previous_run_id`."""

    __table__ = tables.dag_run

    id: Mapped[int]
    dag_id: Mapped[str]
    logical_date: Mapped[datetime]
    data_interval_start: Mapped[datetime]
    data_interval_end: Mapped[datetime]
    run_type: Mapped[str]
    state: Mapped[str]
    previous_run_id: Mapped[int | None]
    overridden_by: Mapped[int | None]
    version_hash: Mapped[str]
    schedule: Mapped[str]
    backfill_id: Mapped[int | None]
    lock_holder: Mapped[int | None]
    conf: Mapped[dict[str, Any] | None]
    deadline_missed_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    overridden_at: Mapped[datetime | None]
