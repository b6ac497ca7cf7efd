"""Data-aware scheduling (docs/datasets.md): three DAGs chained by two partitioned datasets.

ingest (daily) writes sales_raw; clean runs on each partition of sales_raw and writes sales_clean; report runs
on each partition of sales_clean, and reads it as an inlet (Airflow's `inlet_events`). A rewrite of a partition
upstream marks the runs that read it stale; a `ledger backfill ingest ... --downstream` re-runs them.
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

def report(inlet_events):
    # the newest event of each partition of sales_clean in this run's data interval: here, its one partition
    for event in inlet_events[CLEAN]:
        print(f"reading sales_clean {event.partition} (event {event.event_id} of {event.source_dag_id} "
              f"run {event.source_run_id})")


with DAG("report", schedule=[CLEAN]):
    PythonTask("report", report, inlets=[CLEAN])
