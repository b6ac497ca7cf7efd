from __future__ import annotations

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class TryLog(Base):
    """The log of a try that ran on another host (a Celery worker), as the job that held its run received it,
    kept once the try has ended: readable wherever the database is, after the worker is gone."""

    __table__ = tables.try_log

    task_instance_id: Mapped[int]
    try_number: Mapped[int]
    host: Mapped[str | None]
    text: Mapped[str]
