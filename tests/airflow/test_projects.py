"""Project-shaped Airflow DAG folders (tests/airflow_projects), each run as it is under the real scheduler
(`ledger scheduler --exit-when-idle` on a temporary LEDGER_HOME): DAG files sharing `include/` helpers, SQL and
script files beside them, Variables and Connections (ledger's and AIRFLOW_CONN_*), datasets between DAGs, and
provider operators against real services (SQLite, an S3-compatible server on loopback)."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

import boto3

from tests.conftest import Cli

PROJECTS = Path(__file__).resolve().parent.parent / "airflow_projects"
FAST = {"LEDGER_POLL_INTERVAL": "0.2"}


def load_project(cli: Cli, name: str) -> None:
    shutil.copytree(PROJECTS / name, cli.dags, dirs_exist_ok=True)
    assert cli.json("dags", "errors") == []


def xcom(cli: Cli, dag_id: str, run: dict[str, str], task_id: str) -> object:
    [row] = [r for r in cli.json("tasks", "xcom", dag_id, str(run["run_id"]), task_id) if r["key"] == "return_value"]
    return row["value"]


def test_the_retail_project_loads_sql_and_reports_on_its_dataset_under_the_scheduler(ready_cli: Cli,
                                                                                   tmp_path: Path) -> None:
    cli = ready_cli
    load_project(cli, "retail")
    warehouse = tmp_path / "warehouse.db"
    cli.ok("variables", "set", "region", "eu")
    cli.ok("connections", "add", "warehouse", "--uri", f"sqlite:///{warehouse}")
    cli.ok("scheduler", "--exit-when-idle", **FAST, AIRFLOW_CONN_WAREHOUSE_RO=f"sqlite:///{warehouse}")
    [load], [report] = cli.json("timeline", "load_orders"), cli.json("timeline", "report_orders")
    assert load["state"] == report["state"] == "success"
    assert report["run_type"] == "dataset_triggered"
    assert xcom(cli, "report_orders", report, "count") == [[2]]
    assert xcom(cli, "report_orders", report, "summarize") == {"rows": 2, "total": 42, "region": "eu",
                                                               "from": ["load_orders"]}


def test_the_marketing_project_exports_to_s3_and_scores_on_its_asset_under_the_scheduler(
        ready_cli: Cli, s3_endpoint: str) -> None:
    cli = ready_cli
    load_project(cli, "marketing")
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                 region_name="us-east-1").create_bucket(Bucket="lake")
    lake = f"aws://k:s@/?region_name=us-east-1&endpoint_url={quote(s3_endpoint, safe='')}"
    cli.ok("scheduler", "--exit-when-idle", **FAST, AIRFLOW_CONN_LAKE=lake)
    [export], [score] = cli.json("timeline", "export_campaigns"), cli.json("timeline", "score_campaigns")
    assert export["state"] == score["state"] == "success"
    assert score["run_type"] == "dataset_triggered"
    assert xcom(cli, "export_campaigns", export, "count") == "campaigns of 2024-03-01: 3"
    assert xcom(cli, "score_campaigns", score, "score") == {"2024-03-01.csv": "spring,3"}
