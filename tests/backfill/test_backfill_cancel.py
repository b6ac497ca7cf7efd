"""Cancelling a backfill gives a date back only what nothing new touched (decisions 0210, 0357): a date whose new run
the cancel stops before any of its tries started gets back the finished run the backfill had replaced there,
recorded as an event, the stopped run kept as history; a date where a try of the new run had started keeps the new
run, ending as its tasks did, so the timeline names the code that last ran there. One live run per date, nothing
deleted, the chain intact. The cancel says what becomes of each date before it acts."""

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
    task_states,
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


def in_flight_stays_the_rest_come_back(cli: Cli, backfill_id: int, before: dict[str, dict[str, Any]],
                                       said: str | None) -> None:
    """The backfill's first date (its run's task a ran through the cancel) keeps the backfill's run, failed (task b
    skipped); the two dates whose runs had not started get their green runs back."""
    runs = timeline(cli)
    live = live_by_date(runs)
    mine = [r for r in runs if r["backfill_id"] == str(backfill_id)]
    first = next(r for r in mine if r["logical_date"] == D(1))
    assert (live[D(1)]["run_id"], live[D(1)]["state"]) == (first["run_id"], "failed")
    assert task_states(cli, first["run_id"]) == {"a": ("success", 1), "b": ("skipped", 0)}
    assert {d: (r["run_id"], r["state"]) for d, r in live.items() if d != D(1)} == {
        d: (r["run_id"], "success") for d, r in before.items() if d != D(1)}
    assert len(runs) == 6 and [r["state"] for r in mine if r["logical_date"] != D(1)] == ["overridden"] * 2
    if said is not None:
        assert f"run {first['run_id']} stops and stays, ending as its tasks did: its tries ran" in said, said
        assert said.count("is live again") == 2, said


def test_a_scheduler_holding_the_backfill_gives_back_the_dates_whose_runs_had_not_started(
        ready_cli: Cli) -> None:
    """The run in flight when the cancel lands finishes its try, then its other task is skipped: it ran, so its date
    keeps it (failed); the other dates get their green runs back. The test holds task a of the new runs on a file
    it writes itself."""
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
        gate.write_text("go")

        def settled() -> bool:
            with db(cli) as conn:
                return bool(conn.execute("SELECT count(*) FROM dag_run WHERE state IN ('queued', 'running') "
                                         "OR lock_holder IS NOT NULL").fetchone()[0] == 0)

        wait_until(settled, what="every run of the backfill to end")
    finally:
        stop_scheduler(proc, cli)
    in_flight_stays_the_rest_come_back(cli, backfill_id, before, said)


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


def test_the_backfill_command_executing_it_gives_back_the_dates_whose_runs_had_not_started_when_cancelled(
        ready_cli: Cli) -> None:
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
    in_flight_stays_the_rest_come_back(cli, 1, before, None)
