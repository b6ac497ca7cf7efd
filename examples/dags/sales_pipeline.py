"""The example Spark pipeline: raw sales events per day -> cleaned, typed Parquet -> daily aggregates.

Data is generated locally (no downloads) under $LEDGER_DATA (default $LEDGER_HOME/data). Every
write overwrites exactly the partitions of the run's data interval (dynamic partition overwrite),
so re-running a date is idempotent and a backfill rewrites exactly its dates. Each task records
what it wrote, so `ledger lineage sales_clean` tells which run and DAG version produced each date.
"""

from __future__ import annotations

import csv
import os
import random
from pathlib import Path

import pendulum

from ledger import DAG, PythonTask, SparkTask

HOME = Path(os.environ.get("LEDGER_HOME", "~/.ledger")).expanduser()
DATA = Path(os.environ.get("LEDGER_DATA", HOME / "data"))
PRODUCTS = ["apples", "pears", "plums", "cherries", "figs"]
STORES = ["north", "south", "east", "west"]


def day_of(context) -> str:
    return context.logical_date.date().isoformat()


def generate_raw(context) -> None:
    """Raw events for the run's day: CSV with string fields, some malformed rows (as real feeds have).

    Spark 4 runs in ANSI mode, where a bad cast fails the query: clean uses try_cast to turn them into nulls."""
    day = day_of(context)
    rng = random.Random(day)  # the same day always gives the same raw data
    folder = DATA / "raw" / f"date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = 0
    with open(folder / "events.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["event_id", "ts", "store", "product", "quantity", "unit_price"])
        for i in range(rng.randint(400, 600)):
            quantity = str(rng.randint(1, 9)) if rng.random() > 0.02 else "n/a"  # ~2% bad rows
            out.writerow([f"{day}-{i}", f"{day}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
                          rng.choice(STORES), rng.choice(PRODUCTS), quantity, f"{rng.uniform(0.2, 3.0):.2f}"])
            rows += 1
    context.record_write("sales_raw", day, rows=rows, path=str(folder))


def clean(spark, context) -> None:
    """Typed, de-duplicated events as Parquet partitioned by date; bad rows dropped."""
    from pyspark.sql import functions as F

    day = day_of(context)
    raw = spark.read.option("header", True).csv(str(DATA / "raw" / f"date={day}"))
    typed = (raw.withColumn("quantity", F.col("quantity").try_cast("int"))
             .withColumn("unit_price", F.col("unit_price").try_cast("double"))
             .withColumn("ts", F.to_timestamp("ts"))
             .where(F.col("quantity").isNotNull())
             .dropDuplicates(["event_id"])
             .withColumn("date", F.lit(day)))
    target = DATA / "clean" / "sales"
    typed.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("date").parquet(str(target))
    context.record_write("sales_clean", day, rows=typed.count(), path=str(target / f"date={day}"))


def aggregate(spark, context) -> None:
    """Revenue and quantity per store and product for the day."""
    from pyspark.sql import functions as F

    day = day_of(context)
    events = spark.read.parquet(str(DATA / "clean" / "sales")).where(F.col("date") == day)
    daily = (events.groupBy("date", "store", "product")
             .agg(F.sum("quantity").alias("quantity"),
                  F.round(F.sum(F.col("quantity") * F.col("unit_price")), 2).alias("revenue")))
    target = DATA / "aggregates" / "daily_sales"
    daily.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("date").parquet(str(target))
    context.record_write("daily_sales", day, rows=daily.count(), path=str(target / f"date={day}"))


with DAG(
    "sales_pipeline",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    end_date=pendulum.datetime(2024, 3, 5, tz="UTC"),
    catchup=True,
    max_active_runs=1,
    default_args={"retries": 1},
):
    raw_task = PythonTask("generate_raw", generate_raw)
    clean_task = SparkTask("clean", clean)
    aggregate_task = SparkTask("aggregate", aggregate, depends_on_past=True)
    raw_task >> clean_task >> aggregate_task
