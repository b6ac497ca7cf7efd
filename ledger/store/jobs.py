"""Job rows, heartbeats and run locks: a job locks a run before executing it, others leave it alone,
and the lock of a job that stopped heart-beating is taken over (the event says from whom)."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from ledger.core.states import UNFINISHED_RUN_STATES, JobState
from ledger.models import DagRun, Job
from ledger.store import events
from ledger.store.backfills import finishing
from ledger.store.hot import Hot


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
    params = {"job": job_id, "stale": now - timedelta(seconds=stale_after), "limit": limit}
    if run_ids is None and backfill_id is None:  # a scheduler's claim, every few loops: the statement built once
        rows = (_CLAIMABLE_NEWEST if newest_first else _CLAIMABLE_OLDEST).rows(session, params)
    else:
        stmt = _claimable(newest_first)
        if run_ids is not None:
            stmt = stmt.where(DagRun.id.in_(run_ids))
        if backfill_id is not None:
            stmt = stmt.where(finishing(backfill_id, also_run_ids or ()))
        rows = [tuple(r) for r in session.execute(stmt, params)]
    if not rows:
        return []
    _LOCK.run(session, [{"job": job_id, "ids": [run_id for run_id, _holder, _dag in rows]}])
    log = []
    for run_id, was, dag_id in rows:
        loaded = session.identity_map.get(identity_key(DagRun, run_id))
        if loaded is not None:  # a run this session has loaded says so too, as the ORM's update would make it
            set_committed_value(loaded, "lock_holder", job_id)
        if was is None:
            log.append(dict(at=now, kind="lock_taken", actor=actor, dag_id=dag_id, run_id=run_id,
                            details={"job_id": job_id}))
        else:
            log.append(dict(at=now, kind="lock_stolen", actor=actor, dag_id=dag_id, run_id=run_id,
                            details={"job_id": job_id, "from_job_id": was,
                                     "reason": f"job {was} stopped heart-beating"}))
    events.record_many(session, log)
    return [(run_id, was) for run_id, was, _dag in rows]


def _claimable(newest_first: bool) -> Select[tuple[int, int | None, str]]:
    """Unfinished runs that job :job may lock, :limit of them, oldest (or newest) first: nobody holds them, or
    their holder is gone or stopped heart-beating before :stale."""
    holder = Job.__table__.alias("holder")
    return (
        select(DagRun.id, DagRun.lock_holder, DagRun.dag_id)
        .outerjoin(holder, holder.c.id == DagRun.lock_holder)
        .where(DagRun.state.in_(UNFINISHED_RUN_STATES))
        .where(or_(DagRun.lock_holder.is_(None),
                   and_(DagRun.lock_holder != bindparam("job"),
                        or_(holder.c.id.is_(None), holder.c.state != JobState.RUNNING.value,
                            holder.c.latest_heartbeat < bindparam("stale", type_=holder.c.latest_heartbeat.type)))))
        .order_by(*((DagRun.logical_date.desc(), DagRun.id.desc()) if newest_first
                    else (DagRun.logical_date, DagRun.id)))
        .limit(bindparam("limit"))
        .with_for_update(of=DagRun, skip_locked=True))


# built once (building a statement costs more than running it on SQLite): a scheduler claims every few loops
_CLAIMABLE_OLDEST = Hot(_claimable(False))
_CLAIMABLE_NEWEST = Hot(_claimable(True))
_RUNS: Any = DagRun.__table__
_LOCK = Hot(update(_RUNS).where(_RUNS.c.id.in_(bindparam("ids", expanding=True))).values(lock_holder=bindparam("job")))


_LOCAL_HOLDERS = Hot(select(Job.id, Job.pid).where(
    Job.state == JobState.RUNNING.value, Job.hostname == bindparam("host"), Job.id != bindparam("job"),
    Job.id.in_(select(DagRun.lock_holder).where(DagRun.state.in_(UNFINISHED_RUN_STATES)))))


def dead_local_holders(session: Session, job_id: int) -> list[int]:
    """Running jobs on this host, holding unfinished runs, whose process no longer exists."""
    rows = _LOCAL_HOLDERS.rows(session, {"host": socket.gethostname(), "job": job_id})
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
        select(DagRun.id, DagRun.dag_id).where(DagRun.lock_holder == job_id, DagRun.state.in_(UNFINISHED_RUN_STATES))
        .order_by(DagRun.id))]


_HELD_COUNT = Hot(select(func.count()).select_from(DagRun).where(DagRun.lock_holder == bindparam("job"),
                                                                  DagRun.state.in_(UNFINISHED_RUN_STATES)))


def held_count(session: Session, job_id: int) -> int:
    return int(_HELD_COUNT.rows(session, {"job": job_id})[0][0] or 0)


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
