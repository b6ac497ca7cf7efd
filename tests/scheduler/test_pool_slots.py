"""A task's `pool_slots` (Airflow's): each of its instances takes that many of its pool's slots while queued or
running. A job queues no try that would take more slots than its pool has free; the pools' listing and a backfill's
reasons count slots, not instances; a version that takes one slot keeps its hash; a database from before it gives
every task instance one slot."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from ledger import DAG, BashTask
from ledger.core.errors import DagDefinitionError
from ledger.models import Pool
from ledger.sdk.describe import version_of
from ledger.store import pools as pool_store
from ledger.store import tasks as task_store
from ledger.store.backfills import full_pools
from tests.conftest import Cli
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)
from tests.scheduler.test_task_limits import START, started_job


def slots_taken(sessions: Any, pool: str) -> int:
    """The slots of `pool` the task instances queued or running now take."""
    with sessions() as s:
        return int(s.execute(text("SELECT coalesce(sum(pool_slots), 0) FROM task_instance WHERE pool = :p AND "
                                  "state IN ('queued', 'running')"), {"p": pool}).scalar_one())


def test_a_pool_is_never_given_more_slots_than_it_has(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    _engine, sessions = job_parts
    with sessions.begin() as session:
        session.add(Pool(name="db", slots=3, description=""))
    with DAG("heavy", schedule="@daily", start_date=START, end_date=START.add(days=3), catchup=True,
             max_active_runs=4) as dag:
        BashTask("load", "true", pool="db", pool_slots=2) >> BashTask("note", "true", pool="db")
    job, executor = started_job(tmp_path, job_parts, dag, runs=4, parallelism=8)
    job.loop_once()
    # four `load`s ready, 8 executor slots: one of 2 slots fits in 3, the second would take 4
    assert [i.task_id for i in executor.submitted] == ["load"]
    assert slots_taken(sessions, "db") == 2
    with sessions() as session:
        assert pool_store.pool_rows(session)[0]["used"] == 2  # `ledger pools list` and the web's: slots, not tries
    most = 0
    for _ in range(60):
        job.loop_once()
        most = max(most, slots_taken(sessions, "db"))
        if len(executor.submitted) == 8 and not executor.in_flight():
            break
    job.shutdown()
    assert len(executor.submitted) == 8  # every run's two tries ran
    assert most <= 3
    # a `note` (1 slot) went beside a `load` (2) when the slot was free: the pool was used in full
    assert most == 3


def test_the_slots_of_instances_already_running_count_against_the_pool(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    _engine, sessions = job_parts
    with sessions.begin() as session:
        session.add(Pool(name="db", slots=5, description=""))
    with DAG("held", schedule="@daily", start_date=START, end_date=START.add(days=2), catchup=True,
             max_active_runs=3) as dag:
        BashTask("load", "true", pool="db", pool_slots=2)
    job, executor = started_job(tmp_path, job_parts, dag, runs=3, parallelism=8)
    with sessions.begin() as session:  # two of them running already (another job's, say): 4 of the 5 slots
        session.execute(text("UPDATE task_instance SET state = 'running', try_number = 1 WHERE id IN "
                             "(SELECT id FROM task_instance ORDER BY id LIMIT 2)"))
    with sessions() as session:
        assert task_store.pool_room(session, {"db": 5}) == {"db": 1}
        assert pool_store.pool_rows(session)[0]["used"] == 4
    job.loop_once()
    assert executor.submitted == []  # the third needs 2 of the 1 free
    job.shutdown()


def test_a_run_that_waits_on_slots_says_how_many_it_needs_and_whose_hold_them(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    _engine, sessions = job_parts
    with sessions.begin() as session:
        session.add(Pool(name="db", slots=3, description=""))
        session.add(Pool(name="tiny", slots=1, description=""))
    with DAG("wait", schedule="@daily", start_date=START, end_date=START.add(days=1), catchup=True,
             max_active_runs=2) as dag:
        BashTask("load", "true", pool="db", pool_slots=2)
    job, _executor = started_job(tmp_path, job_parts, dag, runs=2, parallelism=8)
    job.loop_once()
    with sessions() as session:
        runs = [r for (r,) in session.execute(text("SELECT id FROM dag_run ORDER BY logical_date"))]
        first, second = runs
        session.execute(text("UPDATE dag_run SET state = 'running' WHERE id = :r"), {"r": second})
        assert full_pools(session, [second]) == {
            second: f"pool db: 1 of 3 slot(s) free, task load needs 2 (first by run {first}, task load)"}
        # a task that needs more slots than its pool has waits until someone gives the pool more
        session.execute(text("UPDATE task_instance SET pool = 'tiny' WHERE run_id = :r"), {"r": second})
        assert full_pools(session, [second]) == {
            second: "task load needs 2 slots of pool tiny, which has 1 (ledger pools set tiny N)"}
    job.shutdown()


def test_pool_slots_is_in_the_version_only_when_not_one_and_a_bad_one_is_refused() -> None:
    def make(**slots: Any) -> DAG:
        with DAG("d", schedule="@daily", start_date=START) as dag:
            BashTask("a", "true", pool="db", **slots)
        return dag

    plain_hash, plain_text = version_of(make())
    assert "pool_slots" not in plain_text and version_of(make(pool_slots=1))[0] == plain_hash
    assert '"pool_slots":2' in version_of(make(pool_slots=2))[1].replace(" ", "")
    with DAG("d", schedule="@daily", start_date=START, default_args={"pool_slots": 3}):
        assert BashTask("from_defaults", "true").pool_slots == 3
    for bad in (0, -1, 1.5, "2", True):
        with DAG("d", schedule="@daily", start_date=START), \
                pytest.raises(DagDefinitionError, match="pool_slots must be a whole number >= 1"):
            BashTask("a", "true", pool_slots=bad)


FAN = """
import pendulum
from ledger import DAG, task

