"""Executors run tries of task instances: `make_executor("local" | "sequential", parallelism)`."""

from __future__ import annotations

from scheduler.executors.base import Executor, TaskEvent, WorkItem

EXECUTORS = ("local", "sequential")


def make_executor(name: str, parallelism: int, *, reuse_workers: bool = False) -> Executor:
    """The executor called `name` ("local": a pool of `parallelism` worker processes, which run Python tries
    themselves with `reuse_workers`; "sequential": one try at a time, for debugging; parallelism is then 1,
    and every try forks)."""
    key = (name or "").strip().lower()
    if key == "local":
        from scheduler.executors.local import LocalExecutor

        return LocalExecutor(parallelism, reuse_workers=reuse_workers)
    if key == "sequential":
        from scheduler.executors.sequential import SequentialExecutor

        return SequentialExecutor(parallelism)
    raise ValueError(f"unknown executor {name!r}: choose one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "Executor", "TaskEvent", "WorkItem", "make_executor"]
