"""Which runs a job holds, and when it looks for more to claim.

A job decides the runs it holds in a fixed order (oldest first, or newest first for a backwards backfill). The
list is read from the database when the job starts, after another process wrote, and when the job may hold more
runs than it read (a backfill holding thousands); runs the job claims join it, runs that finish leave it.
Claiming has its own cadence: every poll_interval, or at once when runs were created, a lock may be free, or
runs were left unclaimed for want of room and some finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.loop.cadence import Cadence
from ledger.store import jobs as job_store
from ledger.store import loop as loop_store


@dataclass
class RunClaims:
    settings: SchedulerSettings
    newest_first: bool = False
    cadence: Cadence = field(init=False)
    ids: list[int] | None = None  # the runs the job holds, in the order it decides them (None: read them)
    full: bool = False  # `ids` was read up to max_held_runs: the job may hold more runs than that
    limited: bool = True  # the last claim took as many runs as it had room for: claim again when some end

    def __post_init__(self) -> None:
        self.cadence = Cadence(self.settings.poll_interval)

    def due(self) -> bool:
        return self.cadence.due()

    def soon(self) -> None:
        """Look for runs to claim in the next loop."""
        self.cadence.soon()

    def forget(self) -> None:
        """Read the list of held runs again (another process wrote, a transaction failed)."""
        self.ids = None

    def held(self, session: Session, job_id: int) -> list[int]:
        """The runs the job holds, in the order it decides them."""
        if self.ids is None:
            self.ids = loop_store.held_run_ids(session, job_id, limit=self.settings.max_held_runs,
                                               newest_first=self.newest_first)
            self.full = len(self.ids) >= self.settings.max_held_runs
        return list(self.ids)

    def claim(self, session: Session, job_id: int, now: datetime, actor: str,
              where: dict[str, Any]) -> list[tuple[int, int | None]]:
        """Lock unheld runs (and runs of a silent holder) for this job, as many as it has room for: (run id, the
        job that held it before, if one did)."""
        self.cadence.done()
        held = job_store.held_count(session, job_id)
        room = self.settings.max_held_runs - held
        claimed = job_store.claim_runs(session, job_id, now=now, stale_after=self.settings.lock_timeout,
                                       limit=room, actor=actor, newest_first=self.newest_first, **where)
        self.limited = len(claimed) >= room
        if not claimed:
            return claimed
        if self.ids is not None and len(self.ids) == held:  # it lists every run the job held: the new ones join
            listed = set(self.ids)  # it, without reading the list again
            self.ids += [run_id for run_id, _holder in claimed if run_id not in listed]
            self.full = False  # (it lists them all)
        else:
            self.ids = None
        return claimed

    def released(self, run_id: int) -> None:
        """A held run finished: its lock is released in this transaction."""
        holding = None
        if self.ids is not None and run_id in self.ids:
            self.ids.remove(run_id)
            holding = len(self.ids)
        most = self.settings.max_held_runs
        if self.limited and (holding is None or most - holding >= max(1, most // 8)):
            self.soon()  # runs were left unclaimed for want of room: claim a batch of them

    def some_released(self) -> None:
        """After the runs that finished in a loop were released: a list read up to max_held_runs takes in the
        runs that come next."""
        if self.full:
            self.ids = None
