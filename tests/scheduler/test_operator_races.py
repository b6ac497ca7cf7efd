"""Operators act while jobs run, on PostgreSQL: two in-process jobs (each with an executor whose tries end when
the test says) loop in a random order, while marks, clears and cancels commit between their loops. Whatever
the order, every state change goes through the table of transitions, a guard refuses what was decided from a
stale picture (StaleState, then a re-read), and the final states are what the event log says an operator or
a try made them: an operator's mark is never undone by a job, nothing runs twice, and every run ends."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pendulum
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ledger import DAG, BashTask
from ledger.core.errors import LedgerError
from ledger.core.states import TASK_TRANSITIONS, RunState, StaleState, TaskState
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun, Event, TaskInstance, TaskTry
from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.operations import cancel_run, clear_tasks, mark_tasks
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store.db import make_engine, make_sessions
from tests.conftest import examples, migrated_sessions
from tests.scheduler.test_held_starts import SteppedExecutor

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CLOCK = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
TASKS = ("a", "b", "c")


class Tries(SteppedExecutor):
    """A try starts when submitted and ends (success) when the test finishes it."""

    def finish_all(self) -> None:
        latest = {item.ti_id: item for item in self.submitted}  # (a task instance's latest try)
        for ti_id in sorted(self._busy):
            item = latest[ti_id]
            if not any(e.ti_id == ti_id and e.kind == "finished" for e in self._events):
                self._events.append(TaskEvent(ti_id, item.try_number, "finished", time.time(), "success", pid=7))


@pytest.fixture(scope="module")
def pg(postgres_server: Any) -> Iterator[tuple[Any, Any]]:
    url = postgres_server.create_database("operator_races")
    migrated, _ = migrated_sessions(url)
    migrated.dispose()
    engine = make_engine(url)
    yield engine, make_sessions(engine)
    engine.dispose()


_examples = iter(range(10_000))


def a_dag(sessions: Any, tmp: Path) -> str:
    """A fresh DAG (one per example, in the module's database) with three due daily runs of a >> b >> c."""
    dag_id = f"race{next(_examples)}"
    with DAG(dag_id, schedule="@daily", start_date=pendulum.datetime(2024, 3, 7, tz="UTC"), catchup=True) as dag:
        BashTask("a", "true") >> BashTask("b", "true") >> BashTask("c", "true")
    dag.fileloc = str(tmp / f"{dag_id}.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=CLOCK.now(), actor="test")
        create_due_runs(session, now=CLOCK.now(), actor="test")
    return dag_id


def a_job(engine: Any, sessions: Any, tmp: Path, dag_id: str) -> tuple[DagRunJob, Tries]:
    executor = Tries(parallelism=2)
    with sessions() as s:
        ids = list(s.scalars(select(DagRun.id).where(DagRun.dag_id == dag_id)))

    class OneDag(DagRunJob):  # (the runs of this example's DAG only: the database holds the earlier examples')
        def claim_filter(self) -> dict[str, Any]:
            return {"run_ids": ids}

    job = OneDag(sessions=sessions, engine=engine, executor=executor, clock=CLOCK, actor="test",
                 settings=replace(SchedulerSettings(), verify_memory=True, lock_timeout=600.0),
                 logs_folder=tmp / "logs", say=lambda _line: None)
    job.start()
    return job, executor


actions = st.lists(st.one_of(
    st.tuples(st.just("loop"), st.integers(0, 1)),
    st.tuples(st.just("finish"), st.integers(0, 1)),
    st.tuples(st.just("mark"), st.integers(0, 2), st.sampled_from(TASKS),
              st.sampled_from([TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED])),
    st.tuples(st.just("clear"), st.integers(0, 2)),
    st.tuples(st.just("cancel"), st.integers(0, 2)),
), min_size=4, max_size=24)


def operate(sessions: Any, dag_id: str, action: tuple[Any, ...]) -> None:
    """One operator action in a transaction of its own; a refusal (a try running, nothing to clear, a run
    changed meanwhile) changes nothing."""
    kind, index = action[0], action[1]
    try:
        with sessions.begin() as session:
            runs = list(session.scalars(select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.logical_date)))
            run = runs[index]
            if kind == "mark":
                spec = dag_store.spec(session, dag_id, run.version_hash)
                mark_tasks(session, run, spec, [action[2]], action[3], downstream=False, now=CLOCK.now(),
                           actor="operator")
            elif kind == "clear":
                clear_tasks(session, run, None, downstream=False, on_latest_version=False, now=CLOCK.now(),
                            actor="operator")
            else:
                cancel_run(session, run, now=CLOCK.now(), actor="operator")
    except LedgerError:
        pass


def loop(job: DagRunJob) -> None:
    # what run_started does with a StaleState: the transaction rolled back, the job forgot, the next loop reads
    with contextlib.suppress(StaleState):
        job.loop_once()


def task_states(sessions: Any, dag_id: str) -> dict[tuple[int, str], str]:
    with sessions() as s:
        return {(ti.run_id, ti.task_id): ti.state
                for ti in s.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id))}


