"""Operator controls through the real CLI: cancel a run, mark a run or task instances by hand. Each is an
event naming who did it; refusals are one line and change nothing."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator

from tests import launcher
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
    proc = launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST}, cwd=cli.home,
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


@contextlib.contextmanager
def one_running_one_waiting(cli: Cli) -> Iterator[tuple[str, str]]:
    """Two runs of `ops` whose `a` sleeps 600 s, a scheduler with one worker sent one item beyond the try it runs:
    yields (the run whose `a` runs, the run whose `a` waits behind it in the worker); SIGTERMs the scheduler."""
    cli.write_dag("ops.py", DAG.format(command="sleep 600"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    cli.ok("trigger", "ops", "--logical-date", "2024-03-02")
    env = {**cli.env, **FAST, "LEDGER_PARALLELISM": "1", "LEDGER_QUEUE_AHEAD": "1", "LEDGER_SHUTDOWN_GRACE": "1"}
    proc = launcher.popen([LEDGER, "scheduler"], env=env, cwd=cli.home,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while sorted(states(cli, run)["a"] for run in ("1", "2")) != ["queued", "running"]:
            assert time.monotonic() < deadline, "the tries were not running and queued"
            time.sleep(0.2)
        running, waiting = sorted(("1", "2"), key=lambda run: states(cli, run)["a"] != "running")
        yield running, waiting
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def tries_of_a(cli: Cli, run: str) -> list[tuple[int, str, str | None]]:
    """(try number, state, started_at) of run `run`'s task `a`, read from the database file."""
    conn = sqlite3.connect(f"file:{cli.home / 'ledger.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT r.try_number, r.state, r.started_at FROM task_try r JOIN task_instance ti "
                            "ON ti.id = r.task_instance_id WHERE ti.run_id = ? AND ti.task_id = 'a' "
                            "ORDER BY r.try_number", (int(run),)).fetchall()
    finally:
        conn.close()


def test_cancelling_a_run_whose_try_waits_in_a_busy_worker_stops_it_at_once_as_never_started(
        ready_cli: Cli) -> None:
    cli = ready_cli
    with one_running_one_waiting(cli) as (running, waiting):
        cli.ok("runs", "cancel", waiting)
        deadline = time.monotonic() + 60
        while states(cli, waiting)["a"] == "queued":  # long before the other's `sleep 600` ends
            assert time.monotonic() < deadline, "the waiting try was not stopped"
            time.sleep(0.2)
        assert states(cli, running)["a"] == "running"
    assert states(cli, waiting) == {"a": "stopped", "b": "skipped"}
    assert tries_of_a(cli, waiting) == [(1, "stopped", None)]  # one try, which never started
    log = (cli.home / "logs" / "ops" / f"run_{waiting}" / "a" / "try_1.log").read_text()
    assert log.rstrip().splitlines()[-1].endswith(
        "outcome: never started: stopped by an operator (ledger runs cancel)"), log


def test_a_try_still_waiting_in_a_worker_when_the_scheduler_stops_is_tried_again_and_costs_no_retry(
        ready_cli: Cli) -> None:
    cli = ready_cli
    with one_running_one_waiting(cli) as (running, waiting):
        pass
    # its `sleep 600` was cut short by the shutdown: lost, so it waits for a new try that spends no retry
    assert states(cli, running)["a"] == "scheduled"
    assert tries_of_a(cli, running)[0][1] == "lost"
    assert states(cli, waiting)["a"] == "scheduled"  # waiting for a new try, as if never queued
    assert tries_of_a(cli, waiting) == [(1, "stopped", None)]  # try 1 never ran
    (max_tries,) = {ti["max_tries"] for ti in cli.json("runs", "show", waiting)["task_instances"]
                    if ti["task_id"] == "a"} or {None}
    assert max_tries == 2  # the next try is not a retry (the DAG gives `a` none)
    (event,) = cli.json("events", "--dag", "ops", "--kind", "try_not_started")
    assert str(event["run_id"]) == waiting
    assert event["details"]["reason"] == "never started: stopped by shutdown"
    log = (cli.home / "logs" / "ops" / f"run_{waiting}" / "a" / "try_1.log").read_text()
    assert log.rstrip().endswith("outcome: never started: stopped by shutdown; it gets a new try"), log
