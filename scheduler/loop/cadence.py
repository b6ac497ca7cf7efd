"""Cadence: how often a job does one of its steps.

A job's loop turns as fast as there is work (outcomes, signals, ready tasks); some steps need not run on every
turn: claiming runs, reading every held run again, heart-beating, creating due runs, rebuilding the signal
index. Each such step has a cadence: it is due when its interval has passed since it was last done, or at once
when something asked for it (`soon`: runs were created, a lock was released, DAG files changed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


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
