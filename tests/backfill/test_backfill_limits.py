"""A backfill's own max_active_runs holds whoever executes its runs: `ledger scheduler` as much as the backfill
command, whether it was given on the command line or through the API. Checked from the runs' recorded start and
end times, not by sampling while they run."""

from __future__ import annotations

import json
from datetime import datetime

from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.backfill.test_backfill_cli import dag_source, db, schedule, timeline
from tests.conftest import Cli


def most_at_once(cli: Cli, backfill_id: int) -> int:
    """The most runs of the backfill that were running at one time, by their recorded started_at and ended_at;
    asserts first that every run ran and succeeded."""
    with db(cli) as conn:
        rows = conn.execute("SELECT started_at, ended_at, state FROM dag_run WHERE backfill_id = ?",
                            (backfill_id,)).fetchall()
    assert rows and all(state == "success" and start and end for start, end, state in rows), rows
    spans = [(datetime.fromisoformat(start), datetime.fromisoformat(end)) for start, end, _s in rows]
    return max(sum(1 for start, end in spans if start <= at < end) for at, _end in spans)


def test_the_scheduler_runs_a_backfill_with_max_active_runs_1_one_run_at_a_time(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=5, command="sleep 0.2"))  # the DAG allows 16 runs at once
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-05", "--submit",
                            "--max-active-runs", "1", "--yes", "--json"))
    schedule(cli)
    assert most_at_once(cli, out["backfill_id"]) == 1
    assert len(timeline(cli)) == 5


def test_a_backfill_given_max_active_runs_2_through_the_api_never_runs_three_at_once(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=6, command="sleep 0.2"))
    cli.ok("dags", "list")  # parses the DAG file
    assert cli.run("users", "create", "op", "--role", "operator", input="correct horse battery\n").exit_code == 0
    token = cli.ok("users", "token", "op", "--name", "t").strip()
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(cli.home)})), base_url="http://localhost") as web:
        made = web.post("/api/v1/backfills", json={"dag_id": "d", "start": "2024-03-01", "end": "2024-03-06",
                                                   "max_active_runs": 2}, headers={"Authorization": f"Bearer {token}"})
    assert made.status_code == 201, made.text
    backfill_id = made.json()["backfill_id"]
    assert cli.json("backfill", "show", backfill_id)["max_active_runs"] == 2
    schedule(cli)
    assert most_at_once(cli, backfill_id) == 2  # two start together in the first loop, never a third
