"""The pure rules of datasets: conditions, partition maths, which runs go stale, the downstream plan's order."""

from __future__ import annotations

from datetime import UTC, datetime

import pendulum
import pytest

from ledger import DAG, Asset, AssetAlias, BashTask, Dataset, DatasetOrTimeSchedule, TimePartitions
from ledger.core.dataset_rules import (
    Consumed,
    Consumer,
    EventRow,
    TryRead,
    downstream_plan,
    manual_partition,
    met,
    ready_partitions,
    stale_runs,
    trigger_interval,
    unpartitioned_trigger,
    what_runs_read,
)
from ledger.core.errors import DagDefinitionError
from ledger.core.versions import canonical_json
from ledger.sdk.datasets import DatasetError
from ledger.sdk.describe import read_spec, structure_of

A, B, C = Dataset("a"), Dataset("b"), Dataset("c")
T0 = datetime(2024, 3, 1, tzinfo=UTC)
DAILY = TimePartitions("daily")


def ev(i: int, dataset: str, partition: str | None = None, *, alias: str | None = None, minute: int = 0,
       downstream: bool = False) -> EventRow:
    return EventRow(i, dataset, partition, alias, T0.replace(minute=minute), downstream)


def test_a_list_schedule_means_all_of_them_and_operators_nest() -> None:
    both = (A & B).to_json()
    assert met(both, {"dataset:a", "dataset:b"}) and not met(both, {"dataset:a"})
    either = (A | (B & C)).to_json()
    assert met(either, {"dataset:a"}) and met(either, {"dataset:b", "dataset:c"}) and not met(either, {"dataset:b"})
    with DAG("d", schedule=[A, B]) as dag:
        BashTask("t", "true")
    assert dag.datasets is not None and dag.datasets.to_json() == both


def test_an_asset_is_named_by_its_name_and_an_alias_matches_events_added_to_it() -> None:
    assert Asset("orders").key == Asset(uri="orders").key == "orders"
    assert Asset("orders", "s3://x/orders").uri == "s3://x/orders"
    cond = (Asset("x") | AssetAlias("late")).to_json()
    assert unpartitioned_trigger(cond, [ev(1, "elsewhere", alias="late")]) is not None
    assert unpartitioned_trigger(cond, [ev(1, "elsewhere")]) is None


def test_an_unpartitioned_run_consumes_every_pending_event_and_spans_them() -> None:
    pending = [ev(3, "b", minute=9), ev(1, "a", minute=1), ev(2, "a", minute=5)]
    assert unpartitioned_trigger((A & B).to_json(), pending[1:]) is None
    consumed = unpartitioned_trigger((A & B).to_json(), pending)
    assert consumed is not None and [e.id for e in consumed] == [1, 2, 3]
    interval = trigger_interval(consumed)
    assert (interval.start.minute, interval.end.minute) == (1, 9)


def test_a_partitioned_consumer_waits_until_every_input_has_the_partition() -> None:
    latest = {("a", "2024-03-01"): ev(1, "a", "2024-03-01"), ("b", "2024-03-01"): ev(2, "b", "2024-03-01"),
              ("a", "2024-03-02"): ev(3, "a", "2024-03-02")}
    assert ready_partitions((A & B).to_json(), latest) == ["2024-03-01"]
    assert sorted(ready_partitions((A | B).to_json(), latest)) == ["2024-03-01", "2024-03-02"]


@pytest.mark.parametrize(("day", "hours"), [(31, 23), (27, 25)])
def test_hourly_partitions_of_a_berlin_dst_day_are_23_or_25(day: int, hours: int) -> None:
    p = TimePartitions("hourly", timezone="Europe/Berlin")
    month = 3 if day == 31 else 10
    start = pendulum.datetime(2024, month, day, tz="Europe/Berlin")
    keys = p.within(start, start.add(days=1))
    assert len(keys) == hours and len(set(keys)) == hours
    assert [p.interval(k).start for k in keys] == sorted(p.interval(k).start for k in keys)
    if hours == 25:  # the two 02:00 hours differ by their offsets
        assert {"2024-10-27T02:00+02:00", "2024-10-27T02:00+01:00"} <= set(keys)


