from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class TaskInstance(Base):
    """A task of a run's own DAG version; every task instance belongs to a DagRun."""

    __table__ = tables.task_instance

    id: Mapped[int]
    run_id: Mapped[int]
    dag_id: Mapped[str]
    task_id: Mapped[str]
    map_index: Mapped[int]
    state: Mapped[str]
    try_number: Mapped[int]
    max_tries: Mapped[int]
    priority_weight: Mapped[int]
    pool: Mapped[str]
    pool_slots: Mapped[int]
    queued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    next_try_at: Mapped[datetime | None]
    job_id: Mapped[int | None]
    pid: Mapped[int | None]
    hostname: Mapped[str | None]
    signal_armed: Mapped[bool]
    signal_request: Mapped[str | None]
    signal_id: Mapped[int | None]
    dag_version: Mapped[str | None]


class TaskTry(Base):
    """One row per try of a task instance; the unique key makes a try impossible to start twice."""

    __table__ = tables.task_try

    id: Mapped[int]
    task_instance_id: Mapped[int]
    try_number: Mapped[int]
    state: Mapped[str]
    job_id: Mapped[int | None]
    pid: Mapped[int | None]
    hostname: Mapped[str | None]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    dag_version: Mapped[str | None]
    rendered: Mapped[dict[str, Any] | None]
