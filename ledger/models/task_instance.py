from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class TaskInstance(Base):
    """A task of a run's own DAG version; every task instance belongs to a DagRun."""

    __tablename__ = "task_instance"
    __table_args__ = (
        UniqueConstraint("run_id", "task_id", "map_index"),
        Index("ix_task_instance_state", "state"),
        Index("ix_task_instance_signal_request", "signal_request"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dag_run.id"), nullable=False)
    dag_id: Mapped[str] = mapped_column(String(250))
    task_id: Mapped[str] = mapped_column(String(250))
    # a mapped task's instance number (0..N-1; ledger/core/mapping.py); -1: not mapped, or not expanded yet
    map_index: Mapped[int] = mapped_column(Integer, default=-1, server_default=text("-1"))
    state: Mapped[str] = mapped_column(String(20))
    try_number: Mapped[int] = mapped_column(Integer, default=0)
    max_tries: Mapped[int] = mapped_column(Integer, default=0)
    priority_weight: Mapped[int] = mapped_column(Integer, default=1)
    pool: Mapped[str] = mapped_column(String(250), default="default_pool")
    queued_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    next_try_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    job_id: Mapped[int | None] = mapped_column(Integer)
    pid: Mapped[int | None] = mapped_column(Integer)
    hostname: Mapped[str | None] = mapped_column(String(250))
    # signal-driven tasks (ledger/core/signal_rules.py): a START/RESTART arrived and it may start
    signal_armed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # a STOP or RESTART for its running try, for the job that runs it; and the signal that asked
    signal_request: Mapped[str | None] = mapped_column(String(10))
    signal_id: Mapped[int | None] = mapped_column(Integer)
    # the DAG version its next tries run when it is not its run's: a partial clear on the latest version (decision
    # 0271) leaves the run on its version and gives this task instance the latest; None: its run's version
    dag_version: Mapped[str | None] = mapped_column(String(64), nullable=True)


class TaskTry(Base):
    """One row per try of a task instance; the unique key makes a try impossible to start twice."""

    __tablename__ = "task_try"
    __table_args__ = (UniqueConstraint("task_instance_id", "try_number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_instance_id: Mapped[int] = mapped_column(ForeignKey("task_instance.id"), nullable=False)
    try_number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(20))
    job_id: Mapped[int | None] = mapped_column(Integer)
    pid: Mapped[int | None] = mapped_column(Integer)
    hostname: Mapped[str | None] = mapped_column(String(250))
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # the DAG version whose code this try ran (its run's version when it was queued)
    dag_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the try's templated fields as rendered (Jinja), by field name
    rendered: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
