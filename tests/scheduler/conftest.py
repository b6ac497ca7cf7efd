"""Fixtures of the scheduler tests: started executors, a DAG file for their tries, a DAGs folder and DAG file
processor managers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.scheduler.executors.base import Executor
from ledger.scheduler.executors.local import LocalExecutor
from ledger.scheduler.executors.sequential import SequentialExecutor
from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager
from tests.celery_cluster import celery_demo, cluster, redis_server  # noqa: F401 (the Celery executor's fixtures)
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


@pytest.fixture
def dags(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    return folder


@pytest.fixture
def managers() -> Iterator[Callable[..., DagFileProcessorManager]]:
    """Makes managers and stops every one of them at the end of the test."""
    made: list[DagFileProcessorManager] = []

    def make(folder: Path, **kwargs: Any) -> DagFileProcessorManager:
        manager = DagFileProcessorManager(folder, **kwargs)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.stop()
