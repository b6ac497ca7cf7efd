"""`ti.xcom_pull` as Airflow DAG files call it: a mapped task's value narrowed by `map_indexes`; a pull of earlier
runs' values refused in one line, not answered with a quiet None that a watermark idiom would read as "start over"."""

from __future__ import annotations

import pendulum
import pytest

from ledger.sdk.context import TaskContext


def context(values: dict[str, dict[str, object]]) -> TaskContext:
    day = pendulum.datetime(2024, 3, 10, tz="UTC")
    return TaskContext(dag_id="d", task_id="t", run_id="7", logical_date=day, data_interval_start=day,
                       data_interval_end=day, try_number=1, dag_version="v", run_type="scheduled", xcom_values=values)


def test_map_indexes_picks_the_instances_values_of_a_mapped_tasks_list() -> None:
    ti = context({"mapped": {"return_value": ["a", "b", "c"]}, "plain": {"return_value": 5}})
    assert ti.xcom_pull(task_ids="mapped") == ["a", "b", "c"]
    assert ti.xcom_pull(task_ids="mapped", map_indexes=1) == "b"
    assert ti.xcom_pull(task_ids="mapped", map_indexes=[2, 0]) == ["c", "a"]
    assert ti.xcom_pull(task_ids="mapped", map_indexes=7) is None
    assert ti.xcom_pull(task_ids=["mapped", "plain"], map_indexes=0) == ["a", 5]


def test_a_pull_of_earlier_runs_values_is_refused_in_one_line() -> None:
    ti = context({"load": {"watermark": "2024-03-09"}})
    with pytest.raises(ValueError, match="include_prior_dates=True is not supported: a try pulls the values of its "
                                         "own run only"):
        ti.xcom_pull(task_ids="load", key="watermark", include_prior_dates=True)
    assert ti.xcom_pull(task_ids="load", key="watermark", include_prior_dates=False) == "2024-03-09"


def test_a_return_value_a_skipped_upstream_never_passed_is_none_another_key_is_missing() -> None:
    """Branch-then-join with TaskFlow values: the join's trigger rule lets it run after a skipped branch, and it
    gets None for that branch's value, as Airflow's TaskFlow gives it."""
    from ledger.sdk.xcom import MissingValue, XComRef, resolve

    values: dict[str, dict[str, object]] = {"other": {"return_value": 1}}
    assert resolve([XComRef("maybe"), XComRef("other")], values) == [None, 1]
    with pytest.raises(MissingValue, match="task 'maybe' passed no value 'rows' in this run"):
        resolve({"rows": XComRef("maybe", "rows")}, values)
