"""Airflow's object storage and Airflow 3's assets in ledger's namespace: ObjectStoragePath over `file://` and
`s3://` (fsspec and s3fs, as Airflow; a real S3-compatible server on loopback), passed between tasks; `@asset`
functions as DAGs whose outlet is the asset, scheduled on one another, run by the real scheduler."""

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
from tests.backfill.test_backfill_cli import schedule
from tests.conftest import Cli

STORAGE = """\
import pendulum
from airflow.decorators import dag, task
from airflow.io.path import ObjectStoragePath
from airflow.sdk import ObjectStoragePath as SdkPath

BASE = ObjectStoragePath("s3://lake@raw/orders/")
LOCAL = SdkPath("file://@LOCAL@")

@dag(start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None)
def storage():
    @task
    def write(ds=None) -> ObjectStoragePath:
        path = BASE / f"orders_{ds}.csv"
        with path.open("w") as f:
            f.write("id,n\\n1,5\\n")
        return path

    @task
    def read(path: ObjectStoragePath):
        local = LOCAL / "copy.csv"
        path.copy(local)
        (LOCAL / "note.txt").write_text("seen " + path.name)
        return [path.bucket, path.key, path.exists(), path.read_text(), local.read_text(),
                sorted(p.name for p in LOCAL.iterdir()), path.stat()["size"], str(path.parent)]

    read(write())

storage()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_object_storage_paths_read_and_write_s3_and_files_and_pass_between_tasks(
        s3_endpoint: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                 region_name="us-east-1").create_bucket(Bucket="raw")
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", f"aws://k:s@/?region_name=us-east-1&endpoint_url="
                                            f"{quote(s3_endpoint, safe='')}")
    local = folder / "local"
    local.mkdir()
    (folder / "storage.py").write_text(STORAGE.replace("@LOCAL@", str(local)))
    loaded = load_file(str(folder / "storage.py"), str(folder))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    run = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(run, lines.append)
    assert state is RunState.SUCCESS, "\n".join(lines)
    assert run.xcom["write"]["return_value"] == {"__ledger_xcom_type__": "object_storage_path",
                                                 "value": "s3://lake@raw/orders/orders_2024-03-05.csv"}
    assert run.xcom["read"]["return_value"] == [
        "raw", "orders/orders_2024-03-05.csv", True, "id,n\n1,5\n", "id,n\n1,5\n", ["copy.csv", "note.txt"], 9,
        "s3://raw/orders"]


ASSETS = """\
from airflow.sdk import Metadata, asset

@asset(schedule="@once", uri="file:///tmp/raw_orders")
def raw_orders(self):
    yield Metadata(self, {"rows": 3})
    return "raw"

@asset(schedule=raw_orders)
def clean_orders(self, context, raw_orders):
    events = context["inlet_events"][raw_orders]
    return [self.name, raw_orders.name, [e.extra for e in events]]
"""


def test_asset_functions_are_dags_whose_outlet_is_the_asset_and_the_scheduler_chains_them(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("assets.py", ASSETS)
    assert {d["dag_id"] for d in cli.json("dags", "list")} == {"raw_orders", "clean_orders"}
    schedule(cli)
    [raw], [clean] = cli.json("timeline", "raw_orders"), cli.json("timeline", "clean_orders")
    assert raw["state"] == clean["state"] == "success"
    assert clean["run_type"] == "dataset_triggered"
    [value] = cli.json("tasks", "xcom", "clean_orders", str(clean["run_id"]), "clean_orders")
    assert value["value"] == ["clean_orders", "raw_orders", [{"rows": 3}]]
    [event] = cli.json("datasets", "show", "raw_orders")["events"]
    assert event["extra"] == {"rows": 3} and event["written_by"]["dag_id"] == "raw_orders"
