"""Moving a run to another version of its DAG (`ledger tasks clear --on-latest-version`): its task instances
follow the version the run will run."""

from __future__ import annotations

from typing import Any

from ledger import DAG, BashTask
from ledger.core.states import RunType, TaskState
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
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
