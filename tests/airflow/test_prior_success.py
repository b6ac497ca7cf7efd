"""Airflow's prev_*_success template names: the prior successful run of a run (ledger/store/prior_runs.py), and the
names made from it (ledger/sdk/templates.py)."""

from __future__ import annotations

from typing import Any

import pendulum
from sqlalchemy import update

from ledger.core.states import RunType
from ledger.models import DagRun
from ledger.sdk.templates import prior_success_names, render
from ledger.store.prior_runs import prior_successes
from tests.store.test_timeline_store import T0, add, setup_dag

STARTED, ENDED = pendulum.datetime(2024, 3, 10, 1, tz="UTC"), pendulum.datetime(2024, 3, 10, 2, tz="UTC")


def test_the_names_come_from_the_prior_successful_runs_interval_and_times() -> None:
    names = prior_success_names(("2024-03-03T00:00:00+00:00", "2024-03-04T00:00:00+00:00",
                                 STARTED.isoformat(), None))
    assert names == {"prev_data_interval_start_success": pendulum.datetime(2024, 3, 3, tz="UTC"),
                     "prev_data_interval_end_success": pendulum.datetime(2024, 3, 4, tz="UTC"),
                     "prev_start_date_success": STARTED, "prev_end_date_success": None}
    assert render("{{ prev_data_interval_start_success | ds }}", names, field="f") == "2024-03-03"


def test_without_a_prior_successful_run_every_name_is_none() -> None:
    assert set(prior_success_names(None).values()) == {None}


def finish(session: Any, run: DagRun, state: str) -> None:
    session.execute(update(DagRun).where(DagRun.id == run.id)
                    .values(state=state, started_at=STARTED, ended_at=ENDED))


def test_the_prior_success_is_the_latest_current_successful_run_before_the_logical_date(
        session: Any, clock: Any) -> None:
    spec = setup_dag(session, clock)
    first, second, third, fourth = (add(session, spec, day, clock) for day in (0, 1, 2, 3))
    finish(session, first, "success")
    finish(session, second, "success")
    finish(session, third, "failed")  # a failed run is passed over
    replaced = add(session, spec, 1, clock, replace=True, run_type=RunType.MANUAL)  # second is overridden
    session.flush()
    found = prior_successes(session, [first.id, third.id, fourth.id, replaced.id])
    assert first.id not in found  # nothing before it
    # the overridden run no longer counts for its date, and the run that replaced it has not succeeded
    assert found[fourth.id] == found[third.id] == (
        T0.isoformat(), T0.add(days=1).isoformat(), STARTED.isoformat(), ENDED.isoformat())
    assert found[replaced.id][0] == T0.isoformat()
    finish(session, replaced, "success")  # a manual run counts by its own state, as any run does
    assert prior_successes(session, [fourth.id])[fourth.id][:2] == (
        T0.add(days=1).isoformat(), T0.add(days=2).isoformat())


def test_a_celery_message_carries_the_prior_success_to_a_remote_try() -> None:
    import json

    from ledger.scheduler.executors.base import WorkItem
    from ledger.scheduler.executors.celery_app import item_from_json, item_to_json

    prior = ("2024-03-03T00:00:00+00:00", "2024-03-04T00:00:00+00:00", STARTED.isoformat(), None)
    item = WorkItem(ti_id=1, run_id=2, dag_id="d", task_id="t", try_number=1, fileloc="/dags/d.py",
                    logical_date=T0, data_interval_start=T0, data_interval_end=T0.add(days=1), dag_version="0" * 64,
                    run_type="scheduled", log_path="/logs/t.log", prev_success=prior)
    assert item_from_json(json.loads(json.dumps(item_to_json(item)))).prev_success == prior



def test_the_prior_successes_are_read_in_one_statement_on_the_cursor_as_sqlalchemy_reads_them(
        session: Any, clock: Any) -> None:
    from ledger.store import hot
    from ledger.store.prior_runs import _PRIOR_SUCCESSES

    spec = setup_dag(session, clock)
    runs = [add(session, spec, day, clock) for day in (0, 1, 2)]
    finish(session, runs[0], "success")
    session.flush()
    ids = [r.id for r in runs]
    seen: list[str] = []
    with hot.observe(lambda _conn, sql, _params, _many: seen.append(sql)):
        found = prior_successes(session, ids)
    assert len(seen) == 1  # on the DB-API cursor (once per loop that queues tries), not through the ORM
    through_sqlalchemy = {i: tuple(v.isoformat() if v else None for v in rest[:4])
                          for i, *rest in session.execute(_PRIOR_SUCCESSES, {"ids": ids})}
    prior = (T0.isoformat(), T0.add(days=1).isoformat(), STARTED.isoformat(), ENDED.isoformat())
    assert found == through_sqlalchemy == {runs[1].id: prior, runs[2].id: prior}
