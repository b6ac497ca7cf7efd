"""Fixtures of the scheduler tests: started executors, and a DAG file for their tries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.executors.base import Executor
from scheduler.executors.local import LocalExecutor
from scheduler.executors.sequential import SequentialExecutor
from tests.scheduler.test_task_runner import write_dag_file

MakeExecutor = Callable[..., Executor]


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    return write_dag_file(tmp_path)


@pytest.fixture
def make() -> Iterator[MakeExecutor]:
    """Makes started executors and ends them after the test (kind: 'local', 'local_reuse' or 'sequential')."""
    made: list[Executor] = []

    def factory(kind: str = "local", parallelism: int = 2, **kwargs: object) -> Executor:
        executor: Executor = (LocalExecutor(parallelism, reuse_workers=kind == "local_reuse", **kwargs)  # type: ignore[arg-type]
                              if kind in ("local", "local_reuse") else SequentialExecutor(parallelism))
        executor.start()
        made.append(executor)
        return executor

    yield factory
    for executor in made:
        executor.end(0)
