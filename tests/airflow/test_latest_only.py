"""LatestOnlyOperator's choice (ledger/airflow_compat/flow.py): all its direct downstream tasks on the latest run or
a manual one, none on an older scheduled run. In process, with the clock's now."""

from __future__ import annotations

from typing import Any

import pendulum
import pytest

from ledger.airflow_compat.dag import DAG
from ledger.airflow_compat.flow import LatestOnlyOperator
from ledger.airflow_compat.operators import EmptyOperator

TODAY = pendulum.today("UTC")


@pytest.mark.parametrize(("run_type", "interval_end", "followed"), [
    pytest.param("scheduled", TODAY, ["a", "b"], id="latest"),
    pytest.param("scheduled", TODAY.subtract(days=1), [], id="older"),
    pytest.param("backfill", TODAY.subtract(days=1), [], id="older-backfill"),
    pytest.param("manual", TODAY.subtract(days=30), ["a", "b"], id="manual"),
])
def test_latest_only_follows_its_downstream_tasks_on_the_latest_or_a_manual_run(
        run_type: str, interval_end: Any, followed: list[str]) -> None:
    with DAG("latest", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
        latest = LatestOnlyOperator(task_id="latest_only")
        latest >> [EmptyOperator(task_id="b"), EmptyOperator(task_id="a")]
    assert latest.choose_branch({"run_type": run_type, "data_interval_end": interval_end}) == followed
