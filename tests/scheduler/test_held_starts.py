"""While every worker is busy, a try's start is written with the next transaction the loop needs anyway (mostly
the one that records how the try ended), at most `started_write_delay` seconds later, with the time it happened."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pendulum
from sqlalchemy import select

from ledger.infra.clock import FixedClock
from ledger.models import TaskInstance, TaskTry
from ledger.scheduler.executors.base import TaskEvent, WorkItem
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts  # noqa: F401  (a fixture)

CLOCK = pendulum.datetime(2024, 3, 10, 12, tz="UTC")


class SteppedExecutor(FakeExecutor):
    """A try starts when submitted and ends only when the test says so."""

    def submit(self, item: WorkItem) -> None:
        if self.open_slots() <= 0:
            raise RuntimeError("no open slot: check open_slots() before submit()")
        self.submitted.append(item)
        self._busy.add(item.ti_id)
        self._events.append(TaskEvent(item.ti_id, item.try_number, "started", time.time(), pid=7))

    def finish(self, item: WorkItem) -> None:
        self._events.append(TaskEvent(item.ti_id, item.try_number, "finished", time.time(), "success", pid=7))


def try_of(sessions: Any, task_id: str) -> tuple[str, str, Any, Any]:
    with sessions() as s:
        ti = s.scalars(select(TaskInstance).where(TaskInstance.task_id == task_id)).one()
        tr = s.scalars(select(TaskTry).where(TaskTry.task_instance_id == ti.id)).one()
        return ti.state, tr.state, tr.started_at, tr.ended_at


def a_busy_job(tmp_path: Path, parts: tuple[Any, Any], delay: float, **settings: Any) -> tuple[Any, SteppedExecutor]:
    engine, sessions = parts
    executor = SteppedExecutor(parallelism=1)
    job = a_job(tmp_path, engine, sessions, FixedClock(CLOCK), executor, started_write_delay=delay, **settings)
    job.loop_once()  # queues a, the one worker is busy with it
    return job, executor


def test_a_start_while_every_worker_is_busy_is_written_with_the_tries_end(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor = a_busy_job(tmp_path, job_parts, delay=60.0)
    report = job.loop_once()  # drains a's start: nothing else to do, so no transaction
    assert not report.progress and report.write_by is not None
    assert try_of(job_parts[1], "a")[:3] == ("queued", "queued", None)
    executor.finish(executor.submitted[0])
    job.loop_once()
    ti_state, try_state, started, ended = try_of(job_parts[1], "a")
    assert (ti_state, try_state) == ("success", "success")
    assert started is not None and ended is not None and started <= ended  # the start kept its own time
    job.shutdown()


def test_a_start_held_back_is_written_once_the_delay_has_passed(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, _executor = a_busy_job(tmp_path, job_parts, delay=0.05)
    job.loop_once()
    assert try_of(job_parts[1], "a")[0] == "queued"
    time.sleep(0.06)
    job.loop_once()
    assert try_of(job_parts[1], "a")[:2] == ("running", "running")
    job.shutdown()


def test_with_no_delay_a_start_is_written_at_once(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, _executor = a_busy_job(tmp_path, job_parts, delay=0)
    job.loop_once()
    assert try_of(job_parts[1], "a")[:2] == ("running", "running")
    job.shutdown()


def test_a_start_held_back_is_written_when_the_job_stops(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, _executor = a_busy_job(tmp_path, job_parts, delay=60.0)
    job.loop_once()
    job.shutdown()  # the try is still running: it is failed by the shutdown, and its start is on record
    ti_state, try_state, started, ended = try_of(job_parts[1], "a")
    assert (ti_state, try_state) != ("queued", "queued") and started is not None and ended is not None


def test_a_due_heartbeat_is_not_held_back_with_the_starts(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """Holding starts must never make the job look silent to others (they would take its runs over)."""
    job, _executor = a_busy_job(tmp_path, job_parts, delay=60.0, heartbeat_interval=0.05)
    time.sleep(0.06)
    job.loop_once()
    assert try_of(job_parts[1], "a")[:2] == ("running", "running")
    job.shutdown()
