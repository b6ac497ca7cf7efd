"""What a limit allows, counted by a job about to queue: a DAG's task instances queued or running (max_active_tasks),
a task's (max_active_tis_per_dag) and a pool's (its slots). On PostgreSQL two jobs that count the same DAG, task or pool
take turns (the second counts what the first queued once it has committed), so two schedulers cannot each find room
for the last instance; SQLite's transactions take turns from their first statement already (decision 0363)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pendulum
import pytest
from sqlalchemy import text

from ledger import DAG, BashTask
from ledger.core.states import RunType, TaskState
from ledger.infra.clock import FixedClock
from ledger.models import Pool
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from tests.conftest import sessions_on

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")
LOAD = ("d", "load")


def two_runs(sessions: Any) -> list[int]:
    """DAG d (task load, max_active_tis_per_dag=1, in pool p of one slot) with two runs; the ids of their `load` task
    instances."""
    clock = FixedClock(pendulum.datetime(2024, 3, 10, tz="UTC"))
    with sessions.begin() as session:
        with DAG("d", schedule="@daily", start_date=T0) as dag:
            BashTask("load", "true", max_active_tis_per_dag=1, pool="p")
        session.add(Pool(name="p", slots=1, description=""))
        dag.fileloc = "/dags/d.py"
        register_dag(session, dag, now=clock.now(), actor="test")
        spec = dag_store.current_spec(session, "d")
        runs = [run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=n)),
                                                                 RunType.SCHEDULED), now=clock.now(), actor="test")
                for n in range(2)]
        session.flush()
        return [ti.id for run in runs for ti in run_store.task_instances(session, run.id)]


# each count as a job about to queue makes it, and what it finds once the first job's `load` is queued
COUNTS = {
    "a DAG's max_active_tasks": (lambda s: task_store.active_counts_by_dag(s, ["d"], lock=True), {"d": 1}),
    "a task's max_active_tis_per_dag": (lambda s: task_store.active_counts_by_task(s, [LOAD], lock=True), {LOAD: 1}),
    "a pool's slots": (lambda s: task_store.pool_room(s, {"p": 1}, lock=True), {"p": 0}),
}


@pytest.mark.postgres
@pytest.mark.parametrize("limit", list(COUNTS))
def test_a_second_job_counts_only_once_the_first_has_committed_what_it_queued(
        migrated_postgres_url: str, limit: str) -> None:
    count, after = COUNTS[limit]
    engine, sessions = sessions_on(migrated_postgres_url)
    try:
        first_ti, _second_ti = two_runs(sessions)
        first = sessions()
        first.begin()
        assert count(first) != after  # room for one: the first job takes it
        first.execute(text("UPDATE task_instance SET state = :q WHERE id = :i"),
                      {"q": TaskState.QUEUED.value, "i": first_ti})
        counted: list[Any] = []
        done = threading.Event()

        def second_job() -> None:
            with sessions.begin() as second:
                counted.append(count(second))
            done.set()

        threading.Thread(target=second_job, daemon=True).start()
        deadline = time.monotonic() + 60
        with engine.connect() as watcher:  # until the second job waits on the lock
            while not watcher.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                           "AND NOT granted")).scalar_one():
                assert not done.wait(0.01), f"the second job counted without waiting: {counted}"
                assert time.monotonic() < deadline, "the second job never asked for the lock"
        first.commit()
        first.close()
        assert done.wait(60)
        assert counted == [after]  # no room left: it queues no second `load`
    finally:
        engine.dispose()


def test_on_sqlite_the_counts_take_no_lock_statement(sqlite_sessions: Any) -> None:
    from tests.statements import statements_on

    two_runs(sqlite_sessions)
    with sqlite_sessions.begin() as session, statements_on(session.connection()) as statements:
        for count, _after in COUNTS.values():
            count(session)
    assert len(statements) == len(COUNTS)
    assert not [s for s in statements if "advisory" in s]


@pytest.mark.postgres
def test_a_jobs_locks_are_taken_in_the_order_of_their_hashes_so_colliding_keys_cannot_deadlock(
        migrated_postgres_url: str) -> None:
    """Two DAG ids whose hashes collide are one lock. A job wanting `b` and `c`, where `c` collides with `a` held by
    another, asks for the lower hash first: it waits holding nothing (in the keys' own order it would hold `b`'s lock
    while waiting for `c`'s, and a holder of `a` that then wants `b` would deadlock with it)."""
    engine, sessions = sessions_on(migrated_postgres_url)
    try:
        def hashed(key: str) -> int:
            with engine.connect() as conn:
                return int(conn.execute(text("SELECT hashtext(:k)"), {"k": key}).scalar_one())

        a, c = "dag_147806", "dag_241156"
        assert hashed(a) == hashed(c)
        b = next(k for k in (f"dag_2{n}" for n in range(1000)) if k < c and hashed(k) > hashed(a))
        first = sessions()
        first.begin()
        task_store.take_limit_locks(first, task_store.DAG_LIMIT_LOCKS, [a])
        done = threading.Event()

        def second_job() -> None:
            with sessions.begin() as second:
                task_store.take_limit_locks(second, task_store.DAG_LIMIT_LOCKS, [b, c])
            done.set()

        threading.Thread(target=second_job, daemon=True).start()
        deadline = time.monotonic() + 60
        mine = first.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as watcher:
            while not watcher.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                           "AND NOT granted")).scalar_one():
                assert not done.wait(0.01), "the second job took the lock held by the first"
                assert time.monotonic() < deadline, "the second job never asked for the lock"
            held = watcher.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                                        "AND pid <> :me"), {"me": mine}).scalar_one()
        assert held == 0  # it waits for the lower hash first, holding nothing
        task_store.take_limit_locks(first, task_store.DAG_LIMIT_LOCKS, [b])  # (no deadlock: b's lock is free)
        first.commit()
        first.close()
        assert done.wait(60)
    finally:
        engine.dispose()
