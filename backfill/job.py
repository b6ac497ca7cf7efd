"""BackfillJob: the DagRunJob that executes the runs of one backfill, which it holds from creation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ledger.models import Backfill, DagRun
from ledger.states import BackfillState, RunState
from ledger.store import events
from ledger.store import jobs as job_store
from ledger.store.backfills import Progress, finish_backfill, progress_of
from scheduler.job import DagRunJob, LoopReport


def cancel_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str, stale_after: float,
                    held_by: int | None = None) -> list[int]:
    """Mark the backfill cancelled and fail its unfinished runs that no live job (other than `held_by`)
    is executing. Finished runs stay as they are. Returns the ids of the runs failed."""
    row = session.get(Backfill, backfill_id)
    assert row is not None
    if row.state == BackfillState.RUNNING.value:
        row.state, row.ended_at = BackfillState.CANCELLED.value, now
        events.record(session, "backfill_cancelled", at=now, actor=actor, dag_id=row.dag_id,
                      backfill_id=backfill_id)
    runs = list(session.scalars(select(DagRun).where(DagRun.backfill_id == backfill_id,
                                                     DagRun.state.in_(job_store.UNFINISHED))))
    failed = []
    for run in runs:
        if run.lock_holder is not None and run.lock_holder != held_by and job_store.job_alive(
                session, run.lock_holder, now=now, stale_after=stale_after):
            continue  # its job sees the cancellation and fails it itself
        before = run.state
        session.execute(update(DagRun).where(DagRun.id == run.id).values(
            state=RunState.FAILED.value, ended_at=now, lock_holder=None))
        events.record(session, "run_state_changed", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                      **{"from": before, "to": RunState.FAILED.value, "reason": f"backfill {backfill_id} cancelled"})
        failed.append(run.id)
    return failed


@dataclass
class BackfillJob(DagRunJob):
    backfill_id: int = 0
    job_type: str = "BackfillJob"
    on_progress: Callable[[Progress], None] | None = None
    cancelled: bool = False
    _extra: dict[str, Any] = field(default_factory=dict)

    def claim_filter(self) -> dict[str, Any]:
        return {"backfill_id": self.backfill_id}

    def loop_once(self) -> LoopReport:
        with self.sessions.begin() as session:
            row = session.get(Backfill, self.backfill_id)
            if row is not None and row.state == BackfillState.CANCELLED.value:
                self.cancelled = self.stopping = True
        report = LoopReport() if self.stopping else super().loop_once()
        with self.sessions.begin() as session:
            progress = progress_of(session, self.backfill_id)
        if self.on_progress is not None:
            self.on_progress(progress)
        return report

    def shutdown(self) -> None:
        super().shutdown()
        now = self.clock.now()
        with self.sessions.begin() as session:
            if self.cancelled:
                cancel_backfill(session, self.backfill_id, now=now, actor=self.actor,
                                stale_after=self.settings.lock_timeout, held_by=self.job_id)
            finish_backfill(session, self.backfill_id, now=now, actor=self.actor)