with DAG("fan", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    @task
    def files():
        return ["a", "b", "c"]

    @task(pool="db", pool_slots=SLOTS)
    def load(name):
        print("loading", name)

    @task
    def other():  # (not downstream of files: a clear of files and what follows it is a partial one)
        return 1

    load.expand(name=files())
    other()
"""


def slots_of(cli: Cli, run: str) -> dict[str, tuple[int, str | None]]:
    """label -> (its pool slots, the version its next tries run when not its run's) of the run's instances."""
    shown = cli.json("runs", "show", run)
    with sqlite3.connect(cli.home / "ledger.db") as db:
        rows = dict(((t, m), (s, v)) for t, m, s, v in db.execute(
            "SELECT task_id, map_index, pool_slots, dag_version FROM task_instance WHERE run_id = ?", (int(run),)))
    return {t["label"]: rows[(t["task_id"], t["map_index"])] for t in shown["task_instances"]}


def test_instances_take_the_slots_of_the_version_their_next_tries_run(ready_cli: Cli) -> None:
    """A clear onto the latest version gives the cleared instances its pool slots (and its version), the mapped ones
    made again by the expansion after it too; a whole run moved to the latest version takes them all."""
    cli = ready_cli
    cli.ok("pools", "set", "db", "4")
    cli.write_dag("fan.py", FAN.replace("SLOTS", "1"))
    cli.ok("trigger", "fan", "--logical-date", "2024-03-01")
    cli.ok("trigger", "fan", "--logical-date", "2024-03-02")
    cli.ok("scheduler", "--exit-when-idle")
    assert {s for s, _v in slots_of(cli, "1").values()} == {1}
    cli.write_dag("fan.py", FAN.replace("SLOTS", "2"))  # a new version: each load takes 2 slots
    cli.ok("dags", "list")
    latest = next(v["version"] for v in cli.json("dags", "versions", "fan") if v["current"])
    cli.ok("tasks", "clear", "fan", "1", "-t", "files", "--downstream", "--on-latest-version")
    cli.ok("tasks", "clear", "fan", "2", "--on-latest-version")  # the whole run moves
    cli.ok("scheduler", "--exit-when-idle")
    partial = slots_of(cli, "1")
    assert partial["files"][0] == 1  # (it takes one slot of its own pool)
    assert {label: s for label, (s, _v) in partial.items() if label.startswith("load")} == {
        "load[0]": 2, "load[1]": 2, "load[2]": 2}
    # the cleared ones run the latest version, the others their run's
    assert {label: v for label, (_s, v) in partial.items()} == {
        "files": latest, "load[0]": latest, "load[1]": latest, "load[2]": latest, "other": None}
    moved = slots_of(cli, "2")
    assert {label: s for label, (s, _v) in moved.items() if label.startswith("load")} == {
        "load[0]": 2, "load[1]": 2, "load[2]": 2}
