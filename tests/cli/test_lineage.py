"""Lineage: which run, task, try and DAG version wrote each partition, overrides included."""

from __future__ import annotations

from tests.conftest import Cli
from tests.scheduler.test_scheduler_cli import schedule

WRITER = """
import pendulum
from ledger import DAG, BashTask, PythonTask

def write(context):
    context.record_write("sales_clean", context.logical_date.date().isoformat(), rows=10, path="/data/x")

with DAG("w", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 2, tz="UTC"), catchup=True):
    agg = BashTask("agg", 'echo "{\\\\"dataset\\\\": \\\\"agg\\\\", \\\\"partition\\\\": \\\\"$LEDGER_RUN_ID\\\\"}" '
                          '>> "$LEDGER_WRITES_PATH"')
    PythonTask("write", write) >> agg
"""


def test_lineage_names_the_run_that_wrote_each_partition_and_keeps_overridden_writes(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("w.py", WRITER)
    schedule(cli)
    first = {p["partition"]: p for p in cli.json("lineage", "sales_clean")}
    assert set(first) == {"2024-03-01", "2024-03-02"}
    old_run = first["2024-03-02"]["current"]["run_id"]
    cli.write_dag("w.py", WRITER.replace("rows=10", "rows=11"))  # new code, new version
    cli.ok("backfill", "w", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed", "--yes")
    (part,) = cli.json("lineage", "sales_clean", "--partition", "2024-03-02")
    old, new = part["history"]
    assert (old["run_id"], old["run_state"]) == (old_run, "overridden")
    assert old["overridden_by"] == new["run_id"] == part["current"]["run_id"]
    assert new["run_type"] == "backfill" and new["rows"] == 11
    assert new["dag_version"] != old["dag_version"]
    assert new["dag_version"] == cli.json("dags", "versions", "w")[-1]["version"]
    shown = cli.json("runs", "show", new["run_id"])
    assert {(w["dataset"], w["task_id"]) for w in shown["writes"]} == {("sales_clean", "write"), ("agg", "agg")}
    assert "overridden by" in cli.ok("lineage", "sales_clean")


def test_lineage_of_an_unknown_dataset_is_one_line_and_lists_known_ones(ready_cli: Cli) -> None:
    cli = ready_cli
    assert "no task has recorded" in cli.fails("lineage", "nope").stderr
    cli.write_dag("w.py", WRITER)
    schedule(cli)
    assert "known datasets: agg, sales_clean" in cli.fails("lineage", "nope").stderr
