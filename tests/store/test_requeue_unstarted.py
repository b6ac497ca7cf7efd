"""A try that never started though nobody stopped it (it waited in a worker when its job stopped) gets a new
try that costs no retry, armed again if a START had armed it; not when a stop is pending or its run ended."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from ledger import DAG, BashTask
from ledger.core.outcomes import Outcome
from ledger.core.states import RunState, RunType, TaskState
from ledger.models import DagRun, TaskInstance, TaskTry
from ledger.scheduler.loop.outcome_recording import record_outcomes
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from tests.store.test_timeline_store import T0


def queued_try(session: Any, clock: Any) -> TaskInstance:
    """A running run whose one task instance has its try 1 queued, with no retries."""
    with DAG("waits", schedule="@daily", start_date=T0) as dag:
        BashTask("a", "true")
    dag.fileloc = "/dags/waits.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    spec = dag_store.current_spec(session, "waits")
    run = run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0), RunType.MANUAL),
                           now=clock.now(), actor="test")
    run.state = RunState.RUNNING.value
    session.flush()
    (row,) = task_store.rows_for_runs(session, [run.id])[run.id].values()
    task_store.queue(session, [row], job_id=1, now=clock.now())
    ti = session.get(TaskInstance, row.id)
    session.refresh(ti)
    return ti


def never_started(ti: TaskInstance, clock: Any, *, armed: bool = False) -> Outcome:
    return Outcome(ti.id, 1, TaskState.FAILED, clock.now(), reason="never started: stopped by shutdown",
                              requeue=True, armed=armed)


def try_state(session: Any, ti: TaskInstance) -> str:
    return session.scalar(select(TaskTry.state).where(TaskTry.task_instance_id == ti.id, TaskTry.try_number == 1))


@pytest.mark.parametrize("armed", [False, True])
def test_it_waits_for_a_new_try_that_costs_no_retry_armed_again_if_a_start_had_armed_it(
        session: Any, clock: Any, armed: bool) -> None:
    ti = queued_try(session, clock)
    assert (ti.max_tries, ti.signal_armed) == (1, False)  # queueing used the arm up
    written = record_outcomes(session, [never_started(ti, clock, armed=armed)])
    assert [st for _o, st in written] == [TaskState.SCHEDULED]
    session.refresh(ti)
    assert (ti.state, ti.try_number, ti.max_tries, ti.signal_armed) == ("scheduled", 1, 2, armed)
    assert ti.started_at is None and ti.ended_at is None
    assert try_state(session, ti) == "stopped"


def test_with_a_stop_pending_it_stays_stopped(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    ti.signal_request = "stop"
    session.flush()
    assert [st for _o, st in record_outcomes(session, [never_started(ti, clock)])] == [TaskState.STOPPED]
    session.refresh(ti)
    assert (ti.state, ti.max_tries) == ("stopped", 1) and try_state(session, ti) == "stopped"


def test_in_a_run_that_has_ended_it_stays_stopped(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    session.get(DagRun, ti.run_id).state = RunState.FAILED.value  # cancelled while the job was stopping
    session.flush()
    assert [st for _o, st in record_outcomes(session, [never_started(ti, clock)])] == [TaskState.STOPPED]
    session.refresh(ti)
    assert (ti.state, ti.max_tries) == ("stopped", 1)


def test_the_loop_reads_a_task_instance_as_the_orm_reads_it_retry_time_included(session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    ti.state, ti.next_try_at, ti.signal_armed = TaskState.UP_FOR_RETRY.value, clock.now().add(seconds=30.5), True
    session.flush()
    (row,) = task_store.rows_for_runs(session, [ti.run_id])[ti.run_id].values()
    session.refresh(ti)
    assert (row.id, row.state, row.try_number, row.max_tries, row.next_try_at, row.priority_weight, row.pool,
            row.job_id, row.armed, row.signal_id, row.map_index) == (
        ti.id, TaskState.UP_FOR_RETRY, ti.try_number, ti.max_tries, ti.next_try_at, ti.priority_weight, ti.pool,
        ti.job_id, True, ti.signal_id, ti.map_index)
    assert row.next_try_at is not None and row.next_try_at.tzinfo is not None and type(row.state) is TaskState
