"""The scheduler's dataset parts on a real SQLite database: after an event, only that event's consumers are looked at
(not every DAG), and a pass over every DAG still finds what a targeted one may not (an unpaused DAG); what a try
reads of its inlets."""

from __future__ import annotations

from typing import Any

import pendulum
import pytest
from sqlalchemy import update

from ledger import DAG, BashTask, Dataset, TimePartitions
from ledger.core.schedule import DataInterval
from ledger.core.states import RunType
from ledger.models import Dag
from ledger.scheduler.loop import dataset_runs
from ledger.scheduler.loop.dataset_runs import QuietConsumers, create_dataset_runs
from ledger.sdk.datasets import InletEvents
from ledger.services.dataset_docs import inlets_document
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import datasets as dataset_store
from ledger.store import runs as run_store

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")
A, B = Dataset("s3://a"), Dataset("s3://b")


def dag(dag_id: str, schedule: Any, **task: Any) -> DAG:
    with DAG(dag_id, schedule=schedule, start_date=T0) as d:
        BashTask("t", "true", **task)
    d.fileloc = f"/dags/{dag_id}.py"
    return d


@pytest.fixture
def producer_run(session: Any) -> int:
    for d in (dag("p", None, outlets=[A, B]), dag("on_a", [A]), dag("on_b", [B]), dag("on_both", A & B),
              dag("timed", "@daily")):
        register_dag(session, d, now=T0, actor="t")
    spec = dag_store.current_spec(session, "p")
    return run_store.splice(session, spec, run_store.NewRun(DataInterval(T0, T0), RunType.MANUAL), now=T0,
                            actor="t").id


def event(session: Any, run_id: int, dataset: Dataset, minute: int, *, partition: str | None = None,
          extra: dict[str, Any] | None = None) -> None:
    dataset_store.record_events(session, [{
        "dataset": dataset.key, "partition": partition, "alias": None, "extra": extra, "run_id": run_id, "dag_id": "p",
        "task_id": "t", "try_number": 1, "downstream": False, "created_at": T0.add(minutes=minute)}])