def reachable(before: str, after: str) -> bool:
    """Whether the table allows getting from `before` to `after` in any number of moves."""
    seen, todo = {before}, [before]
    while todo:
        state = todo.pop()
        for target, sources in TASK_TRANSITIONS.items():
            if state in sources and target.value not in seen:
                seen.add(target.value)
                todo.append(target.value)
    return after in seen


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.generate])
@given(steps=actions)
def test_operator_actions_racing_two_jobs_end_as_the_table_and_the_event_log_say(
        pg: tuple[Any, Any], tmp_path: Path, steps: list[tuple[Any, ...]]) -> None:
    engine, sessions = pg
    (tmp_path / "logs").mkdir(exist_ok=True)
    dag_id = a_dag(sessions, tmp_path)
    jobs = [a_job(engine, sessions, tmp_path, dag_id) for _ in range(2)]
    seen = task_states(sessions, dag_id)
    for step in [*steps, ("loop", 0), ("loop", 1)]:
        if step[0] == "loop":
            loop(jobs[step[1]][0])
        elif step[0] == "finish":
            jobs[step[1]][1].finish_all()
        else:
            operate(sessions, dag_id, step)
        now = task_states(sessions, dag_id)
        for key, state in now.items():  # every change is a path through the table
            assert reachable(seen.get(key, TaskState.SCHEDULED.value), state), (key, seen.get(key), state, step)
        seen = now
    for _ in range(40):  # then let both jobs finish everything
        for job, executor in jobs:
            executor.finish_all()
            loop(job)
        with sessions() as s:
            if not s.scalars(select(DagRun).where(DagRun.dag_id == dag_id,
                                                  DagRun.state.in_(["queued", "running"]))).first():
                break
    for job, _executor in jobs:
        job.shutdown()
    with sessions() as s:
        runs = s.scalars(select(DagRun).where(DagRun.dag_id == dag_id)).all()
        assert {r.state for r in runs} <= {RunState.SUCCESS.value, RunState.FAILED.value}, [r.state for r in runs]
        tis = s.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id)).all()
        tries = s.execute(select(TaskTry.task_instance_id, TaskTry.try_number, TaskTry.state).join(
            TaskInstance, TaskInstance.id == TaskTry.task_instance_id).where(TaskInstance.dag_id == dag_id)).all()
        events = s.scalars(select(Event).where(Event.dag_id == dag_id).order_by(Event.id)).all()
    assert len({(t[0], t[1]) for t in tries}) == len(tries)  # no try ran twice
    assert not [t for t in tries if t[2] in ("queued", "running")], tries
    # the event log explains each task instance's final state: the last operator event that touched it decides
    # it when it was a mark (a clear gives it back to the jobs; a cancel skips what had not started)
    last: dict[tuple[int, str], tuple[str, str | None]] = {}
    for e in events:
        details = e.details or {}
        if e.kind == "tasks_marked":
            for task in details.get("tasks", []):
                last[(e.run_id, task)] = ("mark", details["state"])
        elif e.kind == "tasks_cleared":
            for task in details.get("tasks", []):
                last[(e.run_id, task)] = ("clear", None)
        elif e.kind == "run_cancelled":
            for task in details.get("skipped", []):
                last[(e.run_id, task)] = ("mark", TaskState.SKIPPED.value)
    for ti in tis:
        how = last.get((ti.run_id, ti.task_id))
        if how is not None and how[0] == "mark":
            assert ti.state == how[1], (ti.run_id, ti.task_id, ti.state, how)
        elif ti.state not in (TaskState.SUCCESS.value, TaskState.SKIPPED.value, TaskState.UPSTREAM_FAILED.value,
                              TaskState.STOPPED.value):
            pytest.fail(f"run {ti.run_id} task {ti.task_id} ended {ti.state} with no operator event saying so")
