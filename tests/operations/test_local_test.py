"""The local test loop: `ledger tasks test` and `ledger dags test` run the DAG file as it is now, in the
foreground, with the scheduler's context and environment, print the logs, and record nothing."""

from __future__ import annotations

from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli

HELPER = 'GREETING = "hello from a helper"\n'
TEST_DAG = """
from datetime import timedelta
import pendulum
from ledger import DAG, BashTask, PythonTask
from common import GREETING

def show(context):
    print(GREETING, context.dag_id, context.run_type, context.logical_date.isoformat(), context.conf)

with DAG("t", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="Europe/Berlin")) as dag:
    a = PythonTask("a", show)
    b = BashTask("b", "echo start=$LEDGER_DATA_INTERVAL_START; exit 1", retries=1, retry_delay=timedelta(hours=1))
    c = BashTask("c", "echo cleanup", trigger_rule="all_done")
    d = BashTask("d", "echo never")
    a >> b >> [c, d]
"""


def _write(cli: Cli) -> None:
    (cli.dags / "common").mkdir(parents=True, exist_ok=True)
    (cli.dags / "common" / "__init__.py").write_text(HELPER)
    cli.write_dag("t.py", TEST_DAG)


def test_tasks_test_runs_one_task_with_the_schedulers_context_and_records_nothing(ready_cli: Cli) -> None:
    cli = ready_cli
    _write(cli)
    before = dump(cli)
    out = cli.ok("tasks", "test", "t", "a", "--logical-date", "2024-03-05", "--conf", '{"k": 1}')
    # the DAG's zone: 2024-03-05 in Berlin is 2024-03-04T23:00 UTC; helpers beside the DAG import
    assert "hello from a helper t test 2024-03-04T23:00:00+00:00 {'k': 1}" in out
    assert "outcome: success" in out
    failed = cli.run("tasks", "test", "t", "b", "--logical-date", "2024-03-05")
    assert failed.exit_code == 1 and "start=2024-03-04T23:00:00+00:00" in failed.stdout
    assert dump(cli) == before  # no version registered, no run, no event
    assert not (cli.home / "logs").exists()
    assert "has no task 'nope'" in cli.fails("tasks", "test", "t", "nope").stderr
    assert "before DAG 't' starts" in cli.fails("tasks", "test", "t", "a", "--logical-date", "2023-01-01").stderr


def test_dags_test_runs_the_whole_dag_by_the_real_rules_without_a_database(cli: Cli) -> None:
    _write(cli)  # no `ledger db upgrade`: the test loop does not need the database
    result = cli.run("dags", "test", "t", "--logical-date", "2024-03-05")
    out = result.stdout
    assert result.exit_code == 1, result.output  # the leaf c ran (all_done), the leaf d is upstream_failed
    order = [line for line in out.splitlines() if line.startswith("--- ")]
    assert order == ["--- a try 1: success", "--- b try 1: up_for_retry (exit code 1)",
                     "--- b try 2: failed (exit code 1)", "--- d: upstream_failed (trigger rule all_success)",
                     "--- c try 1: success"], out
    assert out.strip().endswith("test run of t: failed")
    assert not (cli.home / "ledger.db").exists()


def test_dags_test_record_keeps_the_test_as_a_run_of_type_test_in_the_timeline(ready_cli: Cli) -> None:
    cli = ready_cli
    _write(cli)  # a recorded run follows the rules to the letter: its retry waits retry_delay, here none
    cli.write_dag("t.py", TEST_DAG.replace("retry_delay=timedelta(hours=1)", "retry_delay=timedelta(0)"))
    result = cli.run("dags", "test", "t", "--logical-date", "2024-03-05", "--record")
    assert result.exit_code == 1, result.output  # the leaf d is upstream_failed, as without --record
    assert "--- b try 2: failed" in result.stdout and "start=2024-03-04T23:00:00+00:00" in result.stdout
    (run,) = cli.json("timeline", "t")
    assert run["run_type"] == "test" and run["state"] == "failed"
    shown = cli.json("runs", "show", run["run_id"])
    states = {t["task_id"]: t["state"] for t in shown["task_instances"]}
    assert states == {"a": "success", "b": "failed", "c": "success", "d": "upstream_failed"}
    assert {t["dag_version"] for ti in shown["task_instances"] for t in ti["tries"]} == {run["dag_version"]}
    assert "hello from a helper" in cli.ok("tasks", "logs", "t", run["run_id"], "a")
    refused = cli.fails("dags", "test", "t", "--logical-date", "2024-03-05", "--record")
    assert "already holds" in refused.stderr
    assert "--replace goes with --record" in cli.fails("dags", "test", "t", "--replace").stderr
