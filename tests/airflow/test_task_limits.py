"""Airflow's per-task concurrency limits reach ledger's scheduler: `max_active_tis_per_dag` (or Airflow 2's
`task_concurrency`, taken when no max_active_tis_per_dag is given on the operator or in a default_args, as Airflow
takes it) and `max_active_tis_per_dagrun`, on an operator, a `@task`, a mapped task's `.partial()` and in
default_args, and `pool_slots` (the slots of its pool each instance takes); a limit given as None stays accepted and
ignored."""

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
    BashOperator(task_id="old_name", bash_command="echo 1", task_concurrency=2)  # the DAG's default comes first
    BashOperator(task_id="both", bash_command="echo 1", task_concurrency=2, max_active_tis_per_dag=3)
    BashOperator(task_id="from_defaults", bash_command="echo 1", pool_slots=2)

    @task(max_active_tis_per_dagrun=2)
    def each(x):
        return x

    each.expand(x=[1, 2, 3])
    BashOperator.partial(task_id="mapped_op", max_active_tis_per_dagrun=1).expand(bash_command=["true", "true"])

with DAG("old_names", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily",
         default_args={"task_concurrency": 3}):
    BashOperator(task_id="from_defaults", bash_command="echo 1")
    BashOperator(task_id="own_old_name", bash_command="echo 1", task_concurrency=1)
    BashOperator(task_id="new_name_wins", bash_command="echo 1", task_concurrency=1, max_active_tis_per_dag=2)
    BashOperator(task_id="none_given", bash_command="echo 1", task_concurrency=None, max_active_tis_per_dag=None,
                 max_active_tis_per_dagrun=None)
"""


@pytest.fixture
def dags(tmp_path: Path) -> Iterator[dict[str, DAG]]:
    (tmp_path / "limits.py").write_text(LIMITS)
    loaded = load_file(str(tmp_path / "limits.py"), str(tmp_path))
    assert loaded.error is None, loaded.error
    yield {d.dag_id: d for d in loaded.dags}
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_the_tasks_limits_are_taken_as_airflow_takes_them(dags: dict[str, DAG]) -> None:
    assert read_spec(*version_of(dags["limits"])).task_limits == {
        "own": (1, None), "old_name": (4, None), "both": (3, None), "from_defaults": (4, None), "each": (4, 2),
        "mapped_op": (4, 1)}
    assert read_spec(*version_of(dags["old_names"])).task_limits == {
        "from_defaults": (3, None), "own_old_name": (1, None), "new_name_wins": (2, None)}


def test_pool_slots_is_taken_and_a_version_that_takes_one_slot_keeps_its_hash(dags: dict[str, DAG]) -> None:
    tasks = read_spec(*version_of(dags["limits"])).tasks
    assert tasks["from_defaults"].pool_slots == 2 and tasks["own"].pool_slots == 1
    hash_before = version_of(dags["old_names"])[0]
    dags["old_names"].tasks["from_defaults"].pool_slots = 1  # as if given: pool_slots=1 is what every task took
    assert version_of(dags["old_names"])[0] == hash_before
    dags["old_names"].tasks["from_defaults"].pool_slots = 3
    assert version_of(dags["old_names"])[0] != hash_before


def test_what_does_not_act_is_listed_as_ignored(dags: dict[str, DAG]) -> None:
    ignored = {tid: t.ignored_args for tid, t in dags["limits"].tasks.items()}  # type: ignore[attr-defined]
    assert ignored["from_defaults"] == ()
    assert ignored["old_name"] == ("task_concurrency",)  # max_active_tis_per_dag came from the DAG's default_args
    assert ignored["own"] == ()
    old_names = {tid: t.ignored_args for tid, t in dags["old_names"].tasks.items()}  # type: ignore[attr-defined]
    assert old_names["own_old_name"] == () and old_names["new_name_wins"] == ("task_concurrency",)
    # given as None, they act as before they were supported: listed, so the version's hash is the one it was
    assert old_names["none_given"] == ("max_active_tis_per_dag", "max_active_tis_per_dagrun", "task_concurrency")
    assert dags["old_names"].ignored_args == []  # the DAG's task_concurrency acts


SLOTS_AS_BEFORE = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator

with DAG("slots_one", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily",
         default_args={"pool_slots": 1}):
    BashOperator(task_id="one", bash_command="echo 1", pool_slots=1)
    BashOperator(task_id="none", bash_command="echo 1", pool_slots=None)

    @task(pool_slots=1)
    def flow():
        return 1

    flow()

with DAG("slots_none", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily",
         default_args={"pool_slots": None}):
    BashOperator(task_id="plain", bash_command="echo 1")
"""


def test_a_dag_file_whose_pool_slots_change_nothing_keeps_the_version_hash_it_had_before_they_acted(
        tmp_path: Path) -> None:
    """pool_slots given as 1 or None (on an operator, in default_args, on @task) is listed as ignored, as it was
    before pool_slots acted (decision 0364): the hashes below are the ones `024f402` gave this file."""
    (tmp_path / "slots.py").write_text(SLOTS_AS_BEFORE)
    try:
        loaded = load_file(str(tmp_path / "slots.py"), str(tmp_path))
        assert loaded.error is None, loaded.error
        hashes = {d.dag_id: version_of(d)[0] for d in loaded.dags}
    finally:
        for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
            del sys.modules[name]
    assert hashes == {"slots_one": "1a679d34f612d8980dc47fe312747ce0e97375df203d753773d884a0b9f7ede1",
                      "slots_none": "8600b95a940f3913cf9267480efb04fdeef986f79c04b7580996a4a2d9d0e45a"}
