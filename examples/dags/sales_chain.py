"""Data-aware scheduling (docs/datasets.md): three DAGs chained by two partitioned datasets.

ingest (daily) writes sales_raw; clean runs on each partition of sales_raw and writes sales_clean; report runs
on each partition of sales_clean. A rewrite of a partition upstream marks the runs that read it stale; a
`ledger backfill ingest ... --downstream` re-runs them.
"""

import pendulum

from ledger import DAG, BashTask, Dataset, PythonTask, TimePartitions

DAILY = TimePartitions("daily", timezone="UTC")
RAW = Dataset("sales_raw", partitions=DAILY)
CLEAN = Dataset("sales_clean", partitions=DAILY)


def load(context):
    # the partition of sales_raw this try wrote (lineage; without it, the run's data interval says which)
    context.record_write("sales_raw", context.logical_date.date().isoformat(), rows=120)


with DAG("ingest", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True, max_active_runs=1):
    PythonTask("load", load, outlets=[RAW])

with DAG("clean", schedule=[RAW]):
    BashTask("clean", "true", outlets=[CLEAN])

with DAG("report", schedule=[CLEAN]):
    BashTask("report", "true")
