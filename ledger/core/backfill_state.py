"""The state a backfill shows agrees with its runs' counts (decision 0270), pure: no database, no clock.

A backfill's stored state is written when its last run ends. Its runs can change after that: an operator clears a
failed run and it succeeds, marks a run failed, or clears a run that then waits to run again. The state shown (CLI,
API, pages) is then worked out from the counts of its live runs, so that a backfill never reads `failed` beside
"0 failed" nor `success` beside a failed or unfinished run:

* `cancelled` stays: it is what a person did, whatever became of the runs since;
* `running` and `interrupted` stay: the job (or `backfill resume`) that finishes the backfill decides its end;
* a finished backfill (`success`, `failed`) with an unfinished live run shows `running`; with none, `failed`
  when a live run failed, else `success`."""

from __future__ import annotations

from ledger.core.states import BackfillState

FINISHED = frozenset({BackfillState.SUCCESS.value, BackfillState.FAILED.value})
# the stored states a backfill can be cancelled in (`ledger backfill cancel`, the web's cancel): still in progress
CANCELLABLE = frozenset({BackfillState.RUNNING.value, BackfillState.INTERRUPTED.value})


def agreed_state(stored: str, *, unfinished: int, failed: int) -> str:
    """The state a backfill stored as `stored` shows, given how many of its live runs are unfinished and failed."""
    if stored not in FINISHED:
        return stored
    if unfinished:
        return BackfillState.RUNNING.value
    return (BackfillState.FAILED if failed else BackfillState.SUCCESS).value


def resumable(stored: str, *, by_job: bool) -> bool:
    """Whether a backfill stored as `stored` can be taken up again: by a backfill job of its own (`ledger backfill
    resume`: running or interrupted, the job adopts the runs of one whose job is gone), or handed to the scheduler
    (the web view: only interrupted; a running backfill's runs are its job's or already the scheduler's)."""
    if by_job:
        return stored in CANCELLABLE
    return stored == BackfillState.INTERRUPTED.value
