"""What one transaction of a job changes in the job outside the database: collected while it runs, taken by the
job once it has committed, dropped with it when it rolls back.

A step of the loop (scheduler/loop/job.py) writes to the database and says here what the job is to remember or
do once that write holds: tries to follow (queued, adopted) or no longer follow (ended), a dead job's tries to
look for (offered), killed tries whose stop has been recorded, why a try is asked to stop, task-state signals sent
and the doorbells to ring, lines to print and to append to tries' logs, what the job has seen of others' writes.
Nothing of it reaches the job's memory before the commit, so a rollback leaves that memory as it was and nothing
has to be put back. (The pictures of held runs, scheduler/loop/memory.py, and the facts kept per run are caches
checked against the database in verify mode: a failed transaction makes the job forget them, and the next loop
reads them again.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ledger.scheduler.signals.task_state_signals import TaskStateSignals

if TYPE_CHECKING:
    from ledger.scheduler.loop.adoption import Offer
    from ledger.scheduler.loop.others_writes import Seen
    from ledger.scheduler.loop.queueing import InFlight


@dataclass
class Effects:
    said: list[str] = field(default_factory=list)  # lines to print
    log_notes: list[tuple[str, datetime, str]] = field(default_factory=list)  # (try log, at, line) to append
    queued: dict[int, InFlight] = field(default_factory=dict)  # ti id -> a try handed out (queued or adopted)
    ended: list[int] = field(default_factory=list)  # ti ids whose try's end was recorded
    stops_told: list[int] = field(default_factory=list)  # ti ids whose kill was recorded with its reason
    stop_reasons: dict[int, str] = field(default_factory=dict)  # ti id -> why the job asks it to stop
    task_states: TaskStateSignals = field(default_factory=TaskStateSignals)  # sent at the end of the transaction
    offered: list[Offer] = field(default_factory=list)  # a dead job's tries for the executor to look for
    follow: dict[int, Any] = field(default_factory=dict)  # adopted tries: what the executor found of each
    seen: Seen | None = None  # a loop's transaction: what it saw of others' writes (scheduler/loop/others_writes.py)

    def say(self, line: str) -> None:
        self.said.append(line)

    def note(self, log_path: str, at: datetime, text: str) -> None:
        """A line for a try's log, appended once the transaction has committed."""
        self.log_notes.append((log_path, at, text))
