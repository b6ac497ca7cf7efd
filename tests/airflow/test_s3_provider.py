"""Airflow's Amazon provider, its S3 basics, in ledger's namespace (ledger/airflow_compat/s3.py): S3Hook,
S3KeySensor, S3CreateObjectOperator and S3DeleteObjectsOperator against a real S3-compatible server on loopback
(moto's), with connections from ledger's (LEDGER_CONN_*), from an AIRFLOW_CONN_* variable, and from boto3's own
chain when `aws_default` is not defined. Run in process by `ledger dags test`'s loop, each try in a forked child
as under the scheduler."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import boto3
import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

DAG_FILE = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.providers.amazon.aws.hooks.s3 import S3Hook
from airflow.providers.amazon.aws.operators.s3 import S3CreateObjectOperator, S3DeleteObjectsOperator
from airflow.providers.amazon.aws.sensors.s3 import S3KeySensor

with DAG("s3_moves", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    create = S3CreateObjectOperator(task_id="create", s3_bucket="raw", s3_key="orders/{{ ds }}.csv",
                                    data="id,n\\n1,{{ params.n }}\\n", aws_conn_id="lake", params={"n": 5})
    wait = S3KeySensor(task_id="wait", bucket_name="raw", bucket_key="orders/*.csv", wildcard_match=True,
                       aws_conn_id="lake", poke_interval=0, timeout=60,
                       check_fn=lambda objects: all(o["Size"] > 0 for o in objects))
    missing = S3KeySensor(task_id="missing", bucket_key="s3://raw/nothing.csv", aws_conn_id="lake",
                          poke_interval=0, timeout=0, soft_fail=True)

    @task
    def copy():
        hook = S3Hook(aws_conn_id="ledger_lake")
        text = hook.read_key("orders/2024-03-05.csv", "raw")
        hook.load_string(text.upper(), "s3://clean/orders.csv", replace=True)
        try:
            hook.load_string("again", "s3://clean/orders.csv")
        except ValueError as exc:
            refused = str(exc)
        return [hook.list_keys("clean"), hook.check_for_key("s3://raw/orders/2024-03-05.csv"),
                hook.read_key("s3://clean/orders.csv"), refused]

    delete = S3DeleteObjectsOperator(task_id="delete", bucket="raw", prefix="orders/", aws_conn_id="lake")

    @task
    def left():
        return S3Hook().list_keys("raw")  # aws_default is not defined: boto3's chain (AWS_* variables)

    create >> [wait, missing]
    wait >> copy() >> delete >> left()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_s3_hook_key_sensor_and_object_operators_work_on_a_real_s3_server(
        s3_endpoint: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL", s3_endpoint)):
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    for bucket in ("raw", "clean"):
        client.create_bucket(Bucket=bucket)
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # the connections give it
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", f"aws://testing:testing@/?region_name=us-east-1&endpoint_url="
                                            f"{quote(s3_endpoint, safe='')}")
    monkeypatch.setenv("LEDGER_CONN_LEDGER_LAKE", f'aws://testing:testing@?__extra__={{"endpoint_url": '
                                                  f'"{s3_endpoint}"}}')
    (folder / "s3_moves.py").write_text(DAG_FILE)
    loaded = load_file(str(folder / "s3_moves.py"), str(folder))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    run = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)  # for `left`, whose aws_default is boto3's chain
    state = local_testing.test_dag(run, lines.append)
    log = "\n".join(lines)
    assert state is RunState.SUCCESS, log
    assert "--- missing try 1: skipped" in log
    assert run.xcom["copy"]["return_value"] == [["orders.csv"], True, "ID,N\n1,5\n",
                                                "The key orders.csv already exists."]
    assert run.xcom["left"]["return_value"] == []
    assert client.get_object(Bucket="clean", Key="orders.csv")["Body"].read() == b"ID,N\n1,5\n"
