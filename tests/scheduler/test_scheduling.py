"""Creating due runs from the timeline: fast-forward, catchup, manual runs, schedule changes, pause."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
import pytest
from sqlalchemy import select

from ledger import DAG, BashTask
from ledger.core.schedule import DataInterval
from ledger.core.states import RunType
from ledger.core.timeline import ChainRun, chain_violations
from ledger.models import Dag, DagRun
from ledger.scheduler.loop import scheduling
from ledger.scheduler.loop.scheduling import DueCache, create_due_runs
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")


def a_dag(schedule: Any = "@daily", catchup: bool = True, **kw: Any) -> DAG:
    with DAG("d", schedule=schedule, start_date=kw.pop("start_date", T0), catchup=catchup, **kw) as dag:
        BashTask("a", "true")
    dag.fileloc = "/dags/d.py"
    return dag


def live_dates(session: Any) -> list[str]:
    rows = session.scalars(select(DagRun).where(DagRun.state != "overridden").order_by(DagRun.logical_date))
    return [r.logical_date.strftime("%m-%d %H:%M") for r in rows]


_cache: list[DueCache | None] = [None]


@pytest.fixture(autouse=True, params=["without_cache", "with_a_jobs_cache"])
def due_cache(request: pytest.FixtureRequest) -> DueCache | None:
    """Every rule here holds whether or not the job remembers which DAGs have nothing due (DueCache)."""
    _cache[0] = DueCache() if request.param == "with_a_jobs_cache" else None
    return _cache[0]


def create(session: Any, now: Any) -> list[DagRun]:
    return create_due_runs(session, now=now, actor="test", cache=_cache[0])


def test_a_dag_with_nothing_due_is_not_worked_out_again_until_its_next_interval_ends(
        session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DueCache()
    register_dag(session, a_dag(), now=T0, actor="t")
    calls = []
    real = scheduling.next_scheduled
    monkeypatch.setattr(scheduling, "next_scheduled", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert len(create_due_runs(session, now=T0.add(days=2, hours=1), actor="t", cache=cache)) == 2
    worked_out = len(calls)
    for hours in (2, 12, 23):  # 03-03's interval ends at 03-04 00:00
        assert create_due_runs(session, now=T0.add(days=2, hours=hours), actor="t", cache=cache) == []
    assert len(calls) == worked_out + 1  # the first pass with nothing due, then not again
    assert [r.logical_date.day for r in create_due_runs(session, now=T0.add(days=3), actor="t", cache=cache)] == [3]
    spec = dag_store.current_spec(session, "d")  # the timeline changes: a backfill's run after the latest
    run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=5)), RunType.BACKFILL),
                     now=T0, actor="t")
    assert create_due_runs(session, now=T0.add(days=3, hours=1), actor="t", cache=cache) == []
    assert [r.logical_date.day for r in create_due_runs(session, now=T0.add(days=7), actor="t", cache=cache)] == [7]


def test_catchup_creates_every_due_interval_and_not_the_one_still_open(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    created = create(session, T0.add(days=3, hours=5))
    assert [r.logical_date.day for r in created] == [1, 2, 3]  # 03-04 is still open at 05:00
    assert all(r.run_type == RunType.SCHEDULED for r in created)


def test_catchup_false_creates_only_the_latest_due_run(session: Any) -> None:
    register_dag(session, a_dag(catchup=False), now=T0, actor="t")
    create(session, T0.add(days=10, hours=1))
    assert live_dates(session) == ["03-10 00:00"]


def test_a_second_pass_at_the_same_time_creates_nothing(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    create(session, T0.add(days=3))
    assert create(session, T0.add(days=3)) == []


def test_the_scheduler_fast_forwards_past_a_backfill_and_leaves_the_gap(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    spec = dag_store.current_spec(session, "d")
    create(session, T0.add(days=2))  # 03-01, 03-02
    backfill = spec.schedule.interval_for(T0.add(days=5))
    run_store.splice(session, spec, run_store.NewRun(backfill, RunType.BACKFILL), now=T0, actor="t")
    create(session, T0.add(days=8))
    assert live_dates(session) == ["03-01 00:00", "03-02 00:00", "03-06 00:00", "03-07 00:00", "03-08 00:00"]


def test_a_date_held_by_a_manual_run_is_not_created_twice(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    spec = dag_store.current_spec(session, "d")
    run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=1)), RunType.MANUAL),
                     now=T0, actor="t")
    create(session, T0.add(days=3))
    runs = list(session.scalars(select(DagRun).order_by(DagRun.logical_date)))
    assert [(r.logical_date.day, r.run_type) for r in runs] == [(1, "scheduled"), (2, "manual"), (3, "scheduled")]
    rows = [ChainRun(r.id, r.logical_date, r.previous_run_id, True) for r in runs]
    assert chain_violations(rows) == []


def test_a_schedule_change_continues_from_the_last_runs_interval_end(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    create(session, T0.add(days=2))  # 03-01 and 03-02 daily, the latter ends 03-03 00:00
    register_dag(session, a_dag(schedule="0 */6 * * *"), now=T0, actor="t")
    create(session, T0.add(days=2, hours=13))
    assert live_dates(session) == ["03-01 00:00", "03-02 00:00", "03-03 00:00", "03-03 06:00"]
    runs = list(session.scalars(select(DagRun).order_by(DagRun.logical_date)))
    assert runs[0].schedule != runs[-1].schedule


def test_a_paused_dag_gets_no_new_runs(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    session.get(Dag, "d").is_paused = True
    assert create(session, T0.add(days=5)) == []


def test_no_run_has_a_logical_date_after_end_date(session: Any) -> None:
    register_dag(session, a_dag(end_date=T0.add(days=2)), now=T0, actor="t")
    create(session, T0.add(days=30))
    assert live_dates(session) == ["03-01 00:00", "03-02 00:00", "03-03 00:00"]


def test_new_runs_carry_the_current_version_and_its_task_instances(session: Any) -> None:
    register_dag(session, a_dag(), now=T0, actor="t")
    (run,) = create(session, T0.add(days=1))
    assert run.version_hash == session.get(Dag, "d").current_version
    assert [ti.task_id for ti in run_store.task_instances(session, run.id)] == ["a"]
    assert run.data_interval_end - run.data_interval_start == timedelta(days=1)
    assert isinstance(DataInterval(run.data_interval_start, run.data_interval_end), DataInterval)
