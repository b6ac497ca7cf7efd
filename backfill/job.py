"""BackfillJob: the DagRunJob that executes the runs of one backfill, which it holds from creation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.states import BackfillState
from ledger.scheduler.loop.cadence import Cadence
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.services.operations import cancel_backfill
from ledger.store import backfills as backfill_store
from ledger.store import events
from ledger.store.backfills import Progress, count_unfinished, finish_backfill, progress_of, waiting_reasons
from ledger.store.transitions import move_backfill

PROGRESS_EVERY = 0.5  # seconds: how stale the backfill's progress line may be while only tries move


@dataclass
class BackfillJob(DagRunJob):
    """Executes the runs of one backfill until every one has finished (or the backfill is cancelled, or the
    job is stopped). Runs it cannot start yet (max_active_runs, a run another job holds, pools,
    depends_on_past) keep it waiting, and `waiting` says why."""

    backfill_id: int = 0
    job_type: str = "BackfillJob"
    on_progress: Callable[[Progress], None] | None = None
    cancelled: bool = False
    interrupted: bool = False  # stopped with runs unfinished: the backfill is now `interrupted`
    waiting: list[tuple[int, str, bool]] = field(default_factory=list)  # (run id, why it waits, blocked)
    blocked: bool = False  # stopped: every unfinished run waits on a failed previous run (depends_on_past)
    _unfinished: int = 1
    _wait_look: Cadence = field(init=False)  # why runs wait is read at most every poll_interval
    _progress: Progress | None = None  # the counts last read
    _progress_look: Cadence = field(default_factory=lambda: Cadence(PROGRESS_EVERY))  # though no run moved

    adopted: list[int] = field(default_factory=list)  # dead backfills whose unfinished runs this one finishes
    adopted_runs: list[int] = field(default_factory=list)  # those runs: the ones its plan adopted, no others

    def __post_init__(self) -> None:
        super().__post_init__()
        self._wait_look = Cadence(self.settings.poll_interval)

    def claim_filter(self) -> dict[str, Any]:
        return {"backfill_id": self.backfill_id, "also_run_ids": self.adopted_runs}

    def settle_backfill(self, session: Session, backfill_id: int, now: datetime) -> None:
        """Its own backfill ends once the adopted runs have finished too (their backfills, once all theirs have).
        As its own runs end, it counts those left (the loop reads the full counts once none is)."""
        adopted = self.adopted_runs if backfill_id == self.backfill_id else []
        if backfill_id == self.backfill_id:
            self._unfinished = count_unfinished(session, backfill_id, adopted)
            if self._unfinished:
                return
        finish_backfill(session, backfill_id, now=now, actor=self.actor, adopted=adopted)

    def requeues_unstarted(self) -> bool:
        return not self.cancelled

    def busy(self) -> bool:
        return not self.stopping and self._unfinished > 0

    def others_wrote(self, session: Session) -> None:
        """A cancel (`ledger backfill cancel`) comes with an event: the job stops (its runs fail once their tries
        have ended, ledger/services/operations.py cancel_backfill)."""
        row = backfill_store.find(session, self.backfill_id)
        if row is not None and row.state == BackfillState.CANCELLED.value:
            self.cancelled = self.stopping = True

    def loop_once(self) -> LoopReport:
        report = LoopReport() if self.stopping else super().loop_once()
        # why runs wait is looked up when the backfill stands still (a loop without progress), at most once per
        # poll_interval: it reads every unfinished run, which a loop that moves does not need
        look = not report.progress and self._wait_look.due()
        # the counts read every run and task instance of the backfill: read when the job looks why runs wait,
        # when it stops, when its last run ended (settle_backfill counts what is left as its runs end), and
        # at most every PROGRESS_EVERY seconds otherwise
        if report.queued or report.runs_changed:
            self.waiting = []  # something moved: what waited may not wait now; looked up again when it stands still
        if not (look or self.stopping or self._progress is None or self._progress_look.due()
                or not self._unfinished or (report.runs_changed and self.adopted_runs)):
            return report
        with self.reading() as session:
            progress = self._progress = progress_of(session, self.backfill_id, self.adopted_runs)
            self._progress_look.done()
            self._unfinished = progress.runs_total - progress.runs_done
            if not self._unfinished:
                self.waiting = []
            elif look:
                self.waiting = waiting_reasons(session, self.backfill_id, self.job_id, self.adopted_runs)
                self._wait_look.done()
        if self.waiting and not report.progress:
            self.claim_soon()  # a run another job held may be free now
            if look and len(self.waiting) >= self._unfinished and all(b for _r, _w, b in self.waiting) \
                    and not self.executor.in_flight() and report.retry_at is None:
                self.blocked = self.stopping = True  # nothing can move until a person re-runs those dates
        if self.on_progress is not None:
            self.on_progress(progress)
        return report

    def shutdown(self) -> None:
        super().shutdown()
        if not self.backfill_id:  # stopped before its backfill was created or taken over: it has none to finish
            return
        now = self.clock.now()
        with self.sessions.begin() as session:
            if self.cancelled:
                cancel_backfill(session, self.backfill_id, now=now, actor=self.actor,
                                stale_after=self.settings.lock_timeout, held_by=self.job_id)
            for other in self.adopted:
                finish_backfill(session, other, now=now, actor=self.actor)
            state = finish_backfill(session, self.backfill_id, now=now, actor=self.actor, adopted=self.adopted_runs)
            if state == BackfillState.RUNNING.value:  # stopped before its runs finished
                why = ("blocked: " + "; ".join(w for _r, w, _b in self.waiting)) if self.blocked \
                    else f"signal {self.stop_signal}" if self.stop_signal else "stopped"
                mark_interrupted(session, self.backfill_id, now=now, actor=self.actor, reason=why,
                                 adopted=self.adopted_runs)
                self.interrupted = True


def mark_interrupted(session: Session, backfill_id: int, *, now: datetime, actor: str, reason: str,
                     adopted: list[int] | None = None) -> None:
    row = backfill_store.get(session, backfill_id)
    move_backfill(row, BackfillState.INTERRUPTED)
    p = progress_of(session, backfill_id, adopted or ())
    events.record(session, "backfill_interrupted", at=now, actor=actor, dag_id=row.dag_id, backfill_id=backfill_id,
                  reason=reason, runs_unfinished=p.runs_total - p.runs_done)
