"""A job keeps a picture of each run it holds (the run, its version's spec, its task instances) and keeps it up to
date with what it writes itself: a run whose try ended is decided again from that picture, without reading its
task instances back. What another process changed (it records an event) is read from the database first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import event, select

from ledger.clock import FixedClock
from ledger.models import DagRun
from ledger.operations import mark_tasks
from ledger.states import TaskState
from ledger.store import dags as dag_store
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts, states  # noqa: F401  (a fixture)

CLOCK = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
READS_OF_RUNS = ("FROM task_instance WHERE task_instance.run_id IN", "FROM dag_run WHERE dag_run.id IN")


@pytest.fixture
def statements(job_parts: tuple[Any, Any]) -> Iterator[list[str]]:  # noqa: F811
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(job_parts[0], "before_cursor_execute", note)
    yield seen
    event.remove(job_parts[0], "before_cursor_execute", note)


def run_state(sessions: Any) -> str:
    with sessions() as s:
        return s.scalars(select(DagRun.state)).one()


def test_a_run_whose_try_ended_is_decided_from_the_jobs_picture(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    job = a_job(tmp_path, *job_parts, CLOCK, FakeExecutor())
    job.settings = replace(job.settings, poll_interval=600.0)  # no periodic full read during the test
    job.loop_once()  # reads the run, queues a
    statements.clear()
    job.loop_once()  # a succeeded: b is queued
    job.loop_once()  # b succeeded: the run succeeds
    assert states(job_parts[1]) == {"a": ("success", 1), "b": ("success", 1)}
    assert run_state(job_parts[1]) == "success"
    assert not [s for s in statements if any(read in s for read in READS_OF_RUNS)]
    job.shutdown()


def test_a_failed_try_is_read_back_as_the_database_decided_it(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    job = a_job(tmp_path, *job_parts, CLOCK, FakeExecutor(fail={("a", 1)}))
    job.settings = replace(job.settings, poll_interval=600.0)
    job.loop_once()
    statements.clear()
    job.loop_once()  # a failed with retries left: up for retry in 60 s by the job's clock, b does not start
    assert states(job_parts[1]) == {"a": ("up_for_retry", 1), "b": ("scheduled", 0)}
    assert [s for s in statements if READS_OF_RUNS[0] in s]  # the retry's due time comes from the database
    job.shutdown()


def test_what_another_process_changed_is_read_before_the_job_decides_again(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """b is marked skipped by hand while a runs: the job's picture still has b waiting for a; it must not queue b."""
    engine, sessions = job_parts
    job = a_job(tmp_path, engine, sessions, CLOCK, FakeExecutor())
    job.settings = replace(job.settings, poll_interval=600.0)
    job.loop_once()  # queues a (its start and end wait in the executor)
    with sessions.begin() as session:
        run = session.scalars(select(DagRun)).one()
        spec = dag_store.spec(session, run.dag_id, run.version_hash)
        mark_tasks(session, run, spec, ["b"], TaskState.SKIPPED, downstream=False, now=CLOCK.now(), actor="someone")
    for _ in range(3):
        job.loop_once()
    assert states(job_parts[1]) == {"a": ("success", 1), "b": ("skipped", 0)}
    assert [item.task_id for item in job.executor.submitted] == ["a"]  # type: ignore[attr-defined]
    assert run_state(sessions) == "success"
    job.shutdown()
