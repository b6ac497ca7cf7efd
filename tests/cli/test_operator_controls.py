"""Operator controls through the real CLI: cancel a run, mark a run or task instances by hand. Each is an
event naming who did it; refusals are one line and change nothing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time

from tests.cli.test_truthful_cli import dump
from tests.conftest import LEDGER, Cli

DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("ops", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    a = BashTask("a", "{command}")
    b = BashTask("b", "true")
    a >> b
"""
FAST = {"LEDGER_POLL_INTERVAL": "0.2"}


def states(cli: Cli, run: str = "1") -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in cli.json("runs", "show", run)["task_instances"]}


def test_a_failed_run_is_marked_success_by_hand_and_the_event_names_who(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", DAG.format(command="exit 1"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle", **FAST)
    assert cli.json("runs", "show", "1")["state"] == "failed"
    assert states(cli) == {"a": "failed", "b": "upstream_failed"}
    out = cli.ok("tasks", "mark", "ops", "1", "a", "--state", "success", "--downstream",
                 "--reason", "loaded by hand, ticket OPS-12")
    assert "run failed → success; reason: loaded by hand, ticket OPS-12" in out, out
    assert states(cli) == {"a": "success", "b": "success"}
    (event,) = cli.json("events", "--dag", "ops", "--kind", "tasks_marked")
    assert event["actor"].startswith("cli:") and event["details"]["tasks"] == ["a", "b"]
    assert event["details"]["reason"] == "loaded by hand, ticket OPS-12"
    assert "run 1 of ops marked failed: success → failed" in cli.ok("runs", "mark-failed", "1")
    assert cli.json("runs", "show", "1")["state"] == "failed"
    marked = cli.json("events", "--dag", "ops", "--kind", "run_marked")
    assert [(e["details"]["to"], e["details"]["reason"]) for e in marked] == [("failed", None)]


