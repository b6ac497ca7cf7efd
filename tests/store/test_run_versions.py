"""Moving a run to another version of its DAG (`ledger tasks clear --on-latest-version` of the whole run): its task
instances follow the version the run will run. A partial clear on the latest version moves only the cleared task
instances (decision 0271)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import DAG, BashTask
from ledger.core.errors import InvalidInput
from ledger.core.states import RunState, RunType, TaskState
from ledger.services import operations
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import events as event_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from tests.store.test_timeline_store import T0


def version(session: Any, clock: Any, tasks: dict[str, dict[str, Any]]) -> Any:
    with DAG("moving", schedule="@daily", start_date=T0) as dag:
        for task_id, args in tasks.items():
            BashTask(task_id, f"echo {task_id}", **args)
    dag.fileloc = "/dags/moving.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    return dag_store.current_spec(session, "moving")


def states(session: Any, run_id: int) -> dict[str, tuple[str, str, int, int]]:
    return {ti.task_id: (ti.state, ti.pool, ti.priority_weight, ti.max_tries)
            for ti in run_store.task_instances(session, run_id)}


def test_a_run_moved_to_another_version_takes_its_pools_and_pool_slots(session: Any, clock: Any) -> None:
    a = version(session, clock, {"b": {}, "p": {"pool": "db"}})
    run = run_store.splice(session, a, run_store.NewRun(a.schedule.interval_for(T0), RunType.MANUAL),
                           now=clock.now(), actor="test")
    session.flush()
    b = version(session, clock, {"b": {"pool": "db", "pool_slots": 3}, "p": {"pool": "db", "pool_slots": 2}})
    run_store.move_to_version(session, run, b, now=clock.now(), actor="test", reason="r")
    assert {ti.task_id: (ti.pool, ti.pool_slots) for ti in run_store.task_instances(session, run.id)} == {
        "b": ("db", 3), "p": ("db", 2)}


def test_a_task_that_comes_back_in_the_version_a_run_moves_to_runs_again(session: Any, clock: Any) -> None:
    a = version(session, clock, {"b": {}, "p": {}})
    run = run_store.splice(session, a, run_store.NewRun(a.schedule.interval_for(T0), RunType.MANUAL),
                           now=clock.now(), actor="test")
    session.flush()
    b = version(session, clock, {"b": {}, "q": {}})  # p renamed to q
    assert run_store.move_to_version(session, run, b, now=clock.now(), actor="test", reason="r") == (["q"], ["p"])
    assert states(session, run.id)["p"][0] == TaskState.REMOVED
    c = version(session, clock, {"b": {}, "p": {"pool": "slow", "priority_weight": 7, "retries": 2}})  # back
    assert run_store.move_to_version(session, run, c, now=clock.now(), actor="test", reason="r") == (["p"], ["q"])
    found = states(session, run.id)
    assert found["p"] == (TaskState.SCHEDULED, "slow", 7, 3)  # as version c says, not left removed
    assert found["q"][0] == TaskState.REMOVED


def finished(session: Any, run: Any) -> None:
    for ti in run_store.task_instances(session, run.id):
        ti.state, ti.try_number = TaskState.SUCCESS.value, 1
    run.state = RunState.SUCCESS.value
    session.flush()


def test_a_partial_clear_on_the_latest_version_leaves_the_runs_version_and_gives_the_task_instances_theirs(
        session: Any, clock: Any) -> None:
    a = version(session, clock, {"b": {}, "p": {}})
    run = run_store.splice(session, a, run_store.NewRun(a.schedule.interval_for(T0), RunType.MANUAL),
                           now=clock.now(), actor="test")
    finished(session, run)
    b = version(session, clock, {"b": {"retries": 2}, "p": {}, "q": {}})  # changed b, a new task q
    done = operations.clear_tasks(session, run, ["b"], downstream=False, on_latest_version=True, now=clock.now(),
                                  actor="test")
    assert (done.cleared, done.moved, done.version) == (["b"], None, b.version_hash)
    assert run.version_hash == a.version_hash  # the run's recorded version is unchanged
    tis = {ti.task_id: ti for ti in run_store.task_instances(session, run.id)}
    assert set(tis) == {"b", "p"} and tis["b"].dag_version == b.version_hash and tis["p"].dag_version is None
    assert tis["b"].max_tries == 1 + 1 + 2  # the retries of the version it runs
    rows = task_store.rows_for_runs(session, [run.id])[run.id]
    assert rows["b"].version == b.version_hash and rows["p"].version is None  # what the scheduler queues with
    (event,) = event_store.listing_json(session, kinds=["tasks_cleared"])
    assert event["details"]["version"] == b.version_hash and event["details"]["run_version"] == a.version_hash
    assert event_store.listing_json(session, kinds=["run_version_changed"]) == []

    with pytest.raises(InvalidInput, match=r"task 'q' is not in version .* clear the whole run"):
        operations.clear_tasks(session, run, ["q"], downstream=False, on_latest_version=True, now=clock.now(),
                               actor="test")

    finished(session, run)  # the whole run on the latest version: the run moves, its task instances follow it
    moved = operations.clear_tasks(session, run, None, downstream=False, on_latest_version=True, now=clock.now(),
                                   actor="test")
    assert moved.moved is not None and run.version_hash == b.version_hash
    assert {ti.task_id: ti.dag_version for ti in run_store.task_instances(session, run.id)} == \
        {"b": None, "p": None, "q": None}