def test_a_partition_key_is_normalised_and_a_bad_one_refused() -> None:
    berlin = TimePartitions("daily", timezone="Europe/Berlin")
    assert berlin.normal("2024-03-02T12:00:00+00:00") == "2024-03-02"
    assert berlin.interval("2024-03-02").start == pendulum.datetime(2024, 3, 1, 23, tz="UTC")
    assert DAILY.within(T0, T0) == ["2024-03-01"]  # an empty interval: the partition holding it
    with pytest.raises(DatasetError, match="not a partition"):
        DAILY.interval("yesterday")
    with pytest.raises(DatasetError):
        TimePartitions("fortnightly")


def test_a_run_is_stale_when_a_newer_event_of_a_partition_it_read_exists() -> None:
    latest = {("a", "p1"): ev(5, "a", "p1"), ("a", "p2"): ev(2, "a", "p2"), ("b", "p1"): ev(7, "b", "p1")}
    consumed = [Consumed(10, ev(1, "a", "p1")), Consumed(10, ev(3, "b", "p1")), Consumed(11, ev(2, "a", "p2")),
                Consumed(12, ev(4, "a", None))]  # an unpartitioned event is never a rewrite
    found = stale_runs(consumed, latest)
    assert [(s.run_id, s.by.id) for s in found] == [(10, 7)]  # listed once, with its newest cause


def test_what_a_run_read_is_what_its_tasks_latest_tries_read_else_what_it_consumed() -> None:
    latest = {("a", "p1"): ev(5, "a", "p1"), ("a", "p2"): ev(6, "a", "p2")}
    consumed = [Consumed(10, ev(1, "a", "p1")), Consumed(11, ev(2, "a", "p2")), Consumed(12, ev(3, "a", "p1")),
                Consumed(12, ev(4, "b", None))]
    reads = [TryRead(10, ("t", -1), 1, ev(1, "a", "p1")), TryRead(10, ("t", -1), 2, ev(5, "a", "p1")),  # cleared
             TryRead(11, ("t", -1), 1, ev(6, "a", "p2")),  # its try was queued after the rewrite
             TryRead(12, ("t", -1), 2, ev(5, "a", "p1")), TryRead(12, ("u", -1), 1, ev(3, "a", "p1"))]
    read = what_runs_read(consumed, reads)
    assert [(c.run_id, c.event.id) for c in read] == [(10, 5), (11, 6), (12, 3), (12, 4), (12, 5)]
    # the re-runs are current again; run 12 still has a task whose latest try read the old event
    assert [(s.run_id, s.read.id, s.by.id) for s in stale_runs(read, latest)] == [(12, 3, 5)]
    assert [s.run_id for s in stale_runs(consumed, latest)] == [10, 11, 12]  # by what they consumed alone
    assert what_runs_read(consumed, []) == sorted(consumed, key=lambda c: (c.run_id, c.event.id))


def test_a_manual_run_of_a_partition_consumer_is_the_run_of_the_partition_holding_its_date() -> None:
    cond = {"all": [{"dataset": "a", "partitions": {"every": "daily", "timezone": "Europe/Berlin"}}]}
    found = manual_partition(cond, datetime(2024, 3, 2, 5, tzinfo=UTC))  # 06:00 in Berlin
    assert found is not None
    key, interval = found
    assert (key, interval.start, interval.end) == (
        "2024-03-02", datetime(2024, 3, 1, 23, tzinfo=UTC), datetime(2024, 3, 2, 23, tzinfo=UTC))
    assert manual_partition({"dataset": "b"}, T0) is None  # unpartitioned: [d, d], as in Airflow


