"""Spark tries through real worker processes: a DAG file of SparkTasks, work items for it, executors."""

from __future__ import annotations

import multiprocessing.connection
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem
from ledger.scheduler.executors.local import LocalExecutor

DAY = pendulum.datetime(2024, 3, 10, tz="UTC")

SPARK_DAG = '''
import json
import os
import time
from datetime import timedelta

import pendulum

from ledger import DAG
from ledger.sdk.spark import SparkTask, spark_task

OUT = @OUT@
EVENTS = os.path.join(OUT, "events")


def write_events(spark, context, *, path):
    """Rows for the run's day, written over exactly that day's partition."""
    from pyspark.sql import functions as F

    day = context.data_interval_start.date().isoformat()
    rows = int(context.conf.get("rows", 3))
    frame = (spark.range(rows)
             .withColumn("value", F.col("id") * 10)
             .withColumn("run_id", F.lit(context.run_id))
             .withColumn("date", F.lit(day).cast("date")))
    frame.write.mode("overwrite").partitionBy("date").parquet(path)
    print("wrote", rows, "rows for", day, "try", context.try_number, "pid", os.getpid())


def count_events(spark, context, *, path):
    counts = {str(row["date"]): row["count"] for row in spark.read.parquet(path).groupBy("date").count().collect()}
    print("COUNTS " + json.dumps(counts, sort_keys=True))


def identity(spark, context):
    jvm = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName()
    print("IDENTITY", spark.sparkContext.applicationId, jvm, "pid", os.getpid())
    print("PARTITIONS", spark.conf.get("spark.sql.shuffle.partitions"))
    return spark.sparkContext.applicationId


def slow_job(spark, context):
    spark.range(0, 10**13, numPartitions=2).selectExpr("sum(id % 7)").collect()  # hours, unless cancelled


def warm_job(spark, context):
    print("WARM", spark.range(0, 1000, numPartitions=2).selectExpr("sum(id % 7)").collect()[0][0])


def executor_memory(spark, context):
    print("EXECUTOR_MEMORY", spark.sparkContext.getConf().get("spark.executor.memory", "unset"))


def stopper(spark, context):
    spark.stop()


def python_loop(spark, context):
    time.sleep(3600)  # no Spark job to cancel: only ending the worker stops this


@spark_task(spark_conf={"spark.sql.shuffle.partitions": 7})
def decorated(spark, context, *, label):
    print("DECORATED", label, spark.conf.get("spark.sql.shuffle.partitions"))


with DAG("sparky", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    SparkTask("write", write_events, op_kwargs={"path": EVENTS})
    SparkTask("count", count_events, op_kwargs={"path": EVENTS})
    SparkTask("identity", identity)
    SparkTask("slow", slow_job, execution_timeout=timedelta(seconds=3))
    SparkTask("warm", warm_job)
    SparkTask("stuck", python_loop, execution_timeout=timedelta(seconds=2))
    SparkTask("stopper", stopper)
    SparkTask("static_conf", executor_memory, spark_conf={"spark.executor.memory": "600m"})
    decorated(label="hi")
'''


def write_spark_dag(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spark_dag.py"
    path.write_text(SPARK_DAG.replace("@OUT@", repr(str(folder / "out"))))
    return path


def spark_item(dag_file: Path, task_id: str, *, ti_id: int = 1, try_number: int = 1,
               day: datetime = DAY, timeout: float | None = None, conf: dict[str, Any] | None = None) -> WorkItem:
    logs = dag_file.parent / "logs"
    run_id = 100 + (day - DAY).days
    return WorkItem(
        ti_id=ti_id, run_id=run_id, dag_id="sparky", task_id=task_id, try_number=try_number,
        fileloc=str(dag_file), logical_date=day, data_interval_start=day,
        data_interval_end=day + timedelta(days=1), dag_version="v-spark", run_type="scheduled",
        log_path=str(logs / "sparky" / str(run_id) / task_id / f"ti{ti_id}_try_{try_number}.log"),
        execution_timeout=timeout, conf=dict(conf or {}),
    )


def run_one(executor: Executor, item: WorkItem, within: float = 180.0) -> tuple[TaskEvent, TaskEvent]:
    """Submit one item and wait for its started and finished events."""
    executor.submit(item)
    events: list[TaskEvent] = []
    deadline = time.monotonic() + within
    while not any(e.kind == "finished" for e in events):
        assert time.monotonic() < deadline, f"{item.task_id} did not finish within {within} s: {events}"
        drained = [e for e in executor.drain() if e.ti_id == item.ti_id]
        if not drained and executor.wait_handles():
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.5)
        events.extend(drained)
    started = next(e for e in events if e.kind == "started")
    finished = next(e for e in events if e.kind == "finished")
    return started, finished


def log_of(item: WorkItem) -> str:
    return Path(item.log_path).read_text()


@pytest.fixture(scope="module")
def spark_dag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_spark_dag(tmp_path_factory.mktemp("spark"))


@pytest.fixture(scope="session")
def _spark_workers() -> Iterator[list[LocalExecutor]]:
    made: list[LocalExecutor] = []
    yield made
    for executor in made:
        executor.end(0)


@pytest.fixture
def spark_worker(_spark_workers: list[LocalExecutor]) -> LocalExecutor:
    """One LocalExecutor worker for the session (per xdist worker): its SparkSession is built once, by the first
    try, and not again when the xdist worker runs tests of other modules in between (a module-scoped one was
    torn down and its JVM started again each time). A test that ends it
    (test_ending_the_executor_stops_the_workers_session_and_its_jvm) leaves the next test a new one, whatever
    order the tests run in."""
    if not _spark_workers or not _spark_workers[-1]._started:
        executor = LocalExecutor(1)
        executor.start()
        _spark_workers.append(executor)
    return _spark_workers[-1]
