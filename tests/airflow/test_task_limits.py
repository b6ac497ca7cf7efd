"""Airflow's per-task concurrency limits reach ledger's scheduler: `max_active_tis_per_dag` (or Airflow 2's
`task_concurrency`, taken when the other is not given, as Airflow takes it) and `max_active_tis_per_dagrun`, on an
operator, a `@task`, a mapped task's `.partial()` and in default_args; `pool_slots` stays accepted and ignored."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.dag import DAG
from ledger.sdk.describe import read_spec, version_of

LIMITS = """
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator

with DAG("limits", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily",
         default_args={"max_active_tis_per_dag": 4}):
    BashOperator(task_id="own", bash_command="echo 1", max_active_tis_per_dag=1)
    BashOperator(task_id="old_name", bash_command="echo 1", task_concurrency=2)
    BashOperator(task_id="both", bash_command="echo 1", task_concurrency=2, max_active_tis_per_dag=3)
    BashOperator(task_id="from_defaults", bash_command="echo 1", pool_slots=2)

    @task(max_active_tis_per_dagrun=2)
    def each(x):
        return x

    each.expand(x=[1, 2, 3])
    BashOperator.partial(task_id="mapped_op", max_active_tis_per_dagrun=1).expand(bash_command=["true", "true"])
"""


@pytest.fixture
def dag(tmp_path: Path) -> Iterator[DAG]:
    (tmp_path / "limits.py").write_text(LIMITS)
    loaded = load_file(str(tmp_path / "limits.py"), str(tmp_path))
    assert loaded.error is None, loaded.error
    [found] = loaded.dags
    yield found
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_the_tasks_limits_are_taken_as_airflow_takes_them(dag: DAG) -> None:
    spec = read_spec(*version_of(dag))
    assert spec.task_limits == {"own": (1, None), "old_name": (2, None), "both": (3, None),
                                "from_defaults": (4, None), "each": (4, 2), "mapped_op": (4, 1)}


def test_pool_slots_is_still_listed_as_ignored(dag: DAG) -> None:
    assert dag.tasks["from_defaults"].ignored_args == ("pool_slots",)  # type: ignore[attr-defined]
    assert dag.tasks["old_name"].ignored_args == ()  # type: ignore[attr-defined]
