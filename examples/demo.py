"""`make demo`: the example pipeline on a fresh LEDGER_HOME under the repository (.demo-home).

Runs the real `ledger` command step by step and shows each command before its output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HOME = Path(os.environ.get("LEDGER_DEMO_HOME", REPO / ".demo-home"))  # docs/generate_examples.py moves it
LEDGER = str(Path(sys.executable).with_name("ledger"))
ENV = {"COLUMNS": "150", **os.environ, "LEDGER_HOME": str(HOME)}
ENV.pop("LEDGER_DATABASE_URL", None)
ENV.pop("LEDGER_DAGS_FOLDER", None)


def ledger(*args: str) -> None:
    print(f"\n$ ledger {' '.join(args)}", flush=True)
    subprocess.run([LEDGER, *args], check=True, env=ENV)


def ledger_json(*args: str) -> Any:
    return json.loads(subprocess.run([LEDGER, *args, "--json"], check=True, env=ENV, capture_output=True).stdout)


def main() -> None:
    shutil.rmtree(HOME, ignore_errors=True)
    (HOME / "dags").mkdir(parents=True)
    dag_file = HOME / "dags" / "sales_pipeline.py"
    shutil.copy(REPO / "examples" / "dags" / "sales_pipeline.py", dag_file)
    print(f"LEDGER_HOME={HOME}  (raw, clean and aggregated data under {HOME / 'data'})")
    ledger("db", "upgrade")
    ledger("dags", "list")
    # catch-up: every run generates its day's raw events, cleans them with Spark, aggregates them
    ledger("scheduler", "--exit-when-idle", "--parallelism", "2")
    ledger("timeline", "sales_pipeline")
    # the pipeline changes: a new DAG version (bad rows are now kept with quantity 0)
    source = dag_file.read_text()
    dag_file.write_text(source.replace('.where(F.col("quantity").isNotNull())', ".fillna({'quantity': 0})"))
    ledger("dags", "versions", "sales_pipeline")
    first_version = ledger_json("dags", "versions", "sales_pipeline")[0]["version"][:8]
    ledger("dags", "diff", "sales_pipeline", first_version)  # the code that changed, and the structure
    # rewrite two dates with the new code: the old runs are kept, overridden
    ledger("backfill", "sales_pipeline", "--start", "2024-03-02", "--end", "2024-03-03",
           "--reprocess", "completed", "--yes", "--parallelism", "2")
    ledger("timeline", "sales_pipeline", "--all")
    ledger("lineage", "sales_clean")
    ledger("lineage", "daily_sales", "--partition", "2024-03-02")
    # the run that rewrote 2024-03-02: its tasks, tries and everything it wrote
    (partition,) = ledger_json("lineage", "daily_sales", "--partition", "2024-03-02")
    ledger("runs", "show", partition["current"]["run_id"])
    command = Path(LEDGER).relative_to(REPO) if Path(LEDGER).is_relative_to(REPO) else Path(LEDGER)
    print(f"\nTo look at this ledger in a browser: LEDGER_HOME={HOME} {command} webserver   "
          "(then open http://127.0.0.1:8793/)")


if __name__ == "__main__":
    main()
