from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class LineageWrite(Base):
    """A partition of a dataset written by a try of a task of a run (with that run's DAG version)."""

    __tablename__ = "lineage_write"
    __table_args__ = (Index("ix_lineage_write_dataset_partition", "dataset", "partition"),
                      Index("ix_lineage_write_dataset_id", "dataset", "id"),  # a dataset's newest first, no sort
                      Index("ix_lineage_write_run_id", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(String(500))
    partition: Mapped[str] = mapped_column(String(500))
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"))
    dag_id: Mapped[str] = mapped_column(String(250))
    task_id: Mapped[str] = mapped_column(String(250))
    try_number: Mapped[int] = mapped_column(Integer)
    dag_version: Mapped[str] = mapped_column(String(64))
    try_state: Mapped[str] = mapped_column(String(20))
    rows: Mapped[int | None] = mapped_column(Integer)
    path: Mapped[str | None] = mapped_column(Text)
    written_at: Mapped[datetime] = mapped_column(UtcDateTime)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime)
