"""Executors run tries of task instances: `make_executor("local" | "sequential" | "celery", parallelism)`."""

from __future__ import annotations

from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem

EXECUTORS = ("local", "sequential", "celery")


def make_executor(name: str, parallelism: int, *, reuse_workers: bool = False, queue_ahead: int = 0) -> Executor:
    """The executor called `name` ("local": a pool of `parallelism` worker processes, which run Python tries
    themselves with `reuse_workers` and are each sent `queue_ahead` items beyond the one they run;
    "sequential": one try at a time, for debugging; parallelism is then 1, and every try forks; "celery": tries
    run on `ledger worker` processes on any host, through the broker LEDGER_CELERY_BROKER_URL)."""
    key = (name or "").strip().lower()
    if key == "local":
        from ledger.scheduler.executors.local import LocalExecutor

        return LocalExecutor(parallelism, reuse_workers=reuse_workers, queue_ahead=queue_ahead)
    if key == "sequential":
        from ledger.scheduler.executors.sequential import SequentialExecutor

        return SequentialExecutor(parallelism)
    if key == "celery":
        from ledger.scheduler.executors.celery import CeleryExecutor

        return CeleryExecutor(parallelism)
    raise ValueError(f"unknown executor {name!r}: choose one of {', '.join(EXECUTORS)}")


def executor_for(settings: SchedulerSettings, *, batch: bool = False) -> Executor:
    """The executor a job's settings describe (`batch`: for a backfill's own job, SchedulerSettings.items_ahead)."""
    return make_executor(settings.executor, settings.parallelism, reuse_workers=settings.reuse_workers,
                         queue_ahead=settings.items_ahead(batch=batch))


__all__ = ["EXECUTORS", "Executor", "TaskEvent", "WorkItem", "executor_for", "make_executor"]
