"""Backfill rows: progress counts and the final state once every run has finished."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.models import Backfill, DagRun, TaskInstance
from ledger.states import BackfillState, RunState
from ledger.store import events


@dataclass(frozen=True)
class Progress:
    runs_total: int
    runs_done: int
    runs_failed: int
    tasks: dict[str, int]


def progress_of(session: Session, backfill_id: int) -> Progress:
    runs = dict(session.execute(select(DagRun.state, func.count()).where(DagRun.backfill_id == backfill_id)
                                .group_by(DagRun.state)).tuples().all())
    tasks = dict(session.execute(
        select(TaskInstance.state, func.count()).join(DagRun, DagRun.id == TaskInstance.run_id)
        .where(DagRun.backfill_id == backfill_id, DagRun.state != RunState.OVERRIDDEN.value)
        .group_by(TaskInstance.state)).tuples().all())
    live_total = sum(n for s, n in runs.items() if s != RunState.OVERRIDDEN.value)
    done = runs.get(RunState.SUCCESS.value, 0) + runs.get(RunState.FAILED.value, 0)
    return Progress(live_total, done, runs.get(RunState.FAILED.value, 0), tasks)


def finish_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str) -> str:
    """Set the backfill's final state once none of its runs is unfinished."""
    row = session.get(Backfill, backfill_id)
    assert row is not None
    if row.state != BackfillState.RUNNING.value:
        return row.state
    p = progress_of(session, backfill_id)
    if p.runs_done < p.runs_total:
        return row.state
    row.state = (BackfillState.FAILED if p.runs_failed else BackfillState.SUCCESS).value
    row.ended_at = now
    events.record(session, "backfill_finished", at=now, actor=actor, dag_id=row.dag_id, backfill_id=backfill_id,
                  state=row.state, runs=p.runs_total, failed_runs=p.runs_failed)
    return row.state
