"""The executor contract, run against the fake (the in-process loop tests use it), the SequentialExecutor, the
LocalExecutor and the CeleryExecutor (a real redis-server, webserver and `ledger worker`) alike: what the job may
rely on from any executor."""

from __future__ import annotations

import multiprocessing.connection
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.executors.base import Executor, TaskEvent
from ledger.scheduler.executors.celery_app import CeleryConfig
from ledger.scheduler.executors.local import LocalExecutor
from ledger.scheduler.executors.sequential import SequentialExecutor
from tests.celery_cluster import PinnedCelery
from tests.scheduler.fakes import DEMO_OUTCOMES, FakeExecutor
from tests.scheduler.test_executors import run_all
from tests.scheduler.test_task_runner import work_item, write_dag_file

KINDS = ["fake", "sequential", "local", "local_reusing_workers",
         pytest.param("celery", marks=pytest.mark.scenario)]  # a Redis server and a Celery worker


@pytest.fixture(params=KINDS)
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    kind = request.param
    made: Executor
    if kind == "celery":
        cluster, version = request.getfixturevalue("celery_demo")
        cluster.redis.flush()
        made = PinnedCelery(2, CeleryConfig(cluster.redis.url, cluster.redis.url, 2.0))
        PinnedCelery.version = version
    else:
        made = (FakeExecutor(2, outcome=lambda item: DEMO_OUTCOMES[item.task_id]) if kind == "fake"
                else SequentialExecutor(1) if kind == "sequential"
                else LocalExecutor(2, reuse_workers=kind == "local_reusing_workers"))
    made.start()
    yield made
    made.end(0)


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    return write_dag_file(tmp_path)


def test_each_try_reports_started_then_finished_with_its_outcome(executor: Executor, dag_file: Path) -> None:
    tasks = ["noop", "boom", "skip", "bash_ok", "bash_fail"]
    items = [work_item(dag_file, t, ti_id=i + 1, try_number=2) for i, t in enumerate(tasks)]
    events = run_all(executor, items)
    for item in items:
        kinds = [e.kind for e in events[item.ti_id]]
        assert kinds == ["started", "finished"], (item.task_id, events[item.ti_id])
        assert all(e.try_number == 2 for e in events[item.ti_id])
        assert events[item.ti_id][-1].state == DEMO_OUTCOMES[item.task_id]
    failed = events[2][-1]
    assert failed.reason  # a failure says why, in one line
    assert executor.in_flight() == set()


def test_a_submitted_try_is_in_flight_until_its_finish_is_drained(executor: Executor, dag_file: Path) -> None:
    item = work_item(dag_file, "noop", ti_id=9)
    assert executor.open_slots() >= 1
    executor.submit(item)
    seen: list[TaskEvent] = []
    deadline = time.monotonic() + 30
    while not any(e.kind == "finished" for e in seen):
        assert time.monotonic() < deadline, seen
        assert item.ti_id in executor.in_flight()  # until its finish has been drained
        handles = executor.wait_handles()
        if handles:
            multiprocessing.connection.wait(handles, timeout=0.5)
        seen += executor.drain()
    assert item.ti_id not in executor.in_flight()


def test_items_handed_over_together_each_run_once_in_flight_until_drained(executor: Executor, dag_file: Path) -> None:
    items = [work_item(dag_file, task, ti_id=30 + i) for i, task in enumerate(["noop", "skip"])]
    items = items[:executor.open_slots()]  # (the SequentialExecutor takes one at a time)
    executor.submit_all(items)
    assert executor.in_flight() == {item.ti_id for item in items}
    seen: dict[int, list[str]] = {item.ti_id: [] for item in items}
    deadline = time.monotonic() + 30
    while any("finished" not in kinds for kinds in seen.values()):
        assert time.monotonic() < deadline, seen
        handles = executor.wait_handles()
        if handles:
            multiprocessing.connection.wait(handles, timeout=0.5)
        for event in executor.drain():
            seen[event.ti_id].append(event.kind)
    assert seen == {item.ti_id: ["started", "finished"] for item in items}
    assert executor.in_flight() == set()


def test_open_slots_never_exceed_parallelism_and_submitting_beyond_them_is_refused(
        executor: Executor, dag_file: Path) -> None:
    assert 0 < executor.open_slots() <= executor.parallelism
    if isinstance(executor, SequentialExecutor):  # submit() runs the try: the slot is taken until drained
        executor.submit(work_item(dag_file, "noop", ti_id=1))
        assert executor.open_slots() == 0
        with pytest.raises(RuntimeError):
            executor.submit(work_item(dag_file, "noop", ti_id=2))
        return
    for i in range(executor.open_slots()):
        executor.submit(work_item(dag_file, "nap" if not isinstance(executor, FakeExecutor) else "noop",
                                  ti_id=i + 1))
    assert executor.open_slots() == 0
    with pytest.raises(RuntimeError):
        executor.submit(work_item(dag_file, "noop", ti_id=99))


def test_after_end_nothing_is_accepted(executor: Executor, dag_file: Path) -> None:
    executor.end(0)
    assert executor.open_slots() == 0
    with pytest.raises(RuntimeError):
        executor.submit(work_item(dag_file, "noop", ti_id=1))
