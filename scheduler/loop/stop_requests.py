"""The STOP and RESTART requests for a job's tries, and why each killed try was stopped.

A request comes from a signal (STOP, RESTART), an operator (`ledger runs cancel`) or the run's dagrun_timeout,
and is written with an event in the database. The job reads the requests when one may have come (an event from
another process, or one it could not carry out yet), kills the try in its executor, and keeps the reason: the
try's outcome is recorded `stopped` with it, and its log says it.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from ledger.scheduler.executors.base import Executor
from ledger.scheduler.signals import signal_actions
from ledger.store import tasks as task_store


@dataclass
class StopRequests:
    pending: set[int] = field(default_factory=set)  # this job's task instances with a signal request pending
    known: bool = False  # `pending` holds every request pending (none came since it was read)
    unkilled: bool = False  # a STOP or RESTART could not be carried out yet: read the requests again
    killed: dict[int, str] = field(default_factory=dict)  # ti id -> why this job killed its try
    reasons: dict[int, str] = field(default_factory=dict)  # ti id -> why this job asked it to stop (no signal)

    def read_again(self) -> None:
        self.known = False

    def carry_out(self, session: Session, job_id: int, executor: Executor, inflight: Container[int]) -> None:
        """Kill the tries of this job that a request asked to end, when a request may have come."""
        if self.known and not self.unkilled:
            return
        requests = task_store.signal_requests(session, job_id)
        self.pending = {ti_id for ti_id, _request, _signal in requests}
        self.known, self.unkilled = True, False
        for ti_id, request, signal_id in requests:
            if request not in ("stop", "restart") or ti_id in self.killed or ti_id not in inflight:
                continue
            reason = (f"stopped by signal {signal_id}" if signal_id is not None else self.reasons.pop(
                ti_id, "stopped by an operator (ledger runs cancel)")) + (" (restart)" if request == "restart" else "")
            if executor.kill(ti_id, reason):
                self.killed[ti_id] = reason
            else:
                self.unkilled = True

    def settle(self, session: Session, ended: list[int], *, serial: bool) -> set[int]:
        """The tries of `ended` are over: their task instances' pending requests are settled (a RESTART gives a
        new try). Returns the runs whose task instances were re-armed. Read only where a request may be pending
        (on PostgreSQL, always)."""
        if self.known and serial and not self.pending.intersection(ended):
            return set()
        rearmed = signal_actions.settle(session, ended)
        self.pending.difference_update(ended)
        return rearmed