def test_a_cancelled_run_ends_failed_with_who_cancelled_it_and_why(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", DAG.format(command="true"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    before = dump(cli)
    empty = cli.run("runs", "cancel", "1", "--reason", " ")
    assert empty.exit_code == 2 and "--reason must not be empty" in empty.stderr and dump(cli) == before
    out = cli.ok("runs", "cancel", "1", "--reason", "upstream data\nnot delivered")
    assert out.strip() == ("run 1 of ops cancelled: queued → failed; tasks set: a, b; "
                           "reason: upstream data not delivered"), out
    assert cli.json("runs", "show", "1")["state"] == "failed" and states(cli) == {"a": "skipped", "b": "skipped"}
    (event,) = cli.json("events", "--run", "1", "--kind", "run_cancelled")
    assert event["actor"].startswith("cli:") and event["details"]["reason"] == "upstream data not delivered"


def test_refused_controls_are_one_line_and_change_nothing(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", DAG.format(command="true"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle", **FAST)
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01", "--replace")  # run 1 is now overridden
    before = dump(cli)
    for args, text in [(("runs", "cancel", "1"), "overridden"), (("runs", "mark-failed", "1"), "overridden"),
                       (("tasks", "mark", "ops", "1", "a", "--state", "failed"), "overridden"),
                       (("runs", "mark-success", "99"), "no DAG run"),
                       (("tasks", "mark", "ops", "2", "zzz", "--state", "failed"), "'zzz' is not in version")]:
        result = cli.fails(*args)
        assert text in result.stderr, (args, result.stderr)
        assert dump(cli) == before, args
    cli.ok("scheduler", "--exit-when-idle", **FAST)
    assert "only a queued or running run can be cancelled" in cli.fails("runs", "cancel", "2").stderr
    bad = cli.run("tasks", "mark", "ops", "2", "a", "--state", "running")
    assert bad.exit_code == 2 and "--state must be success, failed or skipped" in bad.stderr


def test_cancelling_a_running_run_stops_its_try_and_skips_the_rest(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", DAG.format(command="sleep 600"))  # long enough to outlast a slow `runs cancel`
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    proc = subprocess.Popen([LEDGER, "scheduler"], env={**cli.env, **FAST}, cwd=cli.home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while states(cli).get("a") != "running":
            assert time.monotonic() < deadline, "the try never started"
            time.sleep(0.2)
        out = cli.ok("runs", "cancel", "1")
        assert "running → failed" in out and "stopping the running tries of: a" in out, out
        while states(cli)["a"] == "running":
            assert time.monotonic() < deadline, "the try was not stopped"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert states(cli) == {"a": "stopped", "b": "skipped"}
    log = (cli.home / "logs" / "ops" / "run_1" / "a" / "try_1.log").read_text()
    assert log.rstrip().splitlines()[-1].endswith("outcome: stopped by an operator (ledger runs cancel)"), log
    shown = cli.json("runs", "show", "1")
    assert shown["state"] == "failed"
    (cancelled,) = cli.json("events", "--dag", "ops", "--kind", "run_cancelled")
    assert cancelled["details"]["stopping"] == ["a"] and cancelled["details"]["skipped"] == ["b"]


def test_pause_with_stop_queued_keeps_queued_runs_from_starting_until_unpaused(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("held.py", """
import pendulum
from ledger import DAG, BashTask

with DAG("held", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("t", "true")
""")
    cli.ok("trigger", "held", "--logical-date", "2024-03-01")
    cli.ok("trigger", "held", "--logical-date", "2024-03-02")
    assert "its queued runs do not start" in cli.ok("dags", "pause", "held", "--stop-queued")
    cli.ok("scheduler", "--exit-when-idle")
    assert [r["state"] for r in cli.json("timeline", "held")] == ["queued", "queued"]
    paused = [e for e in cli.json("events", "--dag", "held") if e["kind"] == "dag_paused"]
    assert paused[-1]["details"] == {"stop_queued": True} and paused[-1]["actor"].startswith("cli:")
    cli.ok("dags", "pause", "held")  # a plain pause: queued runs run again (no new ones are created)
    cli.ok("scheduler", "--exit-when-idle")
    assert [r["state"] for r in cli.json("timeline", "held")] == ["success", "success"]


def test_cancelling_a_run_whose_try_waits_in_a_busy_worker_stops_it_at_once_as_never_started(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", DAG.format(command="sleep 600"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    cli.ok("trigger", "ops", "--logical-date", "2024-03-02")
    # one worker, sent one item beyond the try it runs: one run's `a` runs, the other's waits behind it
    env = {**cli.env, **FAST, "LEDGER_PARALLELISM": "1", "LEDGER_QUEUE_AHEAD": "1", "LEDGER_SHUTDOWN_GRACE": "1"}
    proc = subprocess.Popen([LEDGER, "scheduler"], env=env, cwd=cli.home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while sorted(states(cli, run)["a"] for run in ("1", "2")) != ["queued", "running"]:
            assert time.monotonic() < deadline, "the tries were not running and queued"
            time.sleep(0.2)
        running, waiting = sorted(("1", "2"), key=lambda run: states(cli, run)["a"] != "running")
        cli.ok("runs", "cancel", waiting)
        while states(cli, waiting)["a"] == "queued":  # long before the other's `sleep 600` ends
            assert time.monotonic() < deadline, "the waiting try was not stopped"
            time.sleep(0.2)
        assert states(cli, running)["a"] == "running"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert states(cli, waiting) == {"a": "stopped", "b": "skipped"}
    conn = sqlite3.connect(f"file:{cli.home / 'ledger.db'}?mode=ro", uri=True)
    try:
        tried = conn.execute("SELECT r.state, r.started_at, r.pid FROM task_try r JOIN task_instance ti "
                             "ON ti.id = r.task_instance_id WHERE ti.run_id = ? AND ti.task_id = 'a'",
                             (int(waiting),)).fetchall()
    finally:
        conn.close()
    assert tried == [("stopped", None, None)]  # one try, which never started
    log = (cli.home / "logs" / "ops" / f"run_{waiting}" / "a" / "try_1.log").read_text()
    assert log.rstrip().splitlines()[-1].endswith(
        "outcome: never started: stopped by an operator (ledger runs cancel)"), log
