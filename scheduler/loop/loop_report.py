"""What one loop of a job did (scheduler/loop/job.py and the parts of its loop: life_cycle, queueing, run_processing,
outcome_recording, which the job imports and which therefore cannot import it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class LoopReport:
    outcomes: int = 0
    created: int = 0
    claimed: int = 0
    queued: int = 0
    marked: int = 0
    runs_changed: int = 0
    retry_at: datetime | None = None
    looked_for_runs: bool = False  # collect_runs really queried (it is throttled between runs finishing)
    callbacks: int = 0  # callback calls started or ended
    write_by: float | None = None  # time.monotonic() by which tries' starts held back must be written
    again: bool = False  # loop again at once (a step found work for the next loop)

    @property
    def progress(self) -> bool:
        return any((self.outcomes, self.created, self.claimed, self.queued, self.marked, self.runs_changed,
                    self.callbacks, self.again))
