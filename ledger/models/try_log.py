from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base


class TryLog(Base):
    """The log of a try that ran on another host (a Celery worker), as the job that held its run received it,
    kept once the try has ended: readable wherever the database is, after the worker is gone."""

    __tablename__ = "try_log"

    task_instance_id: Mapped[int] = mapped_column(ForeignKey("task_instance.id"), primary_key=True)
    try_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str | None] = mapped_column(String(250))  # the worker that ran it
    text: Mapped[str] = mapped_column(Text)
