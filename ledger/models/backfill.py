from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Backfill(Base):
    """A request to rewrite a DAG's history over a range of logical dates."""

    __table__ = tables.backfill

    id: Mapped[int]
    dag_id: Mapped[str]
    range_start: Mapped[datetime]
    range_end: Mapped[datetime]
    reprocess: Mapped[str]
    state: Mapped[str]
    requested_by: Mapped[str]
    backwards: Mapped[bool]
    submit_only: Mapped[bool]
    max_active_runs: Mapped[int | None]
    conf: Mapped[dict[str, Any] | None]
    downstream: Mapped[bool]
    created_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
