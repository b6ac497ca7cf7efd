"""The timeline's persistence: splices and overrides in a real database keep the invariant."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from ledger import DAG, BashTask
from ledger.core.errors import TimelineConflict
from ledger.core.states import RunState, RunType
from ledger.core.timeline import ChainRun, chain_violations
from ledger.models import DagRun, Event, TaskInstance
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from tests.conftest import examples
from tests.statements import statements_on

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")


def a_dag(dag_id: str = "daily", tasks: tuple[str, ...] = ("a", "b")) -> DAG:
    with DAG(dag_id, schedule="@daily", start_date=T0, catchup=True) as dag:
        for t in tasks:
            BashTask(t, f"echo {t}")
    dag.fileloc = "/dags/daily.py"
    return dag


def setup_dag(session: Any, clock: Any, dag: DAG | None = None) -> Any:
    dag = dag or a_dag()
    register_dag(session, dag, now=clock.now(), actor="test")
    return dag_store.current_spec(session, dag.dag_id)


def add(session: Any, spec: Any, day: int, clock: Any, *, replace: bool = False,
        run_type: RunType = RunType.BACKFILL) -> DagRun:
    at = T0.add(days=day)
    return run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(at), run_type),
                            now=clock.now(), actor="test", replace=replace)


def chain(session: Any, dag_id: str = "daily") -> list[ChainRun]:
    rows = session.execute(select(DagRun).where(DagRun.dag_id == dag_id)).scalars()
    return [ChainRun(r.id, r.logical_date, r.previous_run_id, r.state != "overridden", r.overridden_by)
            for r in rows]


def test_splice_into_a_gap_relinks_the_next_run_and_records_events(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    first = add(session, spec, 0, clock)
    last = add(session, spec, 5, clock)
    middle = add(session, spec, 2, clock)
    session.flush()
    session.refresh(last)
    assert middle.previous_run_id == first.id
    assert last.previous_run_id == middle.id
    kinds = [e.kind for e in session.scalars(select(Event).where(Event.run_id.is_not(None)).order_by(Event.id))]
    assert kinds == ["run_created", "run_created", "run_created", "run_spliced"]
    assert chain_violations(chain(session)) == []


def test_override_keeps_the_old_run_its_task_instances_version_and_previous(session: Any, clock: Any) -> None:
    spec_v1 = setup_dag(session, clock)
    a = add(session, spec_v1, 0, clock)
    old = add(session, spec_v1, 1, clock)
    spec_v2 = setup_dag(session, clock, a_dag(tasks=("a", "b", "c")))
    assert spec_v2.version_hash != spec_v1.version_hash
    new = add(session, spec_v2, 1, clock, replace=True)
    session.refresh(old)
    assert old.state == RunState.OVERRIDDEN
    assert old.overridden_by == new.id
    assert old.previous_run_id == a.id
    assert old.version_hash == spec_v1.version_hash
    old_tasks = {ti.task_id for ti in run_store.task_instances(session, old.id)}
    new_tasks = {ti.task_id for ti in run_store.task_instances(session, new.id)}
    assert (old_tasks, new_tasks) == ({"a", "b"}, {"a", "b", "c"})
    assert chain_violations(chain(session)) == []


def test_a_held_date_is_refused_without_replace(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    add(session, spec, 0, clock)
    with pytest.raises(TimelineConflict):
        add(session, spec, 0, clock)


def test_the_database_refuses_two_live_runs_for_one_date(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    run = add(session, spec, 0, clock)
    other = add(session, spec, 1, clock)
    # in a savepoint: PostgreSQL aborts the whole transaction on a refused statement, SQLite only the statement
    with pytest.raises(IntegrityError), session.begin_nested():
        session.execute(update(DagRun).where(DagRun.id == other.id).values(logical_date=run.logical_date))


def test_overridden_runs_may_share_a_date(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    for _ in range(3):
        add(session, spec, 0, clock, replace=True)
    states = sorted(r.state for r in session.scalars(select(DagRun)))
    assert states == ["overridden", "overridden", "queued"]


def test_a_run_in_flight_cannot_be_overridden(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    run = add(session, spec, 0, clock)
    run.lock_holder = 7
    session.flush()
    with pytest.raises(TimelineConflict, match="in flight"):
        add(session, spec, 0, clock, replace=True)


def test_every_task_instance_belongs_to_a_run(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    add(session, spec, 0, clock)
    tis = list(session.scalars(select(TaskInstance)))
    assert len(tis) == 2 and all(ti.run_id is not None for ti in tis)


def test_splicing_costs_a_constant_number_of_queries(sessions: Any, clock: Any) -> None:
    with sessions.begin() as session:
        spec = setup_dag(session, clock)
        for day in range(0, 400, 2):
            add(session, spec, day, clock)
    counts = []
    for day in (1, 201, 399):
        with sessions.begin() as session, statements_on(session.get_bind()) as statements:
            add(session, spec, day, clock)
            session.flush()
        counts.append(len(statements))
    assert counts[0] == counts[1] <= 10 and counts[2] <= counts[0]  # the tail has nothing to relink


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 15), st.booleans()), min_size=1, max_size=25))
def test_random_splices_and_overrides_in_the_database_keep_the_invariant(
        sessions: Any, clock: Any, ops: list[tuple[int, bool]]) -> None:
    with sessions.begin() as session:
        session.execute(TaskInstance.__table__.delete())  # a fresh timeline per example
        session.execute(DagRun.__table__.delete().where(DagRun.dag_id == "prop"))
        spec = setup_dag(session, clock, a_dag("prop", tasks=("a",)))
    for day, replace in ops:
        with sessions.begin() as session:
            held = run_store.live_at(session, "prop", T0 + timedelta(days=day)) is not None
            if held and not replace:
                with pytest.raises(TimelineConflict):
                    add(session, spec, day, clock)
            else:
                add(session, spec, day, clock, replace=replace)
    with sessions.begin() as session:
        assert chain_violations(chain(session, "prop")) == []


def test_splice_many_fills_gaps_overrides_and_relinks_in_one_pass(session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    for day in (0, 2, 4, 6):
        add(session, spec, day, clock)
    new = [run_store.NewRun(spec.schedule.interval_for(T0.add(days=d)), RunType.BACKFILL) for d in (1, 2, 3, 7)]
    ids = run_store.splice_many(session, spec, new, now=clock.now(), actor="test",
                                replace=[False, True, False, False])
    session.flush()
    assert chain_violations(chain(session)) == []
    runs = {r.id: r for r in session.scalars(select(DagRun))}
    assert runs[ids[3]].previous_run_id == next(r.id for r in runs.values() if r.logical_date.day == 7)
    assert sum(r.state == RunState.OVERRIDDEN for r in runs.values()) == 1
    assert len(list(session.scalars(select(TaskInstance).where(TaskInstance.run_id.in_(ids))))) == 8
    with pytest.raises(TimelineConflict):
        run_store.splice_many(session, spec, new[:1], now=clock.now(), actor="test")