def looked_at(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = dataset_store.pending
    monkeypatch.setattr(dataset_store, "pending", lambda s, dag_id, *a: seen.append(dag_id) or real(s, dag_id, *a))
    return seen


def made(session: Any, cache: QuietConsumers, minute: int, *, only_news: bool = True) -> list[str]:
    runs = create_dataset_runs(session, now=T0.add(minutes=minute), actor="t", cache=cache, only_news=only_news)
    return [r.dag_id for r in runs]


def test_a_pass_after_an_event_looks_only_at_the_consumers_of_its_dataset(
        session: Any, producer_run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = QuietConsumers()
    assert made(session, cache, 0, only_news=False) == []  # every consumer looked at once: all quiet
    seen = looked_at(monkeypatch)
    assert made(session, cache, 1) == [] and seen == []  # no new event: nobody is looked at
    event(session, producer_run, A, 2)
    assert made(session, cache, 3) == ["on_a"]
    assert sorted(set(seen)) == ["on_a", "on_both"]  # on_b and the time-scheduled DAG are not looked at
    seen.clear()
    event(session, producer_run, B, 4)
    assert made(session, cache, 5) == ["on_b", "on_both"]
    assert sorted(set(seen)) == ["on_a", "on_b", "on_both"]  # on_a made a run in the last pass: not quiet, looked at


def test_a_consumer_paused_during_an_event_gets_its_run_from_the_pass_over_every_dag_once_unpaused(
        session: Any, producer_run: int) -> None:
    cache = QuietConsumers()
    made(session, cache, 0, only_news=False)
    session.execute(update(Dag).where(Dag.dag_id == "on_a").values(is_paused=True))
    event(session, producer_run, A, 1)
    assert made(session, cache, 2) == []  # paused: the targeted pass leaves it
    assert made(session, cache, 3, only_news=False) == []  # still paused; the full pass forgets it was quiet
    session.execute(update(Dag).where(Dag.dag_id == "on_a").values(is_paused=False))
    assert made(session, cache, 4) == []  # a targeted pass does not know it again yet (no new event)
    assert made(session, cache, 5, only_news=False) == ["on_a"]  # the next pass over every DAG does


DAILY_D = Dataset("d", partitions=TimePartitions("daily"))


def test_a_try_reads_the_newest_events_of_its_inlets_and_its_reads_are_recorded(
        session: Any, producer_run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    register_dag(session, dag("reader", None, inlets=[A, DAILY_D]), now=T0, actor="t")
    spec = dag_store.current_spec(session, "reader")
    run = run_store.splice(session, spec, run_store.NewRun(DataInterval(T0, T0.add(days=1)), RunType.MANUAL),
                           now=T0, actor="t")
    for minute in (1, 2, 3):
        event(session, producer_run, A, minute, extra={"n": minute})
    for minute, part in ((4, "2024-03-01"), (5, "2024-03-02"), (6, "2024-03-01"), (7, "2024-02-29")):
        event(session, producer_run, DAILY_D, minute, partition=part)
    monkeypatch.setattr(dataset_runs, "INLET_EVENTS_LIMIT", 2)
    (ti,) = run_store.task_instances(session, run.id)
    found = dataset_runs.inlet_events(session, [(ti, run, spec)], {ti.id: 1}, now=T0.add(minutes=8), actor="t")
    given = InletEvents(found[ti.id])
    assert [e.extra["n"] for e in given[A]] == [2, 3]  # the newest, oldest first: [-1] is the latest
    (day,) = given[DAILY_D]  # the run's one partition, as its newest event wrote it
    assert (day.partition, day.timestamp) == ("2024-03-01", T0.add(minutes=6).isoformat())
    read = inlets_document(session, run.id)
    assert [(r["task_id"], r["try_number"], r["inlet"], r["partition"]) for r in read] == [
        ("t", 1, "s3://a", None), ("t", 1, "s3://a", None), ("t", 1, "d", "2024-03-01")]
    assert read[-1]["event_id"] == day.event_id and read[-1]["source_run_id"] == str(producer_run)


def test_a_consumer_run_at_an_instant_another_run_holds_takes_the_next_microsecond(
        session: Any, producer_run: int) -> None:
    at = T0.add(minutes=2)
    spec = dag_store.current_spec(session, "on_a")
    run_store.splice(session, spec, run_store.NewRun(DataInterval(at, at), RunType.MANUAL), now=at, actor="t")
    event(session, producer_run, A, 2)
    (made_run,) = create_dataset_runs(session, now=T0.add(minutes=3), actor="t")
    assert made_run.logical_date == at.add(microseconds=1)


def test_a_pass_over_every_dag_without_a_consumer_reads_no_dataset_event_and_a_later_consumer_gets_its_run(
        session: Any) -> None:
    from tests.statements import statements_on

    for d in (dag("p", None, outlets=[A]), dag("timed", "@daily")):
        register_dag(session, d, now=T0, actor="t")
    spec = dag_store.current_spec(session, "p")
    run_id = run_store.splice(session, spec, run_store.NewRun(DataInterval(T0, T0), RunType.MANUAL), now=T0,
                              actor="t").id
    event(session, run_id, A, 1)
    cache = QuietConsumers()
    dags = dag_store.schedulable(session)  # as the scheduler's pass reads them, once for its run creation
    with statements_on(session.connection()) as seen:
        assert create_dataset_runs(session, now=T0.add(minutes=2), actor="t", cache=cache, dags=dags) == []
        assert not cache.news(session)  # (after another process wrote): no consumer, nothing to look at
    assert not [s for s in seen if "dataset_event" in s or "FROM dag " in s], seen
    register_dag(session, dag("on_a", [A]), now=T0, actor="t")  # a consumer appears: its event is still pending
    assert made(session, cache, 3, only_news=False) == ["on_a"]
