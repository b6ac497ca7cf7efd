"""Callback calls: requested with the event they are about, claimed and run by a job, their outcome kept.

A call is requested in the same transaction that records its event (a task's try failed, a run ended, a
deadline passed), so a crash can neither lose it nor make it twice. A job claims pending calls, runs each
once in a process of its own, and records the outcome (ok, error, timeout) with an event. A call that was
running in a job that died is recorded `lost` and not made again: it may have sent its message already.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ledger.core.callbacks import callback_target
from ledger.core.states import JobState
from ledger.models import Callback, DagRun, Job
from ledger.store import events

PENDING, RUNNING = "pending", "running"
OUTCOMES = ("ok", "error", "timeout", "lost")


def run_context(run: DagRun) -> dict[str, Any]:
    """What every callback of a run hears about the run (as JSON)."""
    return {"dag_id": run.dag_id, "run_id": run.id, "run_type": run.run_type, "dag_version": run.version_hash,
            "logical_date": run.logical_date.isoformat(), "data_interval_start": run.data_interval_start.isoformat(),
            "data_interval_end": run.data_interval_end.isoformat(), "conf": dict(run.conf or {}),
            "task_id": None, "try_number": None, "state": run.state, "reason": None, "run_state": run.state,
            "run_started": run.started_at.isoformat() if run.started_at is not None else None,
            "run_ended": run.ended_at.isoformat() if run.ended_at is not None else None}


def request(session: Session, *, kind: str, dag_id: str, run_id: int, dag_version: str,
            described: list[dict[str, Any]], context: dict[str, Any], now: datetime,
            task_id: str | None = None, try_number: int | None = None) -> int:
    """One pending call per recorded callable of `kind`; how many were requested."""
    for position, description in enumerate(described):
        session.add(Callback(kind=kind, dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number,
                             dag_version=dag_version, position=position, target=callback_target(description),
                             state=PENDING, context={"kind": kind, **context}, created_at=now))
    return len(described)


def claim(session: Session, job_id: int, *, limit: int, now: datetime, actor: str) -> list[Callback]:
    """Pending calls for this job to make (oldest first); calls left running by a job that ended are lost."""
    dead = select(Callback).join(Job, Job.id == Callback.job_id).where(
        Callback.state == RUNNING, Job.state != JobState.RUNNING.value)
    for call in session.scalars(dead):
        finish(session, call, "lost", "its job ended while it ran; not made again (it may have done its work)",
               now=now, actor=actor)
    if limit <= 0:
        return []
    pending = list(session.scalars(select(Callback).where(Callback.state == PENDING).order_by(Callback.id)
                                   .limit(limit).with_for_update(skip_locked=True)))
    if pending:
        session.execute(update(Callback).where(Callback.id.in_([c.id for c in pending]))
                        .values(state=RUNNING, job_id=job_id, started_at=now))
        for call in pending:
            call.state, call.job_id, call.started_at = RUNNING, job_id, now
    return pending


def claimable(session: Session) -> int:
    """How many calls a claim would take or record as lost (verify mode's check of a claim left out)."""
    dead = select(func.count()).select_from(Callback).join(Job, Job.id == Callback.job_id).where(
        Callback.state == RUNNING, Job.state != JobState.RUNNING.value)
    pending = select(func.count()).select_from(Callback).where(Callback.state == PENDING)
    return (session.scalar(dead) or 0) + (session.scalar(pending) or 0)


def finish(session: Session, call: Callback, state: str, message: str | None, *, now: datetime, actor: str) -> None:
    """Record a call's outcome, and an event `callback_<state>` naming its DAG, run and task."""
    assert state in OUTCOMES
    call.state, call.message, call.ended_at = state, message, now
    events.record(session, f"callback_{state}", at=now, actor=actor, dag_id=call.dag_id, run_id=call.run_id,
                  callback_id=call.id, callback=call.kind, task_id=call.task_id, try_number=call.try_number,
                  target=call.target, message=message)


def by_ids(session: Session, ids: list[int]) -> dict[int, Callback]:
    return {c.id: c for c in session.scalars(select(Callback).where(Callback.id.in_(ids)))} if ids else {}


def listing(session: Session, *, dag_id: str | None = None, run_id: int | None = None,
            limit: int = 100) -> list[Callback]:
    stmt = select(Callback).order_by(Callback.id.desc()).limit(limit)
    if dag_id is not None:
        stmt = stmt.where(Callback.dag_id == dag_id)
    if run_id is not None:
        stmt = stmt.where(Callback.run_id == run_id)
    return list(reversed(list(session.scalars(stmt))))


def as_json(call: Callback) -> dict[str, Any]:
    return {"id": call.id, "kind": call.kind, "dag_id": call.dag_id, "run_id": str(call.run_id),
            "task_id": call.task_id, "try_number": call.try_number, "dag_version": call.dag_version,
            "target": call.target, "state": call.state, "message": call.message,
            "created_at": call.created_at.isoformat(),
            "started_at": call.started_at.isoformat() if call.started_at else None,
            "ended_at": call.ended_at.isoformat() if call.ended_at else None}
