"""The states runs and task instances move through, and what counts as finished."""

from __future__ import annotations

from enum import StrEnum

from ledger.core.errors import LedgerError


class RunType(StrEnum):
    SCHEDULED = "scheduled"
    BACKFILL = "backfill"
    MANUAL = "manual"
    TEST = "test"  # `ledger dags test --record`
    DATASET = "dataset_triggered"  # created when its datasets' condition was met (Airflow's name)


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    OVERRIDDEN = "overridden"


class TaskState(StrEnum):
    SCHEDULED = "scheduled"  # created, waiting for its dependencies
    QUEUED = "queued"  # handed to an executor, try number taken
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    UP_FOR_RETRY = "up_for_retry"
    # a sensor in reschedule mode (or deferrable) checked, was not satisfied, and ended its try to check again at
    # next_try_at: it holds no worker slot meanwhile, and its next try spends no retry (ledger/sdk/sensors.py)
    UP_FOR_RESCHEDULE = "up_for_reschedule"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    STOPPED = "stopped"  # ended by a STOP signal (a running try was ended, or it never started)
    REMOVED = "removed"  # its task is not in the version the run was moved to (`tasks clear --on-latest-version`)
    # a try's state only (task_try), never a task instance's: the try ended because the process or machine running
    # it died (its job stopped heart-beating or shut down, its worker vanished). It spends no retry: the task
    # instance gets a new try, up to LEDGER_MAX_LOST_TRIES lost tries in a row.
    LOST = "lost"


class StaleState(LedgerError):
    """A guarded state write found the row in another state than the writer expected (another process changed it
    first): nothing was written, the transaction is rolled back, and the writer reads the rows again."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class BackfillState(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # its process was stopped (Ctrl-C, SIGTERM, killed) with runs unfinished


class JobState(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


FINISHED_RUN_STATES = frozenset({RunState.SUCCESS, RunState.FAILED})
UNFINISHED_RUN_STATES = frozenset({RunState.QUEUED, RunState.RUNNING})
FINISHED_TASK_STATES = frozenset(
    {TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED, TaskState.UPSTREAM_FAILED, TaskState.STOPPED,
     TaskState.REMOVED}
)
# task instances whose try is with an executor or runs: they hold a pool slot and count against max_active_tasks
ACTIVE_TASK_STATES = frozenset({TaskState.QUEUED, TaskState.RUNNING})


# The allowed state changes: to-state -> the states it may replace. Every write of a run's or a task instance's
# state names its to-state and is guarded by `WHERE state IN (from-states)` (ledger/store/transitions.py): a
# writer that read a state another process has changed since writes nothing and reads again.
_SCHEDULED, _QUEUED = TaskState.SCHEDULED, TaskState.QUEUED
_WAITING_TASK = frozenset({_SCHEDULED, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE})
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    # a try is queued for a task instance that waits (its dependencies met, its retry due)
    TaskState.QUEUED: _WAITING_TASK,
    # the executor says the try started
    TaskState.RUNNING: frozenset({_QUEUED}),
    # a try ended; or an operator marked a task instance (not while a try runs); a mapped task whose list
    # fails or is empty; a run cancelled (skipped) or whose trigger rules skip it
    TaskState.SUCCESS: ACTIVE_TASK_STATES | _WAITING_TASK | FINISHED_TASK_STATES - {TaskState.SUCCESS},
    TaskState.FAILED: ACTIVE_TASK_STATES | _WAITING_TASK | FINISHED_TASK_STATES - {TaskState.FAILED},
    TaskState.SKIPPED: ACTIVE_TASK_STATES | _WAITING_TASK | FINISHED_TASK_STATES - {TaskState.SKIPPED},
    TaskState.UP_FOR_RETRY: ACTIVE_TASK_STATES,
    # a sensor's try checked and asked to be tried again later
    TaskState.UP_FOR_RESCHEDULE: ACTIVE_TASK_STATES,
    TaskState.UPSTREAM_FAILED: frozenset({_SCHEDULED}),
    # a STOP signal or an operator ended its try, or it never started
    TaskState.STOPPED: ACTIVE_TASK_STATES | _WAITING_TASK,
    # a new try: after a try that never started or was lost (from active), a clear (from finished or waiting),
    # or a signal's START / RESTART
    TaskState.SCHEDULED: ACTIVE_TASK_STATES | FINISHED_TASK_STATES | {TaskState.UP_FOR_RETRY,
                                                                      TaskState.UP_FOR_RESCHEDULE},
    # its task is not in the version its run moved to, or past the end of its mapped task's new list
    TaskState.REMOVED: _WAITING_TASK | FINISHED_TASK_STATES - {TaskState.REMOVED},
}
RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.SUCCESS, RunState.FAILED}),  # tasks cleared or marked to run again
    RunState.RUNNING: frozenset({RunState.QUEUED}),  # a job started it
    # its tasks finished, or an operator marked or cancelled it, or its dagrun_timeout passed
    RunState.SUCCESS: frozenset({RunState.QUEUED, RunState.RUNNING, RunState.FAILED}),
    RunState.FAILED: frozenset({RunState.QUEUED, RunState.RUNNING, RunState.SUCCESS}),
    # a backfill or a replace displaced it: whatever it was, it leaves the chain; it comes back only by the restore
    # of a cancelled backfill (ledger/store/transitions.py restore_run, decision 0210), never by this table
    RunState.OVERRIDDEN: frozenset({RunState.QUEUED, RunState.RUNNING, RunState.SUCCESS, RunState.FAILED}),
}


# a backfill is created running; it is cancelled, interrupted (its process stopped with runs unfinished), resumed, or
# finishes when none of its runs is unfinished (also after an interruption or a cancel whose runs others finished)
BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    # resumed (`ledger backfill resume` also takes up a running one whose job died)
    BackfillState.RUNNING: frozenset({BackfillState.INTERRUPTED, BackfillState.RUNNING}),
    BackfillState.INTERRUPTED: frozenset({BackfillState.RUNNING}),
    BackfillState.CANCELLED: frozenset({BackfillState.RUNNING, BackfillState.INTERRUPTED}),
    BackfillState.SUCCESS: frozenset({BackfillState.RUNNING, BackfillState.INTERRUPTED}),
    BackfillState.FAILED: frozenset({BackfillState.RUNNING, BackfillState.INTERRUPTED}),
}


def may_move(before: str, after: TaskState | RunState | BackfillState) -> bool:
    """Whether a task instance, run or backfill (by the kind of `after`) in state `before` may move to `after`."""
    if isinstance(after, TaskState):
        return before in TASK_TRANSITIONS[after]
    if isinstance(after, RunState):
        return before in RUN_TRANSITIONS[after]
    return before in BACKFILL_TRANSITIONS[after]


def task_may_move(before: str, after: TaskState) -> bool:
    """Whether a task instance in state `before` may be moved to `after` (TASK_TRANSITIONS)."""
    return before in TASK_TRANSITIONS[after]


def run_may_move(before: str, after: RunState) -> bool:
    """Whether a run in state `before` may be moved to `after` (RUN_TRANSITIONS)."""
    return before in RUN_TRANSITIONS[after]

