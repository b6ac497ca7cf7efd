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
    decided: bool = False  # the loop's transaction decided the held runs (not only recorded tries' starts)

    @property
    def progress(self) -> bool:
        return any((self.outcomes, self.created, self.claimed, self.queued, self.marked, self.runs_changed,
                    self.callbacks, self.again))

    def loops_again(self, open_slots: int, executor_wakes: bool) -> bool:
        """Whether the next loop comes at once, without sleeping until something happens (decision 0322). A loop
        that made progress loops again, except one that only recorded tries' outcomes and queued tries, decided
        its runs after recording them, and left the executor no open slot, when the executor's events wake the
        sleep (`executor_wakes`: it has handles that become readable as they arrive; the sequential executor's
        are there at once, with none): what it decided is all the job could do until a try starts or ends, a
        doorbell rings, a retry or a cadence is due (the sleep's timeout), so the loop at once would find nothing
        to do and still take a transaction."""
        if not self.progress:
            return False
        if self.created or self.claimed or self.marked or self.runs_changed or self.callbacks or self.again:
            return True
        return not (self.decided and open_slots == 0 and executor_wakes)
