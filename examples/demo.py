"""`make demo`: the example pipeline on a fresh LEDGER_HOME under the repository (.demo-home).

Runs the real `ledger` command step by step and shows each command before its output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOME = REPO / ".demo-home"
LEDGER = str(Path(sys.executable).with_name("ledger"))


def ledger(*args: str) -> None:
    print(f"\n$ ledger {' '.join(args)}", flush=True)
    env = {"COLUMNS": "150", **os.environ, "LEDGER_HOME": str(HOME)}
    subprocess.run([LEDGER, *args], check=True, env=env)


def main() -> None:
    shutil.rmtree(HOME, ignore_errors=True)
    (HOME / "dags").mkdir(parents=True)
    dag_file = HOME / "dags" / "daily_sales.py"
    shutil.copy(REPO / "examples" / "dags" / "daily_sales.py", dag_file)
    print(f"LEDGER_HOME={HOME}")
    ledger("db", "upgrade")
    ledger("dags", "list")
    ledger("scheduler", "--exit-when-idle")  # catches up 2024-03-01 .. 2024-03-07
    dag_file.write_text(dag_file.read_text().replace("loading", "loading (v2)"))  # a new DAG version
    ledger("dags", "versions", "daily_sales")
    ledger("backfill", "daily_sales", "--start", "2024-03-03", "--end", "2024-03-04",
           "--reprocess", "completed", "--yes")
    ledger("timeline", "daily_sales", "--all")
    ledger("events", "--dag", "daily_sales", "--kind", "run_overridden", "--kind", "version_registered")


if __name__ == "__main__":
    main()
