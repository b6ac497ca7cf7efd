"""The example pipeline (examples/dags/sales_pipeline.py) through the real CLI: catch-up, a new version, a backfill."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, Cli
from tests.scheduler.test_scheduler_cli import schedule

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DATES = ["2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04", "2024-03-05"]


def partition_files(folder: Path) -> dict[str, dict[str, float]]:
    """For each date=... partition, its data files and their modification times."""
    return {p.name.removeprefix("date="): {f.name: f.stat().st_mtime for f in p.glob("*.parquet")}
            for p in folder.glob("date=*")}


def test_the_example_pipeline_catches_up_and_a_backfill_rewrites_exactly_its_dates(ready_cli: Cli) -> None:
    cli = ready_cli
    dag_file = cli.write_dag("sales_pipeline.py", (REPO / "examples" / "dags" / "sales_pipeline.py").read_text())
    data = cli.home / "data"

    schedule(cli, "--parallelism", "2", timeout=400)
    assert [(r["logical_date"][:10], r["state"]) for r in cli.json("timeline", "sales_pipeline")] == \
        [(d, "success") for d in DATES]
    clean = {p["partition"]: p["current"] for p in cli.json("lineage", "sales_clean")}
    assert sorted(clean) == DATES
    assert all(w["task_id"] == "clean" and w["rows"] > 300 for w in clean.values())
    before = partition_files(data / "clean" / "sales")
    assert sorted(before) == DATES
    raw_rows = {p["partition"]: p["current"]["rows"] for p in cli.json("lineage", "sales_raw")}

    # the new version keeps the malformed rows (quantity 0) instead of dropping them
    source = dag_file.read_text()
    assert '.where(F.col("quantity").isNotNull())' in source
    dag_file.write_text(source.replace('.where(F.col("quantity").isNotNull())', ".fillna({'quantity': 0})"))
    cli.ok("backfill", "sales_pipeline", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed",
           "--yes", "--parallelism", "2", timeout=400)

    after = partition_files(data / "clean" / "sales")
    assert {d: after[d] for d in DATES if d != "2024-03-02"} == {d: before[d] for d in DATES if d != "2024-03-02"}
    assert after["2024-03-02"] != before["2024-03-02"]
    rewritten = pq.read_table(data / "clean" / "sales" / "date=2024-03-02").to_pandas()
    assert len(rewritten) == raw_rows["2024-03-02"]  # every raw row kept now, none duplicated
    assert (rewritten["quantity"] == 0).any() and rewritten["quantity"].notna().all()

    (part,) = cli.json("lineage", "sales_clean", "--partition", "2024-03-02")
    old, new = part["history"]
    assert old["run_state"] == "overridden" and old["overridden_by"] == new["run_id"]
    assert new["run_type"] == "backfill" and new["rows"] == raw_rows["2024-03-02"] > old["rows"]
    assert new["dag_version"] != old["dag_version"]
    (daily,) = cli.json("lineage", "daily_sales", "--partition", "2024-03-02")
    assert daily["current"]["run_id"] == new["run_id"] and len(daily["history"]) == 2
