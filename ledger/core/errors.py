"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations


class LedgerError(Exception):
    """Base for errors the CLI may show to a user."""


class ConfigError(LedgerError):
    """A setting or command-line value is invalid."""


class DatabaseNotReady(LedgerError):
    """The database is missing or not at the newest schema revision."""


class DagNotFound(LedgerError, LookupError):
    def __init__(self, dag_id: str, *, broken_files: int = 0) -> None:
        """`broken_files`: how many DAG files failed to import (the DAG may be in one of them)."""
        hint = (f"; {broken_files} DAG file{'s' if broken_files != 1 else ''} failed to import: see `ledger dags "
                f"errors`" if broken_files else "")
        super().__init__(f"no DAG named {dag_id!r}; run `ledger dags list` to see known DAGs{hint}")
        self.dag_id = dag_id


class RunNotFound(LedgerError, LookupError):
    def __init__(self, run: str) -> None:
        super().__init__(f"no DAG run {run!r}; run `ledger timeline DAG` to see a DAG's runs")
        self.run = run


class WorkerNotStarted(LedgerError, RuntimeError):
    """An executor's worker process could not start (its interpreter or its imports failed, it was killed, or it was
    not ready in time): nothing was run."""


class DagDefinitionError(LedgerError):
    """A DAG file defines an invalid DAG (cycle, duplicate task, naive start_date, bad schedule...)."""


class TimelineConflict(LedgerError):
    """A timeline change would break the one-live-run-per-date rule."""


class InvalidInput(LedgerError):
    """A value given on the command line cannot be used."""


class NotFound(InvalidInput, LookupError):
    """What was asked for by name or id does not exist (the web API answers 404)."""


class SkipTask(Exception):
    """Raise inside a Python task to end the try as skipped; the message becomes the reason."""


class FailWithoutRetry(Exception):
    """Raise inside a task to end the try failed without spending its remaining retries (Airflow's
    AirflowFailException); the message becomes the reason."""


class SensorTimeout(FailWithoutRetry):
    """A sensor's timeout passed before its condition held: the task fails, and is not retried."""


class RescheduleTask(Exception):
    """Raised by a sensor in reschedule mode whose condition does not hold yet: the try ends `up_for_reschedule`,
    holding no worker slot, and the scheduler queues the next try at `at` without spending a retry."""

    def __init__(self, at: object) -> None:
        shown = at.isoformat() if hasattr(at, "isoformat") else at
        super().__init__(f"next check at {shown}")
        self.at = at
