"""What a job remembers of the runs it holds, between loops: one component with a small interface.

A job decides its held runs from pictures (the run, its version's spec, its task instances) instead of reading
them again every loop. The job is the only writer of the runs it holds, so it keeps the pictures up to date
with what it writes (`wrote`); anything it did not decide itself (another process wrote, a failure, a retry, a
transaction rolled back) makes it `forget` the picture, with the reason, and the next loop reads it again.

The memory is a cache, and a cache must be checkable: `differences` compares every picture with what the
database holds. A job in verify mode (LEDGER_VERIFY_MEMORY, on in the test suite's scenarios) calls it at the
end of every loop's transaction and stops on any difference. Whatever is wrong in memory cannot become a wrong
write either: every state write is guarded on the state it replaces (ledger/store/transitions.py), so a stale
picture turns into a StaleState and a re-read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from ledger.scheduler.loop.planner import HeldRun
from ledger.store import loop as loop_store
from ledger.store import tasks as task_store


@dataclass
class HeldRunsMemory:
    pictures: dict[int, HeldRun] = field(default_factory=dict)  # held run -> the job's picture of it
    settled: dict[int, list[Any]] = field(default_factory=dict)  # held run -> its ready candidates (unchanged)
    successor: dict[int, int] = field(default_factory=dict)  # previous_run_id -> held run depending on it
    forgotten: Counter[str] = field(default_factory=Counter)  # why pictures were forgotten (for metrics, tests)

    def remember(self, held: Iterable[HeldRun]) -> None:
        """Pictures just read from the database."""
        self.pictures.update((h.run.id, h) for h in held)

    def wrote(self, run_id: int, row: task_store.TiRow) -> None:
        """The job wrote this task instance row (a queue, a start, a success, a mark): the picture takes it."""
        picture = self.pictures.get(run_id)
        if picture is not None:
            picture.tis[row.label] = row  # (a picture owns its dict of task instances)

    def forget(self, run_id: int | None, reason: str) -> None:
        """The picture of a held run (of every run: None) may no longer hold: the next loop reads it again."""
        self.forgotten[reason] += 1
        if run_id is None:
            self.settled.clear()
            self.pictures.clear()
            return
        self.settled.pop(run_id, None)
        self.pictures.pop(run_id, None)
        self.forget_past_of(run_id)

    def decide_again(self) -> None:
        """Every held run is decided again from its picture at the next pass (the full pass while nobody else
        wrote: a time limit that came into view since a run was settled)."""
        self.settled.clear()

    def forget_past_of(self, run_id: int) -> None:
        """The run that depends on `run_id`'s task states (depends_on_past) is decided again from the database."""
        nxt = self.successor.get(run_id)
        if nxt is not None:
            self.settled.pop(nxt, None)
            self.pictures.pop(nxt, None)

    def keep_only(self, run_ids: set[int]) -> None:
        """Runs the job no longer holds leave its memory."""
        for gone in [i for i in self.settled if i not in run_ids]:
            del self.settled[gone]
        for gone in [i for i in self.pictures if i not in run_ids]:
            del self.pictures[gone]

    def differences(self, session: Session) -> list[str]:
        """Where a picture differs from the database (empty: memory and database agree)."""
        out = []
        ids = list(self.pictures)
        runs = loop_store.runs_by_id(session, ids)
        rows = task_store.rows_for_runs(session, ids)
        for run_id, picture in self.pictures.items():
            run = runs.get(run_id)
            if run is None or run.state != picture.run.state:
                out.append(f"run {run_id}: remembered {picture.run.state}, the database holds "
                           f"{run.state if run is not None else 'no such run'}")
                continue
            held = rows.get(run_id, {})
            for label in sorted(set(held) | set(picture.tis)):
                if held.get(label) != picture.tis.get(label):
                    out.append(f"run {run_id} task {label}: remembered {picture.tis.get(label)}, the database "
                               f"holds {held.get(label)}")
        return out


class MemoryMismatch(AssertionError):
    """Verify mode found the job's memory of its held runs different from the database: a bug."""
