"""`make demo` (examples/demo.py): the example pipeline (examples/dags/sales_pipeline.py) catches up five days
with Spark, its code changes, and a backfill rewrites two of them. One run checks both that docs/tutorial.md
shows what the demo prints today and that the data and the records it leaves are right."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import Cli, _clean_env
from tests.test_docs import _check

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DATES = ["2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04", "2024-03-05"]
REWRITTEN = ["2024-03-02", "2024-03-03"]  # the demo's backfill


def partition_files(folder: Path) -> dict[str, dict[str, float]]:
    """For each date=... partition, its data files and their modification times."""
    return {p.name.removeprefix("date="): {f.name: f.stat().st_mtime for f in p.glob("*.parquet")}
            for p in folder.glob("date=*")}


@pytest.mark.timeout(1800)
def test_make_demo_prints_what_the_tutorial_shows_and_its_backfill_rewrites_exactly_its_dates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "demo-home"
    monkeypatch.setenv("LEDGER_DOCS_KEEP_DEMO", str(home))
    _check("tutorial")
    cli = Cli(home=home, env=_clean_env(home))
    assert os.path.exists(home / "ledger.db")

    timeline = [(r["logical_date"][:10], r["run_type"], r["state"]) for r in cli.json("timeline", "sales_pipeline")]
    assert [(d, t) for d, t, state in timeline if state != "overridden"] == \
        [(d, "backfill" if d in REWRITTEN else "scheduled") for d in DATES]
    assert {state for _d, _t, state in timeline} == {"success", "overridden"}
    assert sorted(d for d, _t, state in timeline if state == "overridden") == REWRITTEN
    raw = {p["partition"]: p["current"]["rows"] for p in cli.json("lineage", "sales_raw")}
    clean = {p["partition"]: p for p in cli.json("lineage", "sales_clean")}
    assert sorted(clean) == DATES
    assert all(p["current"]["task_id"] == "clean" and p["current"]["rows"] > 300 for p in clean.values())

    files = partition_files(home / "data" / "clean" / "sales")
    assert sorted(files) == DATES and all(files.values())
    kept = [d for d in DATES if d not in REWRITTEN]
    for day in kept:  # written once, by the catch-up, before anything the backfill wrote
        (write,) = clean[day]["history"]
        assert write["run_type"] == "scheduled" and write["run_state"] == "success"
        assert max(files[day].values()) < min(min(files[d].values()) for d in REWRITTEN)
    for day in REWRITTEN:  # the new version keeps the malformed rows (quantity 0) instead of dropping them
        old, new = clean[day]["history"]
        assert old["run_state"] == "overridden" and old["overridden_by"] == new["run_id"]
        assert new["run_type"] == "backfill" and new["rows"] == raw[day] > old["rows"]
        assert new["dag_version"] != old["dag_version"]
        rewritten = pq.read_table(home / "data" / "clean" / "sales" / f"date={day}").to_pandas()
        assert len(rewritten) == raw[day]  # every raw row kept now, none duplicated
        assert (rewritten["quantity"] == 0).any() and rewritten["quantity"].notna().all()
    (daily,) = cli.json("lineage", "daily_sales", "--partition", "2024-03-02")
    assert daily["current"]["run_id"] == clean["2024-03-02"]["history"][1]["run_id"] and len(daily["history"]) == 2