def test_the_downstream_plan_is_in_dependency_order_and_a_diamond_runs_the_join_last() -> None:
    consumers = [Consumer("report", frozenset({"clean", "extra"}), frozenset(), DAILY),
                 Consumer("clean", frozenset({"raw"}), frozenset({"clean"}), DAILY),
                 Consumer("enrich", frozenset({"raw"}), frozenset({"extra"}), DAILY)]
    plan = downstream_plan({"raw": ["2024-03-02", "2024-03-01"]}, consumers)
    assert [(i.dag_id, i.partition, i.depth) for i in plan] == [
        ("clean", "2024-03-01", 1), ("clean", "2024-03-02", 1), ("enrich", "2024-03-01", 1),
        ("enrich", "2024-03-02", 1), ("report", "2024-03-01", 2), ("report", "2024-03-02", 2)]
    assert plan[-1].because == ("extra", "2024-03-02")  # (of its two rewritten inputs, the last one planned)
    with pytest.raises(DatasetError, match="cycle"):
        downstream_plan({"x": ["2024-03-01"]}, [Consumer("loop", frozenset({"x"}), frozenset({"x"}), DAILY)])


def test_dag_definitions_refuse_mixed_partitionings_and_unknown_rewrite_policies() -> None:
    hourly = Dataset("h", partitions=TimePartitions("hourly"))
    daily = Dataset("d", partitions="daily")
    with pytest.raises(DagDefinitionError, match="share one partitioning"):
        DAG("x1", schedule=hourly & daily)
    with pytest.raises(DagDefinitionError, match="not partitioned"):
        DAG("x2", schedule=[daily, A])
    with pytest.raises(DagDefinitionError, match="on_upstream_rewrite"):
        DAG("x3", schedule=[A], on_upstream_rewrite="ignore")
    with pytest.raises(DagDefinitionError, match="not a Dataset"), DAG("x4", schedule=None):
        BashTask("t", "true", outlets=["s3://a"])


def test_the_version_records_outlets_and_the_condition_and_a_dataset_or_time_dag_keeps_its_schedule() -> None:
    with DAG("both", schedule=DatasetOrTimeSchedule(timetable="@daily", datasets=[A]),
             start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), on_upstream_rewrite="rerun") as dag:
        BashTask("t", "true", outlets=[Dataset("out", partitions="daily")])
    spec = read_spec("v", canonical_json(structure_of(dag)))
    assert spec.schedule.summary() == "0 0 * * *"
    assert spec.datasets == {"condition": {"dataset": "a", "uri": "a"}, "on_upstream_rewrite": "rerun"}
    assert spec.tasks["t"].outlets == ({"dataset": "out", "uri": "out",
                                        "partitions": {"every": "daily", "timezone": "UTC"}},)


def test_inlet_events_are_asked_for_by_dataset_alias_key_or_index_and_only_for_the_tasks_inlets() -> None:
    from ledger.sdk.datasets import DatasetAlias, InletEvents, inlet_partitions

    first = {"extra": {"n": 1}, "partition": None, "timestamp": "2024-03-01T00:00:00+00:00"}
    given = InletEvents({"dataset:a": [first, {**first, "extra": {"n": 2}}], "alias:late": []})
    assert [e.extra["n"] for e in given[A]] == [1, 2] and given["a"][-1]["extra"] == {"n": 2}
    assert given[0] == given[A] and given[1] == given[DatasetAlias("late")] == []
    assert given[Asset(name="a")] == given[A]  # an Asset named like the dataset's key is the same inlet
    assert list(given) == ["a", "late"] and B not in given
    with pytest.raises(KeyError, match=r"is not an inlet of this task \(its inlets: a, late\)"):
        given[B]
    with pytest.raises(AttributeError):
        _ = given[A][0].nothing_such
    daily = Dataset("d", partitions=DAILY).to_json()
    assert inlet_partitions(daily, T0, T0.replace(day=3)) == ["2024-03-01", "2024-03-02"]
    assert inlet_partitions(A.to_json(), T0, T0) is None
