"""Cancelling a backfill never turns good history red (decision 0210): a date whose new run the cancel stops gets
back the finished run the backfill had replaced there, recorded as an event, the stopped run kept as history; one
live run per date, nothing deleted, the chain intact. The cancel says what becomes of each date before it acts."""

from __future__ import annotations

import json
from typing import Any

from tests import launcher
from tests.backfill.test_backfill_cli import (
    D,
    dag_source,
    db,
    live_by_date,
    schedule,
    start_scheduler,
    stop_scheduler,
    timeline,
    wait_until,
)
from tests.conftest import Cli


def green_history(cli: Cli, command: str = "true") -> dict[str, dict[str, Any]]:
    """Three scheduled runs of DAG d (2024-03-01 to 03), all success; returns them by date."""
    cli.write_dag("d.py", dag_source(end=3, command=command))
    schedule(cli)
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2, 3)] == ["success"] * 3
    return live


def rerun_completed(cli: Cli, *extra: str) -> int:
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--reprocess",
                            "completed", "--submit", "--yes", "--json", *extra))
    return int(out["backfill_id"])


def test_cancelling_a_reprocess_completed_backfill_before_it_ran_gives_each_date_its_green_run_back(
        ready_cli: Cli) -> None:
    cli = ready_cli
    before = green_history(cli)
    backfill_id = rerun_completed(cli)
    replaced = live_by_date(timeline(cli))
    assert {replaced[D(i)]["state"] for i in (1, 2, 3)} == {"queued"}
    said = cli.ok("backfill", "cancel", str(backfill_id), "--dry-run")
    for i in (1, 2, 3):
        assert (f"2024-03-0{i}T00:00:00+00:00: run {replaced[D(i)]['run_id']} stops; run {before[D(i)]['run_id']} "
                "(success), which it replaced, is live again") in said, said
    assert cli.json("backfill", "show", str(backfill_id))["state"] == "running"  # a dry run changes nothing
    out = cli.ok("backfill", "cancel", str(backfill_id))
    assert out.startswith(said) and f"backfill {backfill_id} cancelled" in out
    runs = timeline(cli)  # (asserts the chain invariant)
    live = live_by_date(runs)
    assert {d: (r["run_id"], r["state"]) for d, r in live.items()} == {
        d: (r["run_id"], "success") for d, r in before.items()}
    assert len(runs) == 6  # nothing deleted: the stopped runs are history, overridden by the runs restored
    for i in (1, 2, 3):
        stopped = next(r for r in runs if r["run_id"] == replaced[D(i)]["run_id"])
        assert (stopped["state"], stopped["overridden_by"]) == ("overridden", before[D(i)]["run_id"])
    restored = cli.json("events", "--kind", "run_restored")
    assert sorted(e["run_id"] for e in restored) == sorted(r["run_id"] for r in before.values())
    assert all(e["details"]["reason"].startswith(f"backfill {backfill_id} cancelled") for e in restored)
    schedule(cli)  # nothing is left to run, nothing changes
    assert live_by_date(timeline(cli)) == live


def test_a_scheduler_holding_the_backfill_gives_the_dates_back_once_it_has_stopped_their_runs(
        ready_cli: Cli) -> None:
    """The run in flight when the cancel lands finishes its try, then its other task is skipped: it failed, so its
    date too gets the green run back. The test holds task a of the new runs on a file it writes itself."""
    cli = ready_cli
    gate = cli.home / "go"
    before = green_history(cli, command=f'[ "$LEDGER_RUN_TYPE" != backfill ] || until [ -f {gate} ]; do sleep 0.05; '
                                         'done')
    backfill_id = rerun_completed(cli, "--max-active-runs", "1")
    proc = start_scheduler(cli)
    try:
        def task_running() -> bool:
            with db(cli) as conn:
                sql = "SELECT count(*) FROM task_instance WHERE state = 'running'"
                return bool(conn.execute(sql).fetchone()[0] > 0)

        wait_until(task_running, what="the scheduler to run task a of the backfill's first run")
        said = cli.ok("backfill", "cancel", str(backfill_id))
        assert "is live again" in said
        gate.write_text("go")

        def settled() -> bool:
            with db(cli) as conn:
                return bool(conn.execute("SELECT count(*) FROM dag_run WHERE state IN ('queued', 'running') "
                                         "OR lock_holder IS NOT NULL").fetchone()[0] == 0)

        wait_until(settled, what="every run of the backfill to end")
    finally:
        stop_scheduler(proc, cli)
    runs = timeline(cli)
    assert {d: (r["run_id"], r["state"]) for d, r in live_by_date(runs).items()} == {
        d: (r["run_id"], "success") for d, r in before.items()}
    assert len(runs) == 6
    assert {r["state"] for r in runs if r["backfill_id"] == str(backfill_id)} == {"overridden"}


def test_the_web_confirmation_shows_what_becomes_of_each_date_before_the_cancel(ready_cli: Cli) -> None:
    from fastapi.testclient import TestClient

    from ledger.infra.config import load_settings
    from ledger.web.app import create_app

    cli = ready_cli
    before = green_history(cli)
    backfill_id = rerun_completed(cli)
    password = "correct horse battery"
    assert cli.run("users", "create", "op", "--role", "operator", input=password + "\n").exit_code == 0
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(cli.home)})), base_url="http://localhost") as web:
        web.get("/login")
        web.post("/login", data={"username": "op", "password": password, "next": "/",
                                 "csrf": web.cookies["ledger_csrf"]})
        page = web.get(f"/backfills/{backfill_id}/actions")
    assert page.status_code == 200, page.text
    for r in before.values():
        assert f"run {r['run_id']} (success), which it replaced, is live again" in page.text
    assert cli.json("backfill", "show", str(backfill_id))["state"] == "running"


def test_the_backfill_command_executing_it_gives_the_dates_back_when_it_is_cancelled(ready_cli: Cli) -> None:
    """The same when the backfill command itself runs the runs (its job ends them as it stops)."""
    import subprocess

    from tests.conftest import LEDGER

    cli = ready_cli
    gate = cli.home / "go"
    before = green_history(cli, command=f'[ "$LEDGER_RUN_TYPE" != backfill ] || until [ -f {gate} ]; do sleep 0.05; '
                                         'done')
    proc = launcher.popen([LEDGER, "backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--reprocess",
                           "completed", "--max-active-runs", "1", "--yes"], env={**cli.env, "LEDGER_POLL_INTERVAL":
                                                                                   "0.2"},
                          cwd=cli.home, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def task_running() -> bool:
            with db(cli) as conn:
                return bool(conn.execute("SELECT count(*) FROM task_instance WHERE state = 'running'").fetchone()[0])

        wait_until(task_running, what="the backfill to run task a of its first run")
        cli.ok("backfill", "cancel", "1")
        gate.write_text("go")
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in out, out
    runs = timeline(cli)
    assert {d: (r["run_id"], r["state"]) for d, r in live_by_date(runs).items()} == {
        d: (r["run_id"], "success") for d, r in before.items()}
    assert {r["state"] for r in runs if r["backfill_id"] == "1"} == {"overridden"} and len(runs) == 6
