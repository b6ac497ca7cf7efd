from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class DatasetEvent(Base):
    """A dataset (one partition of it, for a partitioned dataset) was written by a successful try of a producer
    task; recorded with the try's outcome. `downstream`: a rewrite that consumer runs re-run on (a
    `--downstream` backfill's, and what the re-runs it causes write in turn)."""

    __table__ = tables.dataset_event

    id: Mapped[int]
    dataset: Mapped[str]
    partition: Mapped[str | None]
    alias: Mapped[str | None]
    extra: Mapped[dict[str, Any] | None]
    run_id: Mapped[int]
    dag_id: Mapped[str]
    task_id: Mapped[str]
    try_number: Mapped[int]
    downstream: Mapped[bool]
    created_at: Mapped[datetime]


class DatasetConsumed(Base):
    """An event a consumer run consumed; `cause`: the event made the run this one overrode stale, and is why
    this run exists."""

    __table__ = tables.dataset_consumed

    id: Mapped[int]
    run_id: Mapped[int]
    dag_id: Mapped[str]
    event_id: Mapped[int]
    cause: Mapped[bool]


class DatasetTally(Base):
    """What was written of a dataset, kept as the rows are written (ledger/store/dataset_tally.py): per dataset and
    source (`event`: its dataset events, `write`: its recorded writes, lineage_write) how many rows, how many
    distinct partitions they name and the newest row's id; the dataset graph reads these instead of counting."""

    __table__ = tables.dataset_tally

    dataset: Mapped[str]
    source: Mapped[str]
    rows: Mapped[int]
    partitions: Mapped[int]
    newest_id: Mapped[int]
