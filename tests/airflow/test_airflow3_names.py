"""Airflow 3.1-3.3 names of `airflow.sdk` that Airflow 3's own examples use: deadline alerts refused by design in one
line naming ledger's deadline (decision 0283), an asset's access control accepted as Airflow takes it without
multi-team mode, the state stores and partition mappers refused in one line until they are carried; and Airflow
3.2's async task functions and a @task.bash's env holding other tasks' values, as the standard provider's examples
use them."""

from __future__ import annotations

from pathlib import Path

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

DEADLINE = """\
from datetime import timedelta
import pendulum
from airflow.sdk import DAG, {name}

with DAG("alerted", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    pass
"""


def last_line(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    found = load_file(str(folder / name), str(folder))
    assert found.error is not None and not found.dags
    lines: list[str] = found.error.strip().splitlines()
    return lines[-1]


@pytest.mark.parametrize("name", ["AsyncCallback", "SyncCallback", "DeadlineAlert", "DeadlineReference"])
def test_deadline_alerts_are_refused_in_one_line_naming_ledgers_deadline(tmp_path: Path, name: str) -> None:
    assert last_line(tmp_path, "alerted.py", DEADLINE.format(name=name)) == (
        f"{tmp_path / 'alerted.py'}:3: airflow.sdk.{name} is an Airflow name ledger does not provide: ledger does "
        "not carry Airflow 3's deadline alerts: its deadline counts from the end of the run's data interval and its "
        "callbacks run in ledger's callback processes, not in a triggerer (decision 0283); give the DAG "
        "deadline=timedelta(...) with on_deadline_missed=[your function] (ledger's own), or Airflow 2's sla= with "
        "sla_miss_callback=")


def test_a_name_airflow_sdk_does_not_have_is_pythons_import_error(tmp_path: Path) -> None:
    assert "ImportError: cannot import name 'NoSuchName' from 'airflow.sdk'" in last_line(
        tmp_path, "typo.py", DEADLINE.format(name="NoSuchName"))


def test_an_assets_access_control_is_accepted_and_the_asset_is_the_same_dataset(tmp_path: Path) -> None:
    (tmp_path / "teams.py").write_text("""\
import pendulum
from airflow.sdk import DAG, Asset, AssetAccessControl
from airflow.providers.standard.operators.bash import BashOperator

shared = Asset(name="shared", uri="s3://lake/shared.csv",
               access_control=AssetAccessControl(producer_teams=["analytics"], allow_global=False))
with DAG("producer", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="make", bash_command="true", outlets=[shared])
with DAG("consumer", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=[shared]):
    BashOperator(task_id="take", bash_command="true")
""")
    found = load_file(str(tmp_path / "teams.py"), str(tmp_path))
    assert found.error is None, found.error
    producer, consumer = sorted(found.dags, key=lambda d: d.dag_id, reverse=True)
    [outlet] = producer.tasks["make"].outlets
    assert outlet.to_json() == {"dataset": "shared", "uri": "s3://lake/shared.csv"}
    assert outlet.access_control.producer_teams == ["analytics"]
    assert consumer.datasets is not None


STATE_STORES_REFUSED = ("task and asset state stores (task_state_store, asset_state_store, NEVER_EXPIRE) are refused "
                        "by design")
PARTITIONS_REFUSED = "partition mappers and partitioned timetables (PartitionedAssetTimetable"


@pytest.mark.parametrize(("source", "says"), [
    ("import airflow.sdk.execution_time.context\n", STATE_STORES_REFUSED),
    ("from airflow.sdk.execution_time.context import NEVER_EXPIRE\n", "read inlet_events[asset][-1].extra"),
    ("import airflow.partition_mappers.base\n", PARTITIONS_REFUSED),
    ("from airflow.sdk import Asset, PartitionedAssetTimetable\n", "Dataset(uri, partitions=TimePartitions(...))"),
    ("from airflow.sdk import StartOfHourMapper\n", PARTITIONS_REFUSED),
])
def test_state_stores_and_partition_mappers_are_refused_by_design_in_one_line(tmp_path: Path, source: str,
                                                                              says: str) -> None:
    assert says in last_line(tmp_path, "store.py", source)


@pytest.mark.parametrize("parameter", ["task_state_store", "asset_state_store"])
def test_a_task_asking_for_a_state_store_is_refused_at_parse_time_not_given_none(tmp_path: Path,
                                                                                 parameter: str) -> None:
    source = f"""\
import pendulum
from airflow.sdk import DAG, task

with DAG("stores", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    @task
    def work({parameter}=None, ti=None):
        {parameter}.set("k", 1)

    work()
"""
    line = last_line(tmp_path, "stores.py", source)
    assert f"task 'work': the parameter {parameter}: ledger keeps no state beside its timeline" in line
    assert STATE_STORES_REFUSED in line and "a key made from ti.run_id, ti.task_id and ti.map_index" in line


ASYNC_AND_ENV = """\
import asyncio
import pendulum
from airflow.sdk import DAG, task
from airflow.providers.standard.operators.python import PythonOperator


async def later(n):
    await asyncio.sleep(0)
    return n * 2


with DAG("async_and_env", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    @task
    async def doubled(n):
        await asyncio.sleep(0)
        return n * 2

    @task(multiple_outputs=True)
    def stats():
        return {"folder": "/srv/dags", "count": "3"}

    found = stats()

    @task.bash(env={"FOLDER": found["folder"], "COUNT": found["count"], "DAY": "{{ ds }}"}, append_env=True)
    def show():
        return 'echo "$COUNT file(s) under $FOLDER on $DAY"'

    doubled(21) >> show()
    PythonOperator(task_id="classic", python_callable=later, op_args=[4])
"""


def test_an_async_task_function_is_awaited_and_a_bash_tasks_env_takes_other_tasks_values(tmp_path: Path) -> None:
    (tmp_path / "async_and_env.py").write_text(ASYNC_AND_ENV)
    found = load_file(str(tmp_path / "async_and_env.py"), str(tmp_path))
    assert found.error is None, found.error
    [dag] = found.dags
    run = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, tz="UTC"), None, tmp_path)  # type: ignore[arg-type]
    assert local_testing.test_dag(run, lambda _line: None) is RunState.SUCCESS
    assert run.xcom["doubled"]["return_value"] == 42 and run.xcom["classic"]["return_value"] == 8
    assert run.xcom["show"]["return_value"] == "3 file(s) under /srv/dags on 2024-03-05"


