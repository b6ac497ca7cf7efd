"""Two real `ledger scheduler` processes on one PostgreSQL database while an operator marks, cancels and clears
runs from the CLI: every run ends, no try runs twice, every refusal changes nothing, and each task instance ends
as the last operator event about it says (or as its tries made it)."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Any

import pytest

from tests import launcher
from tests.conftest import LEDGER, Cli

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DAG_FILE = """
import pendulum
from ledger import DAG, BashTask

with DAG("race", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 8, tz="UTC"), catchup=True, max_active_runs=8) as dag:
    BashTask("a", "sleep 0.5") >> BashTask("b", "sleep 0.5") >> BashTask("c", "sleep 0.5")
"""
FAST = {"LEDGER_POLL_INTERVAL": "0.2", "LEDGER_PARALLELISM": "2"}


def rows(cli: Cli, sql: str) -> list[Any]:
    import psycopg

    url = cli.env["LEDGER_DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


def test_two_schedulers_and_an_operator_racing_on_postgresql_leave_a_true_record(cli: Cli,
                                                                                migrated_postgres_url: str) -> None:
    cli.env["LEDGER_DATABASE_URL"] = migrated_postgres_url
    cli.write_dag("race.py", DAG_FILE)
    cli.ok("dags", "list")
    schedulers = [launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST}, cwd=cli.home, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
                  for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while len(rows(cli, "SELECT id FROM dag_run")) < 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        runs = [r[0] for r in rows(cli, "SELECT id FROM dag_run ORDER BY logical_date")]
        assert len(runs) == 8, runs
        acted = []
        for i, run in enumerate(runs):  # whatever each run is doing at that moment
            args = (["tasks", "mark", "race", str(run), "c", "--state", "skipped"] if i % 3 == 0
                    else ["runs", "cancel", str(run)] if i % 3 == 1
                    else ["tasks", "clear", "race", str(run)])
            before = rows(cli, f"SELECT state FROM dag_run WHERE id = {run}")
            result = cli.run(*args)
            assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output
            if result.exit_code == 1:  # refused: one line saying why
                assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1
            acted.append((args[:2], run, result.exit_code, before))
            time.sleep(0.3)
        deadline = time.monotonic() + 180
        while rows(cli, "SELECT id FROM dag_run WHERE state IN ('queued', 'running')") \
                and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        for proc in schedulers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=60)[0] for proc in schedulers]
    assert all(proc.returncode == 0 for proc in schedulers), outputs
    assert all("Traceback" not in out for out in outputs), outputs
    assert rows(cli, "SELECT id, state FROM dag_run WHERE state IN ('queued', 'running')") == [], acted
    tries = rows(cli, "SELECT task_instance_id, try_number, state FROM task_try")
    assert len({(t[0], t[1]) for t in tries}) == len(tries)  # no try ran twice
    assert not [t for t in tries if t[2] in ("queued", "running")], tries
    # the last operator event about each task instance decides its state when it was a mark or a cancel's skip
    last: dict[tuple[int, str], str | None] = {}
    for kind, run_id, details in rows(cli, "SELECT kind, run_id, details FROM event WHERE kind IN "
                                           "('tasks_marked', 'tasks_cleared', 'run_cancelled') ORDER BY id"):
        if kind == "tasks_marked":
            last.update({(run_id, t): details["state"] for t in details["tasks"]})
        elif kind == "tasks_cleared":
            last.update({(run_id, t): None for t in details["tasks"]})
        else:
            last.update({(run_id, t): "skipped" for t in details["skipped"]})
    for run_id, task_id, state in rows(cli, "SELECT run_id, task_id, state FROM task_instance"):
        decided = last.get((run_id, task_id))
        if decided is not None:
            assert state == decided, (run_id, task_id, state, decided)
        else:
            assert state in ("success", "skipped", "upstream_failed", "stopped"), (run_id, task_id, state)
    # and the schedulers released every lock they took
    assert rows(cli, "SELECT count(*) FROM dag_run WHERE lock_holder IS NOT NULL") == [(0,)]
