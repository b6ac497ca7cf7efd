from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class DatasetEvent(Base):
    """A dataset (one partition of it, for a partitioned dataset) was written by a successful try of a producer
    task; recorded with the try's outcome. `downstream`: a rewrite that consumer runs re-run on (a
    `--downstream` backfill's, and what the re-runs it causes write in turn)."""

    __tablename__ = "dataset_event"
    __table_args__ = (Index("ix_dataset_event_dataset_partition", "dataset", "partition"),
                      Index("ix_dataset_event_dataset_id", "dataset", "id"),  # a dataset's newest first, no sort
                      Index("ix_dataset_event_run_id", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(String(500))
    partition: Mapped[str | None] = mapped_column(String(100))
    alias: Mapped[str | None] = mapped_column(String(500))
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"))
    dag_id: Mapped[str] = mapped_column(String(250))
    task_id: Mapped[str] = mapped_column(String(250))
    try_number: Mapped[int] = mapped_column(Integer)
    downstream: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class DatasetConsumed(Base):
    """An event a consumer run consumed; `cause`: the event made the run this one overrode stale, and is why
    this run exists."""

    __tablename__ = "dataset_consumed"
    __table_args__ = (Index("ix_dataset_consumed_run_id", "run_id"), Index("ix_dataset_consumed_event_id", "event_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"))
    dag_id: Mapped[str] = mapped_column(String(250), index=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("dataset_event.id"))
    cause: Mapped[bool] = mapped_column(Boolean, default=False)


class DatasetTally(Base):
    """What was written of a dataset, kept as the rows are written (ledger/store/dataset_tally.py): per dataset and
    source (`event`: its dataset events, `write`: its recorded writes, lineage_write) how many rows, how many
    distinct partitions they name and the newest row's id; the dataset graph reads these instead of counting."""

    __tablename__ = "dataset_tally"

    dataset: Mapped[str] = mapped_column(String(500), primary_key=True)
    source: Mapped[str] = mapped_column(String(10), primary_key=True)
    rows: Mapped[int] = mapped_column(Integer)
    partitions: Mapped[int] = mapped_column(Integer)
    newest_id: Mapped[int] = mapped_column(Integer)