def test_a_params_values_display_keyed_by_numbers_and_none_makes_a_version(tmp_path: Path) -> None:
    (tmp_path / "labels.py").write_text("""\
import pendulum
from airflow.sdk import DAG, Param, task

with DAG("labels", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None, params={
        "pick": Param(3, type=["number", "null"], enum=[1, 2, 3, None],
                      values_display={1: "One", 2: "Two", 3: "Three", None: "None (clear selection)"})}):
    @task
    def show(params=None):
        return params["pick"]

    show()
""")
    found = load_file(str(tmp_path / "labels.py"), str(tmp_path))
    assert found.error is None, found.error
    [dag] = found.dags
    run = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, tz="UTC"), None, tmp_path)  # type: ignore[arg-type]
    assert local_testing.test_dag(run, lambda _line: None) is RunState.SUCCESS
    assert run.xcom["show"]["return_value"] == 3


def test_triggering_asset_events_are_read_by_the_asset_as_in_airflow_3_and_by_key_as_in_airflow_2() -> None:
    from types import SimpleNamespace

    from ledger.airflow_compat.assets import AirflowAsset
    from ledger.sdk.datasets import Dataset
    from ledger.sdk.templates import _dataset_names

    event = {"extra": {"watermark": "2024-03-05"}, "source_dag_id": "producer", "partition": None}
    ti = SimpleNamespace(triggering_dataset_events={"orders/daily": [event], "s3://lake/a": [event]})
    names = _dataset_names(SimpleNamespace(inlets=[], outlets=[]), ti)
    orders = AirflowAsset(name="orders/daily", uri="s3://warehouse/orders/daily")
    by_asset = names["triggering_asset_events"][orders]  # Airflow 3: keyed by the Asset
    assert by_asset[-1].extra == {"watermark": "2024-03-05"} and by_asset[-1]["source_dag_id"] == "producer"
    assert orders in names["triggering_asset_events"] and names["triggering_asset_events"].get(orders) == by_asset
    assert names["triggering_dataset_events"]["s3://lake/a"][0].extra == event["extra"]  # Airflow 2: the uri
    assert names["triggering_dataset_events"][Dataset("s3://lake/a")] == [event]
    assert names["triggering_asset_events"].get(Dataset("s3://lake/elsewhere")) is None
