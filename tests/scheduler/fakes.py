"""A fake executor for in-process loop tests: it runs nothing, and keeps the executor contract
(tests/scheduler/test_executor_contract.py runs the same contract against it and the real executors)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem

# what the demo DAG's tasks (tests/scheduler/test_task_runner.py) end as, for the fake
DEMO_OUTCOMES = {"noop": "success", "hello": "success", "boom": "failed", "bash_fail": "failed", "skip": "skipped",
                 "bash_skip": "skipped", "bash_ok": "success"}


class FakeExecutor(Executor):
    """Each submitted try starts and ends at once: its outcome comes from `outcome(item)` (default: success,
    or failed for the (task id, try number) pairs in `fail`). Events are handed over by drain()."""

    def __init__(self, parallelism: int = 4, *, fail: set[tuple[str, int]] | None = None,
                 outcome: Callable[[WorkItem], str] | None = None) -> None:
        super().__init__(parallelism)
        self.fail = fail or set()
        self.outcome = outcome
        self.submitted: list[WorkItem] = []
        self._events: list[TaskEvent] = []
        self._busy: set[int] = set()
        self._started = False
        self._ending = False

    def start(self) -> None:
        self._started, self._ending = True, False

    def open_slots(self) -> int:
        return 0 if not self._started or self._ending else self.parallelism - len(self._busy)

    def submit(self, item: WorkItem) -> None:
        if not self._started or self._ending:
            raise RuntimeError("FakeExecutor is not accepting work (not started, or ending)")
        if item.ti_id in self._busy:
            raise ValueError(f"task instance {item.ti_id} is already in flight")
        if self.open_slots() <= 0:
            raise RuntimeError("no open slot: check open_slots() before submit()")
        self.submitted.append(item)
        self._busy.add(item.ti_id)
        if self.outcome is not None:
            state = self.outcome(item)
        else:
            state = "failed" if (item.task_id, item.try_number) in self.fail else "success"
        self._events += [TaskEvent(item.ti_id, item.try_number, "started", time.time(), pid=1),
                         TaskEvent(item.ti_id, item.try_number, "finished", time.time(), state,  # type: ignore[arg-type]
                                   pid=1, reason="exit code 1" if state == "failed" else None)]

    def drain(self) -> list[TaskEvent]:
        if not self._started:
            return []
        events, self._events = self._events, []
        self._busy -= {e.ti_id for e in events if e.kind == "finished"}
        return events

    def wait_handles(self) -> list[Any]:
        return []

    def in_flight(self) -> set[int]:
        return set(self._busy)

    def end(self, grace: float) -> list[TaskEvent]:
        self._ending = True
        return self.drain() if self._started else []
