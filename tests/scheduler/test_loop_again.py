"""A loop that made progress loops again at once, unless it only recorded tries' outcomes and filled every executor
slot with the tries it queued: then the job sleeps until the executor, a doorbell, a retry or a cadence wakes it,
instead of a loop that would find nothing to do and still take a transaction (decision 0322)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ledger.infra.clock import FixedClock
from ledger.scheduler.loop import life_cycle
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.runtime.try_report import ReportFile, TryReport
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts  # noqa: F401  (a fixture)
from tests.scheduler.test_held_starts import CLOCK, SteppedExecutor, try_of
from tests.scheduler.test_task_runner import work_item


class WakingExecutor(SteppedExecutor):
    """A SteppedExecutor whose events come with a handle to wait on, as the local and Celery executors' do."""

    def __init__(self, parallelism: int) -> None:
        super().__init__(parallelism=parallelism)
        self.read_end, self.write_end = os.pipe()

    def wait_handles(self) -> list[Any]:
        return [self.read_end]

    def end(self, grace: float) -> list[Any]:
        events = super().end(grace)
        for fd in (self.read_end, self.write_end):
            os.close(fd)
        return events


class CountedWakeup:
    """A wake-up that returns at once and counts the sleeps the job asked for."""

    def __init__(self) -> None:
        self.sleeps = 0

    def settle(self) -> None:
        pass

    def sleep(self, handles: list[Any], timeout: float) -> bool:
        self.sleeps += 1
        return False

    def interrupt(self) -> None:
        pass


def stepped_job(tmp_path: Path, parts: tuple[Any, Any], parallelism: int, *,
                wakes: bool = True) -> tuple[Any, SteppedExecutor, CountedWakeup]:
    """A job holding run d 2024-03-09 (a >> b) that has queued a; starts held back (a minute). `wakes`: the
    executor has a handle that wakes the job's sleep (the sequential executor has none)."""
    engine, sessions = parts
    executor = WakingExecutor(parallelism) if wakes else SteppedExecutor(parallelism=parallelism)
    job = a_job(tmp_path, engine, sessions, FixedClock(CLOCK), executor, started_write_delay=60.0)
    job.wakeup = wakeup = CountedWakeup()
    job.loop_once()  # the run starts, a is queued
    return job, executor, wakeup


def test_a_loop_that_fills_the_freed_slot_sleeps_until_something_happens(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor, wakeup = stepped_job(tmp_path, job_parts, parallelism=1)
    executor.finish(executor.submitted[0])
    report = job.loop_once()  # a's start and end recorded, b queued in the slot a freed
    assert report.outcomes and report.queued == 1 and executor.open_slots() == 0
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 1
    assert try_of(job_parts[1], "b")[:2] == ("queued", "queued")
    job.shutdown()


def test_without_handles_to_wake_the_sleep_a_loop_that_fills_the_slot_loops_again_at_once(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor, wakeup = stepped_job(tmp_path, job_parts, parallelism=1, wakes=False)
    executor.finish(executor.submitted[0])
    report = job.loop_once()
    assert report.queued == 1 and executor.open_slots() == 0
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 0  # its next events are drained by the next loop, not after a poll interval
    job.shutdown()


class HoldingExecutor(WakingExecutor):
    """A WakingExecutor that says it holds events no handle announces (as the local executor does once it has made
    one itself: an adopted try's end, a worker found dead as an item was sent to it)."""

    held = False

    def holds_events(self) -> bool:
        return self.held


def test_a_loop_that_fills_the_slot_loops_again_at_once_while_its_executor_holds_events_no_handle_announces(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    executor = HoldingExecutor(parallelism=1)
    job = a_job(tmp_path, engine, sessions, FixedClock(CLOCK), executor, started_write_delay=60.0)
    job.wakeup = wakeup = CountedWakeup()
    job.loop_once()  # the run starts, a is queued
    executor.finish(executor.submitted[0])
    report = job.loop_once()  # a's end recorded, b queued in the slot a freed
    assert report.queued == 1 and executor.open_slots() == 0
    executor.held = True
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 0  # drained by the next loop, not after a poll interval
    executor.held = False
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 1
    job.shutdown()


def test_a_local_executor_holds_the_end_of_a_try_it_adopted_until_it_is_drained(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 1)
    ended = work_item(dag_file, "returns", ti_id=1, try_number=1)
    Path(ended.log_path).parent.mkdir(parents=True, exist_ok=True)
    ReportFile(ended.log_path).leave(TryReport("success", None, 5.0, ended.log_path))
    assert not executor.holds_events()
    executor.follow(executor.find([(ended, True)]))
    assert executor.holds_events()
    assert [e.kind for e in executor.drain()] == ["finished"]
    assert not executor.holds_events()


def test_a_loop_that_leaves_a_slot_open_loops_again_at_once(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor, wakeup = stepped_job(tmp_path, job_parts, parallelism=2)
    executor.finish(executor.submitted[0])
    report = job.loop_once()  # b queued, a slot still open
    assert report.queued == 1 and executor.open_slots() == 1
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 0
    job.shutdown()


def test_a_loop_that_finished_a_run_loops_again_at_once(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor, wakeup = stepped_job(tmp_path, job_parts, parallelism=1)
    executor.finish(executor.submitted[0])
    job.loop_once()  # b queued
    executor.finish(executor.submitted[1])
    report = job.loop_once()  # b ended: the run succeeds and its lock is released
    assert report.runs_changed == 1
    life_cycle.sleep(job, report)
    assert wakeup.sleeps == 0
    job.shutdown()


@pytest.mark.parametrize("step", ["created", "claimed", "marked", "runs_changed", "callbacks", "again"])
def test_a_loop_that_changed_more_than_tries_loops_again_with_no_open_slot(step: str) -> None:
    report = LoopReport(outcomes=1, queued=1, decided=True)
    assert not report.loops_again(0, executor_wakes=True)
    setattr(report, step, True if step == "again" else 1)
    assert report.loops_again(0, executor_wakes=True)


def test_a_loop_that_only_recorded_starts_loops_again_to_decide_its_runs() -> None:
    assert LoopReport(outcomes=2, decided=False).loops_again(0, executor_wakes=True)
    assert not LoopReport().loops_again(0, executor_wakes=True)  # no progress: it sleeps
