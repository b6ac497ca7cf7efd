"""Job rows, heartbeats and run locks: a job locks a run before executing it, others leave it alone,
and the lock of a job that stopped heart-beating is taken over (the event says from whom)."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from ledger.models import DagRun, Job
from ledger.states import JobState, RunState
from ledger.store import events

UNFINISHED = [RunState.QUEUED.value, RunState.RUNNING.value]


def start_job(session: Session, job_type: str, *, now: datetime) -> Job:
    job = Job(job_type=job_type, state=JobState.RUNNING.value, hostname=socket.gethostname(), pid=os.getpid(),
              started_at=now, latest_heartbeat=now)
    session.add(job)
    session.flush()
    return job


def heartbeat(session: Session, job_id: int, *, now: datetime) -> None:
    session.execute(update(Job).where(Job.id == job_id).values(latest_heartbeat=now))


def end_job(session: Session, job_id: int, *, now: datetime, state: JobState = JobState.SUCCESS) -> None:
    session.execute(update(Job).where(Job.id == job_id).values(state=state.value, ended_at=now,
                                                                 latest_heartbeat=now))


def claim_runs(session: Session, job_id: int, *, now: datetime, stale_after: float, limit: int, actor: str,
               backfill_id: int | None = None, run_ids: list[int] | None = None,
               also_run_ids: list[int] | None = None, newest_first: bool = False) -> list[tuple[int, int | None]]:
    """Lock up to `limit` unfinished live runs that nobody holds or whose holder stopped heart-beating:
    only `run_ids` when given, only the runs of `backfill_id` (and the runs `also_run_ids`) when given.

    Returns (run id, previous holder) pairs; a previous holder means the lock was taken over.
    On PostgreSQL the candidate rows are locked with FOR UPDATE SKIP LOCKED, so concurrent jobs
    never claim the same run.
    """
    if limit <= 0:
        return []
    stale = now - timedelta(seconds=stale_after)
    holder = Job.__table__.alias("holder")
    stmt = (
        select(DagRun.id, DagRun.lock_holder, DagRun.dag_id)
        .outerjoin(holder, holder.c.id == DagRun.lock_holder)
        .where(DagRun.state.in_(UNFINISHED))
        .where(or_(DagRun.lock_holder.is_(None),
                   and_(DagRun.lock_holder != job_id,
                        or_(holder.c.id.is_(None), holder.c.state != JobState.RUNNING.value,
                            holder.c.latest_heartbeat < stale))))
        .order_by(*((DagRun.logical_date.desc(), DagRun.id.desc()) if newest_first
                    else (DagRun.logical_date, DagRun.id)))
        .limit(limit)
        .with_for_update(of=DagRun, skip_locked=True)
    )
    if run_ids is not None:
        stmt = stmt.where(DagRun.id.in_(run_ids))
    if backfill_id is not None:
        from ledger.store.backfills import finishing

        stmt = stmt.where(finishing(backfill_id, also_run_ids or ()))
    rows = list(session.execute(stmt))
    if not rows:
        return []
    session.execute(update(DagRun).where(DagRun.id.in_([r.id for r in rows])).values(lock_holder=job_id))
    log = []
    for r in rows:
        if r.lock_holder is None:
            log.append(dict(at=now, kind="lock_taken", actor=actor, dag_id=r.dag_id, run_id=r.id,
                            details={"job_id": job_id}))
        else:
            log.append(dict(at=now, kind="lock_stolen", actor=actor, dag_id=r.dag_id, run_id=r.id,
                            details={"job_id": job_id, "from_job_id": r.lock_holder,
                                     "reason": f"job {r.lock_holder} stopped heart-beating"}))
    events.record_many(session, log)
    return [(r.id, r.lock_holder) for r in rows]


def dead_local_holders(session: Session, job_id: int) -> list[int]:
    """Running jobs on this host, holding unfinished runs, whose process no longer exists."""
    host = socket.gethostname()
    rows = session.execute(
        select(Job.id, Job.pid).where(Job.state == JobState.RUNNING.value, Job.hostname == host, Job.id != job_id,
                                      Job.id.in_(select(DagRun.lock_holder).where(DagRun.state.in_(UNFINISHED)))))
    dead = []
    for other, pid in rows:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            dead.append(other)
        except PermissionError:
            pass  # alive, owned by someone else
    return dead


def held_runs(session: Session, job_id: int) -> list[tuple[int, str]]:
    """(run id, dag id) of every unfinished run `job_id` holds, oldest first."""
    return [(r.id, r.dag_id) for r in session.execute(
        select(DagRun.id, DagRun.dag_id).where(DagRun.lock_holder == job_id, DagRun.state.in_(UNFINISHED))
        .order_by(DagRun.id))]


def held_count(session: Session, job_id: int) -> int:
    return int(session.scalar(select(func.count()).select_from(DagRun).where(
        DagRun.lock_holder == job_id, DagRun.state.in_(UNFINISHED))) or 0)


def release_runs(session: Session, job_id: int, run_ids: list[int]) -> None:
    if run_ids:
        session.execute(update(DagRun).where(DagRun.id.in_(run_ids), DagRun.lock_holder == job_id)
                        .values(lock_holder=None))


def release_all(session: Session, job_id: int) -> list[tuple[int, str]]:
    """Release every run `job_id` holds; returns (run id, dag id) of each."""
    held = [(r.id, r.dag_id) for r in session.execute(select(DagRun.id, DagRun.dag_id)
                                                       .where(DagRun.lock_holder == job_id))]
    release_runs(session, job_id, [run_id for run_id, _ in held])
    return held


def job_alive(session: Session, job_id: int, *, now: datetime, stale_after: float) -> bool:
    job = session.get(Job, job_id)
    return bool(job and job.state == JobState.RUNNING.value
                and job.latest_heartbeat >= now - timedelta(seconds=stale_after))
