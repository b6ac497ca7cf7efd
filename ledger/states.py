"""The states runs and task instances move through, and what counts as finished."""

from __future__ import annotations

from enum import StrEnum


class RunType(StrEnum):
    SCHEDULED = "scheduled"
    BACKFILL = "backfill"
    MANUAL = "manual"
    TEST = "test"  # `ledger dags test --record`


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
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    STOPPED = "stopped"  # ended by a STOP signal (a running try was ended, or it never started)
    REMOVED = "removed"  # its task is not in the version the run was moved to (`tasks clear --on-latest-version`)


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
