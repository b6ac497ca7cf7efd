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
    shutil.copy(REPO / "examples" / "dags" / "daily_sales.py", HOME / "dags" / "daily_sales.py")
    print(f"LEDGER_HOME={HOME}")
    ledger("db", "upgrade")
    ledger("dags", "list")
    for day in ("2024-03-01", "2024-03-02", "2024-03-04"):
        ledger("trigger", "daily_sales", "--logical-date", day)
    ledger("trigger", "daily_sales", "--logical-date", "2024-03-03")  # spliced into the gap
    dag_file = HOME / "dags" / "daily_sales.py"
    dag_file.write_text(dag_file.read_text().replace("loading", "loading (v2)"))  # a new DAG version
    ledger("trigger", "daily_sales", "--logical-date", "2024-03-02", "--replace")  # overrides the old run
    ledger("dags", "versions", "daily_sales")
    ledger("timeline", "daily_sales", "--all")


if __name__ == "__main__":
    main()
