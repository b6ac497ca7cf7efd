"""Airflow's Spark provider in ledger's namespace (ledger/airflow_compat/spark.py): `@task.pyspark` and
SparkSqlOperator run in ledger's SparkSession (local Spark, from LEDGER_SPARK_MASTER), SparkSubmitOperator runs the
real `spark-submit`. Run in process by `ledger dags test`'s loop, which runs Spark tries in its own process, as a
worker does: one SparkSession for the module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing, spark_session
from ledger.scheduler.runtime.dagbag import load_file

DAG_FILE = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

with DAG("spark_jobs", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    @task
    def rows():
        return 4

    @task.pyspark(config_kwargs={"spark.sql.shuffle.partitions": "3"})
    def count(n, spark=None, sc=None, ds=None, ti=None):  # context values by name, as Airflow's @task.pyspark
        return [spark.range(n).count(), sc.defaultParallelism > 0, spark.conf.get("spark.sql.shuffle.partitions"),
                ds, ti.task_id]

    sql = SparkSqlOperator(task_id="sql", sql="days.sql", conf="spark.sql.shuffle.partitions=2")
    submit = SparkSubmitOperator(task_id="submit", application="@FOLDER@/job.py", name="job",
                                 application_args=["@FOLDER@/out.txt", "{{ ds }}"], env_vars={"GREETING": "hi"},
                                 conf={"spark.ui.enabled": "false"})

    count(rows()) >> sql >> submit
"""

JOB = """\
import os
import sys

with open(sys.argv[1], "w") as f:
    f.write(os.environ["GREETING"] + " " + sys.argv[2])
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("spark_dags")
    spark_session.stop_session()
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


@pytest.mark.spark
def test_pyspark_task_spark_sql_and_spark_submit_run_on_local_spark(folder: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_SPARK_MASTER", "local[1]")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    (folder / "spark_jobs.py").write_text(DAG_FILE.replace("@FOLDER@", str(folder)))
    (folder / "days.sql").write_text("CREATE OR REPLACE TEMPORARY VIEW days AS SELECT '{{ ds }}' AS day;\n"
                                     "SELECT day, count(*) AS n FROM days GROUP BY day")
    (folder / "job.py").write_text(JOB)
    loaded = load_file(str(folder / "spark_jobs.py"), str(folder))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    run = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(run, lines.append)
    log = "\n".join(lines)
    assert state is RunState.SUCCESS, log
    assert run.xcom["count"]["return_value"] == [4, True, "3", "2024-03-05", "count"]
    assert "spark.sql: SELECT day, count(*) AS n FROM days GROUP BY day" in log
    assert "|2024-03-05|1  |" in log  # the rendered query's result, shown in the try's log
    assert "--master local[1]" in log and "--name job" in log
    assert (folder / "out.txt").read_text() == "hi 2024-03-05"


def test_spark_submit_takes_its_master_from_the_spark_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.airflow_compat import install

    install()
    from airflow import DAG
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", "spark://spark-master:7077?deploy-mode=client&queue=etl")
    with DAG("submits", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
        op = SparkSubmitOperator(task_id="s", application="app.py", conn_id="spark_cluster", executor_memory="2g",
                                 application_args=["a"])
    cmd = op.command()
    assert cmd[1:] == ["--master", "spark://spark-master:7077", "--executor-memory", "2g", "--name", "arrow-spark",
                       "--deploy-mode", "client", "--queue", "etl", "app.py", "a"]
