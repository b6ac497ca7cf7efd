"""`queue=` as Airflow takes it: the task's own queue (on an operator, a `@task` or a mapped task), over its task
group's default_args and its DAG's, names the Celery queue its tries are sent to."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.dag import DAG

QUEUES = """
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator
from airflow.utils.task_group import TaskGroup

with DAG("queues", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
         default_args={"queue": "dflt_q"}):
    BashOperator(task_id="op_queue", bash_command="echo 1", queue="spark")
    BashOperator(task_id="dag_default", bash_command="echo 1")

    @task(queue="gpu")
    def tf():
        return 1

    tf()

    @task
    def each(x):
        return x

    each.override(task_id="mapped", queue="mapq").expand(x=[1, 2])
    with TaskGroup("grp", default_args={"queue": "group_q"}):
        BashOperator(task_id="in_group", bash_command="echo 1")
        BashOperator(task_id="own_in_group", bash_command="echo 1", queue="own")
"""


@pytest.fixture
def dag(tmp_path: Path) -> Iterator[DAG]:
    (tmp_path / "queues.py").write_text(QUEUES)
    loaded = load_file(str(tmp_path / "queues.py"), str(tmp_path))
    assert loaded.error is None, loaded.error
    [found] = loaded.dags
    yield found
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_a_tasks_own_queue_wins_over_its_groups_and_dags_default_args(dag: DAG) -> None:
    queues = {task_id: task.queue for task_id, task in dag.tasks.items()}
    assert queues == {"op_queue": "spark", "dag_default": "dflt_q", "tf": "gpu", "mapped": "mapq",
                      "grp.in_group": "group_q", "grp.own_in_group": "own"}


def test_a_queue_given_to_a_task_is_recorded_in_its_version_and_not_listed_as_ignored(dag: DAG) -> None:
    for task_id in ("op_queue", "tf"):
        settings = dag.tasks[task_id].settings()
        assert settings["queue"] == dag.tasks[task_id].queue and "ignored_args" not in settings, settings
