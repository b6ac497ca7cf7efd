"""A LocalExecutor worker that cannot start (its interpreter or imports fail), as `ledger scheduler` and `ledger
backfill` meet it: one line, exit status 1, no run created (decision 0361). The real `ledger` command; the workers
are made to exit as they start by a sitecustomize only they run."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.conftest import DAILY_DAG, REPO, Cli

REFUSED = "Error: a LocalExecutor worker exited with code 3 as it started: no try was run"


def failing_workers(tmp_path: Path) -> dict[str, str]:
    """The environment of a command whose LocalExecutor workers exit with status 3 as their interpreter starts."""
    hook = tmp_path / "worker_hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os\nif 'LEDGER_WORKER_SYS_PATH' in os.environ:\n    os._exit(3)\n")
    return {"PYTHONPATH": os.pathsep.join((str(hook), str(REPO)))}


def rows(cli: Cli, table: str) -> int:
    with sqlite3.connect(cli.home / "ledger.db") as db:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_a_scheduler_and_a_backfill_whose_worker_cannot_start_say_so_in_one_line_and_create_no_run(
        ready_cli: Cli, tmp_path: Path) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    env = failing_workers(tmp_path)
    for args in (("scheduler", "--exit-when-idle"),
                 ("backfill", "daily", "--start", "2024-03-01", "--end", "2024-03-03", "--yes")):
        result = cli.run(*args, **env)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and result.stderr.strip() == REFUSED, result.stderr
    assert rows(cli, "dag_run") == 0 and rows(cli, "backfill") == 0 and rows(cli, "task_try") == 0
    cli.ok("backfill", "daily", "--start", "2024-03-01", "--end", "2024-03-01", "--yes")  # with workers that start
    assert rows(cli, "dag_run") == 1
