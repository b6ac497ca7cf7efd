from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class LineageWrite(Base):
    """A partition of a dataset written by a try of a task of a run (with that run's DAG version)."""

    __table__ = tables.lineage_write

    id: Mapped[int]
    dataset: Mapped[str]
    partition: Mapped[str]
    run_id: Mapped[int]
    dag_id: Mapped[str]
    task_id: Mapped[str]
    try_number: Mapped[int]
    dag_version: Mapped[str]
    try_state: Mapped[str]
    rows: Mapped[int | None]
    path: Mapped[str | None]
    written_at: Mapped[datetime]
    recorded_at: Mapped[datetime]
