"""A Spark task runs the code of its run's version, helpers included, through the real CLI."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.cli.test_versioned_execution import assert_tries_ran_their_versions
from tests.conftest import Cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_PIN_DAG = '''
import pendulum
from ledger import DAG
from ledger.sdk.spark import SparkTask
from transforms.factors import FACTOR

OUT = @OUT@


def write(spark, context):
    from transforms.factors import label  # imported when the try runs
    day = context.data_interval_start.date().isoformat()
    frame = spark.createDataFrame([(day, FACTOR, label())], "date string, factor int, label string")
    frame.write.mode("overwrite").parquet(OUT + "/date=" + day)
    context.record_write("factors", day, rows=1)


with DAG("spark_pin", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    SparkTask("write", write)
'''


def test_a_spark_try_runs_its_versions_code_after_the_dag_and_its_helpers_changed(ready_cli: Cli) -> None:
    cli = ready_cli
    out = cli.home / "out"
    (cli.dags / "transforms").mkdir(parents=True)
    (cli.dags / "transforms" / "__init__.py").write_text("")
    (cli.dags / "transforms" / "factors.py").write_text("FACTOR = 2\n\ndef label():\n    return 'v1'\n")
    cli.write_dag("spark_pin.py", SPARK_PIN_DAG.replace("@OUT@", repr(str(out))))
    cli.ok("trigger", "spark_pin", "--logical-date", "2024-03-01")
    version = cli.json("runs", "show", "1")["dag_version"]
    (cli.dags / "transforms" / "factors.py").write_text("FACTOR = 3\n\ndef label():\n    return 'v2'\n")
    cli.ok("scheduler", "--exit-when-idle", "--parallelism", "1", timeout=400)
    assert cli.json("runs", "show", "1")["state"] == "success"
    rows = pq.read_table(out / "date=2024-03-01").to_pylist()
    assert rows == [{"date": "2024-03-01", "factor": 2, "label": "v1"}]
    (written,) = cli.json("lineage", "factors")
    assert written["current"]["dag_version"] == version
    assert len(cli.json("dags", "versions", "spark_pin")) == 2
    assert_tries_ran_their_versions(cli)
