"""What a backfill's cancel does to each of its dates (decision 0210), pure: no database, no clock.

A cancel never turns good history red. For each run of the backfill:

* it had finished (success or failed) before the cancel: it stays, as it is;
* it had not finished: its tries in flight end, the rest of its tasks are skipped. When none of its tries had
  started and it displaced a run that had finished (the run that was live at its date before the backfill,
  overridden by it), that run is live again, in the state it had, and the cancelled run leaves the chain as
  history (`overridden`, by the run restored): nothing of the new run ran on that date. When a try of it had
  started, the date's data may be that try's: the run stays, live, and ends as its tasks did (`success` when
  every task had succeeded, else `failed`), so the timeline names the code that last ran there (decision 0357).
  With no finished run displaced, it stays and ends `failed`.
* it was itself overridden later: it is not the backfill's to change.

One live run per date throughout; nothing is deleted; the restored run takes the cancelled run's place in the
chain (its previous becomes the cancelled run's, and the next live run points at it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ledger.core.states import RunState

# the states a displaced run comes back in: only a finished run is brought back (an unfinished one was displaced
# while it waited; bringing it back would run it again, which nobody asked for)
RESTORABLE = frozenset({RunState.SUCCESS.value, RunState.FAILED.value})


@dataclass(frozen=True)
class Displaced:
    run_id: int
    state_before: str | None  # the state it had when the backfill's run overrode it (None: not recorded)


@dataclass(frozen=True)
class CancelledRun:
    """A run of the backfill being cancelled, as the rule sees it."""

    run_id: int
    logical_date: datetime
    state: str
    displaced: Displaced | None  # the run it overrode, still overridden by it
    ran: bool = False  # a try of it has started (its code may have written the date's data)


@dataclass(frozen=True)
class Fate:
    run_id: int
    logical_date: datetime
    restores: int | None  # the run that becomes live again if this one does not end in success
    says: str  # one line: what becomes of the date


def fate(run: CancelledRun) -> Fate:
    """What the cancel does to the date of `run` (as said before it acts)."""
    d = run.displaced
    if run.state == RunState.OVERRIDDEN.value:
        return Fate(run.run_id, run.logical_date, None, f"run {run.run_id} was overridden later: unchanged")
    if run.state in (RunState.SUCCESS.value, RunState.FAILED.value):
        return Fate(run.run_id, run.logical_date, None, f"keeps run {run.run_id} ({run.state}): it had finished")
    if d is not None and d.state_before in RESTORABLE:
        if run.ran:
            return Fate(run.run_id, run.logical_date, None,
                        f"run {run.run_id} stops and stays, ending as its tasks did: its tries ran, so the data at "
                        f"this date may be theirs (run {d.run_id}, which it replaced, stays overridden)")
        return Fate(run.run_id, run.logical_date, d.run_id,
                    f"run {run.run_id} stops; run {d.run_id} ({d.state_before}), which it replaced, is live again "
                    f"(unless a try of run {run.run_id} starts before it stops)")
    why = "no earlier run" if d is None else f"run {d.run_id}, which it replaced, had not finished"
    return Fate(run.run_id, run.logical_date, None, f"run {run.run_id} stops and ends failed ({why})")


def restores(run: CancelledRun, ended_in: str) -> int | None:
    """The displaced run to bring back once the cancel has ended `run` in state `ended_in` (`run.ran`: whether a
    try of it had started by then), or None."""
    if ended_in == RunState.SUCCESS.value:
        return None
    return fate(CancelledRun(run.run_id, run.logical_date, RunState.RUNNING.value, run.displaced, run.ran)).restores
