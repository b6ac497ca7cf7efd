from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Dag(Base):
    """One row per DAG id ever seen in the DAGs folder; structure lives in dag_version."""

    __table__ = tables.dag

    dag_id: Mapped[str]
    fileloc: Mapped[str]
    current_version: Mapped[str | None]
    schedule: Mapped[str]
    timezone: Mapped[str]
    is_paused: Mapped[bool]
    hold_queued: Mapped[bool]
    is_active: Mapped[bool]
    last_parsed_at: Mapped[datetime | None]
