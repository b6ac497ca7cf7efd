from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime

LIVE = "state != 'overridden'"
# one *live* run per (dag, date); overridden runs may share the date. PostgreSQL's WHERE is added by
# `with_postgresql_options` when a PostgreSQL engine is made: naming it here would load SQLAlchemy's postgresql
# dialect (to check the option) in every process that imports the models, a SQLite ledger's commands included.
LIVE_DATE = Index("uq_dag_run_live_date", "dag_id", "logical_date", unique=True, sqlite_where=text(LIVE))


def with_postgresql_options() -> None:
    """The models' PostgreSQL-only options, added once a PostgreSQL engine is made (SQLAlchemy's documented
    writable `dialect_kwargs`; setting it again is a no-op)."""
    LIVE_DATE.dialect_kwargs["postgresql_where"] = text(LIVE)


class DagRun(Base):
    """A run of a DAG for one logical date; the live runs of a DAG form a chain through `previous_run_id`."""

    __tablename__ = "dag_run"
    __table_args__ = (
        LIVE_DATE,
        Index("ix_dag_run_dag_id_logical_date", "dag_id", "logical_date"),
        Index("ix_dag_run_state", "state"),
        Index("ix_dag_run_backfill_id", "backfill_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(250))
    logical_date: Mapped[datetime] = mapped_column(UtcDateTime)
    data_interval_start: Mapped[datetime] = mapped_column(UtcDateTime)
    data_interval_end: Mapped[datetime] = mapped_column(UtcDateTime)
    run_type: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    previous_run_id: Mapped[int | None] = mapped_column(ForeignKey("dag_run.id"))
    overridden_by: Mapped[int | None] = mapped_column(ForeignKey("dag_run.id"))
    version_hash: Mapped[str] = mapped_column(String(64))
    schedule: Mapped[str] = mapped_column(String(250), default="None")
    backfill_id: Mapped[int | None] = mapped_column(ForeignKey("backfill.id"))
    lock_holder: Mapped[int | None] = mapped_column(Integer)
    conf: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    deadline_missed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # when its DAG's deadline passed
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    overridden_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
