"""Operator controls through the real CLI: cancel a run, mark a run or task instances by hand. Each is an
event naming who did it; refusals are one line and change nothing."""

from __future__ import annotations

import signal
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
    out = cli.ok("tasks", "mark", "ops", "1", "a", "--state", "success", "--downstream")
    assert "run failed → success" in out, out
    assert states(cli) == {"a": "success", "b": "success"}
    (event,) = cli.json("events", "--dag", "ops", "--kind", "tasks_marked")
    assert event["actor"].startswith("cli:") and event["details"]["tasks"] == ["a", "b"]
    assert "run 1 of ops marked failed: success → failed" in cli.ok("runs", "mark-failed", "1")
    assert cli.json("runs", "show", "1")["state"] == "failed"
    assert [e["details"]["to"] for e in cli.json("events", "--dag", "ops", "--kind", "run_marked")] == ["failed"]


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
    cli.write_dag("ops.py", DAG.format(command="sleep 60"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    proc = subprocess.Popen([LEDGER, "scheduler"], env={**cli.env, **FAST}, cwd=cli.home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
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
    shown = cli.json("runs", "show", "1")
    assert shown["state"] == "failed"
    (cancelled,) = cli.json("events", "--dag", "ops", "--kind", "run_cancelled")
    assert cancelled["details"]["stopping"] == ["a"] and cancelled["details"]["skipped"] == ["b"]
