from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class XCom(Base):
    """A value a try passed on (its return value, or context.xcom_push): kept per try, with its run, so an
    overridden run keeps the values its tries made."""

    __tablename__ = "xcom"
    __table_args__ = (Index("ix_xcom_run_id", "run_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"))
    task_id: Mapped[str] = mapped_column(String(250))
    map_index: Mapped[int] = mapped_column(Integer, default=-1, server_default=text("-1"))  # -1: not mapped
    try_number: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(250))
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
