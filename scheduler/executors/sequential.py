"""SequentialExecutor: one try at a time, run synchronously by submit() in a forked child (for debugging).

The child is forked from the calling process and runs the same `run_try` as LocalExecutor's children, in
its own process group, with the same execution timeout. The DAG file is imported in the child, never in
the calling process.

Spark tries are the exception (see in_process.run_in_process): the child hands them back, and they run in
the calling process, with a SparkSession it keeps until end(); the DAG file is then imported there too.
A Spark try that will not stop after its timeout is reported "timed out" and left running in a background
thread (its session is given up), since the calling process is the scheduler itself.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ledger.scheduler.executors.base import EndedOnThisHost, TaskEvent, WorkItem
from ledger.scheduler.runtime import in_process, try_outcome, try_plan, try_process, try_report


class SequentialExecutor(EndedOnThisHost):
    """parallelism is always 1: submit() returns when the try has ended; drain() hands over its events."""

    def __init__(self, parallelism: int = 1) -> None:
        super().__init__(1)
        self._started = False
        self._ending = False
        self._pending: list[TaskEvent] = []
        self._unreported: set[int] = set()

    def start(self) -> None:
        self._started = True
        self._ending = False

    def open_slots(self) -> int:
        if not self._started or self._ending:
            return 0
        return 0 if self._unreported else 1

    def submit(self, item: WorkItem) -> None:
        if not self._started or self._ending:
            raise RuntimeError("SequentialExecutor is not accepting work (not started, or ending)")
        if self._unreported:
            raise RuntimeError("no open slot: drain() the previous try's events first")
        self._unreported.add(item.ti_id)
        running = try_process.fork_try(item)
        self._pending.append(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="started",
                                       at=running.started_at, pid=running.pid))
        try:
            outcome = running.wait()
        except BaseException:  # e.g. KeyboardInterrupt while waiting: the try must not outlive us
            running.kill()
            running.wait()
            raise
        assert outcome is not None
        pid, left, lost = running.pid, running.report, False
        if running.handed_over:  # a Spark try: run here, with this process's SparkSession
            self._pending.pop()
            pid = os.getpid()
            self._pending.append(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="started",
                                           at=time.time(), pid=pid))
            outcome, left, lost = self._run_here(item)
        state = "lost" if lost else outcome.state
        self._pending.append(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="finished",
                                       at=outcome.at, state=state, pid=pid, reason=outcome.reason,
                                       report=try_report.of_try(left, item.log_path, state, outcome.reason,
                                                                outcome.at)))

    @staticmethod
    def _run_here(item: WorkItem) -> tuple[try_outcome.Outcome, try_report.TryReport | None, bool]:
        plan = try_plan.prepare(item)
        try:
            result = in_process.run_in_process(item, plan)
        finally:
            try_plan.forget_prepared()
        if result.retire:  # its thread goes on in the background; the next Spark try gets a new session
            in_process.give_up_in_process()
        return result.outcome, result.report, result.lost

    def drain(self) -> list[TaskEvent]:
        events, self._pending = self._pending, []
        for event in events:
            if event.kind == "finished":
                self._unreported.discard(event.ti_id)
        return events

    def wait_handles(self) -> list[Any]:
        return []

    def in_flight(self) -> set[int]:
        return self._unreported | {event.ti_id for event in self._pending if event.kind == "finished"}

    def end(self, grace: float) -> list[TaskEvent]:
        self._ending = True
        events = self.drain()
        self._started = False
        in_process.end_in_process()  # stop the SparkSession Spark tries left, if any
        return events
