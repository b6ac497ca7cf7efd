"""A try lost to a crash (its job, worker or host died) is recorded `lost`, spends no retry and gives its task
instance a new try; after max_lost_tries lost tries in a row the task instance fails. And every state write is
guarded on the state it replaces: a stale row writes nothing and raises StaleState."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from ledger.core.outcomes import Outcome
from ledger.core.states import RunState, StaleState, TaskState
from ledger.models import DagRun, TaskInstance, TaskTry
from ledger.scheduler.loop.outcome_recording import record_outcomes
from ledger.store import tasks as task_store
from tests.store.test_requeue_unstarted import queued_try


def lost(ti: TaskInstance, try_number: int, clock: Any) -> Outcome:
    return Outcome(ti.id, try_number, TaskState.LOST, clock.now(), reason="worker died")


def try_states(session: Any, ti: TaskInstance) -> list[str]:
    return list(session.scalars(select(TaskTry.state).where(TaskTry.task_instance_id == ti.id)
                                .order_by(TaskTry.try_number)))


def queue_again(session: Any, ti: TaskInstance, clock: Any) -> None:
    (row,) = task_store.rows_for_runs(session, [ti.run_id])[ti.run_id].values()
    task_store.queue(session, [row], job_id=1, now=clock.now())
    session.refresh(ti)


def test_a_lost_try_spends_no_retry_and_its_task_instance_waits_for_a_new_try(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)  # no retries: one try allowed
    written = record_outcomes(session, [lost(ti, 1, clock)])
    assert [st for _o, st in written] == [TaskState.SCHEDULED]
    session.refresh(ti)
    assert (ti.state, ti.try_number, ti.max_tries) == ("scheduled", 1, 2)
    assert try_states(session, ti) == ["lost"]
    queue_again(session, ti, clock)
    assert (ti.state, ti.try_number) == ("queued", 2)
    record_outcomes(session, [Outcome(ti.id, 2, TaskState.SUCCESS, clock.now())])
    assert try_states(session, ti) == ["lost", "success"]


def test_after_max_lost_tries_in_a_row_the_task_instance_fails(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    for n in (1, 2):
        (_, st), = record_outcomes(session, [lost(ti, n, clock)], max_lost_tries=3)
        assert st == TaskState.SCHEDULED
        queue_again(session, ti, clock)
    (_, st), = record_outcomes(session, [lost(ti, 3, clock)], max_lost_tries=3)
    assert st == TaskState.FAILED
    session.refresh(ti)
    assert ti.state == "failed" and try_states(session, ti) == ["lost", "lost", "lost"]


def test_a_try_that_ended_between_lost_ones_restarts_the_count(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    record_outcomes(session, [lost(ti, 1, clock)], max_lost_tries=2)
    queue_again(session, ti, clock)
    # a never-started try (recorded stopped) breaks the run of lost ones
    record_outcomes(session, [Outcome(ti.id, 2, TaskState.FAILED, clock.now(),
                                                            reason="never started: x", requeue=True)])
    queue_again(session, ti, clock)
    (_, st), = record_outcomes(session, [lost(ti, 3, clock)], max_lost_tries=2)
    assert st == TaskState.SCHEDULED and try_states(session, ti) == ["lost", "stopped", "lost"]


def test_a_lost_try_of_a_run_that_has_ended_stays_stopped(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    session.get(DagRun, ti.run_id).state = RunState.FAILED.value
    session.flush()
    (_, st), = record_outcomes(session, [lost(ti, 1, clock)])
    assert st == TaskState.STOPPED
    session.refresh(ti)
    assert (ti.state, ti.max_tries) == ("stopped", 1) and try_states(session, ti) == ["lost"]


def test_queueing_from_a_stale_row_writes_nothing_and_raises_stale_state(session: Any, clock: Any) -> None:
    """An operator marked the task instance skipped after the job read it scheduled: the job's queue is refused,
    and the mark stands (the old guard on the try number alone turned it back into queued)."""
    ti = queued_try(session, clock)
    record_outcomes(session, [lost(ti, 1, clock)])
    (stale,) = task_store.rows_for_runs(session, [ti.run_id])[ti.run_id].values()
    assert stale.state == TaskState.SCHEDULED
    ti.state = TaskState.SKIPPED.value  # the operator's mark, committed by another process
    session.flush()
    with pytest.raises(StaleState):
        task_store.queue(session, [stale], job_id=1, now=clock.now())
    session.refresh(ti)
    assert (ti.state, ti.try_number) == ("skipped", 1)


def test_an_outcome_recorded_from_a_stale_picture_raises_stale_state(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    ti.state = TaskState.STOPPED.value  # changed by another process; the caller still believes it queued
    session.flush()
    with pytest.raises(StaleState):
        record_outcomes(session, [Outcome(ti.id, 1, TaskState.SUCCESS, clock.now())],
                                   known={ti.id: (1, 1, TaskState.QUEUED.value)})


def test_a_mark_outside_the_transition_table_is_a_programming_error(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    with pytest.raises(ValueError, match="not an allowed transition"):
        task_store.mark(session, [(ti.id, TaskState.QUEUED, TaskState.UPSTREAM_FAILED)], now=clock.now())
