"""Cadence: how often a job does one of its steps.

A job's loop turns as fast as there is work (outcomes, signals, ready tasks); some steps need not run on every
turn: claiming runs, reading every held run again, heart-beating, creating due runs, rebuilding the signal
index. Each such step has a cadence: it is due when its interval has passed since it was last done, or at once
when something asked for it (`soon`: runs were created, a lock was released, DAG files changed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ledger.scheduler.executors import local_hold


@dataclass
class Cadence:
    interval: float  # seconds between two times the step is done, unless asked sooner
    asked: bool = True  # due at once (a new cadence is due: the first loop does every step)
    next_at: float = 0.0  # time.monotonic() at which it is due again

    def due(self) -> bool:
        return self.asked or time.monotonic() >= self.next_at

    def done(self) -> None:
        """The step was done now: due again after the interval, unless asked sooner."""
        self.asked = False
        self.next_at = time.monotonic() + self.interval

    def soon(self) -> None:
        """Do the step in the next loop."""
        self.asked = True

    def since_done(self) -> float:
        """Seconds since the step was last done (as far as it is known: inf when never)."""
        return time.monotonic() - (self.next_at - self.interval) if self.next_at else float("inf")


@dataclass
class Heartbeat(Cadence):
    """The job's heartbeat, written in a loop's transaction when due. Once it has committed, nobody takes the job's
    runs before LEDGER_LOCK_TIMEOUT has passed from the time it wrote, so the job's tries on this host may run until
    local_hold.fence_after(lock_timeout) past the moment that time was read, and no longer (decision 0349,
    scheduler/executors/local_hold.py)."""

    lock_timeout: float = float("inf")
    began: float = 0.0  # local_hold.now() just before the transaction under way read its time
    unheld: float | None = None  # `began` of a heartbeat written in the transaction under way

    def read_time(self, now: Callable[[], datetime]) -> datetime:
        """The time a transaction writes (a heartbeat, should it write one), read just after its mark. A heartbeat
        the last transaction wrote and did not commit (rolled back) is due again at once."""
        if self.unheld is not None:
            self.asked = True
        self.began, self.unheld = local_hold.now(), None
        return now()

    def done(self) -> None:
        super().done()
        self.unheld = self.began

    def committed(self, hold_until: Callable[[float], None]) -> None:
        """The transaction committed: its heartbeat, if it wrote one, holds the tries a while more."""
        if self.unheld is not None:
            hold_until(self.unheld + local_hold.fence_after(self.lock_timeout))
            self.unheld = None

    def started(self, hold_until: Callable[[float], None]) -> None:
        """The job's row, written at its start (its time read with read_time), is its first heartbeat."""
        self.done()
        self.committed(hold_until)
