"""The corpus's Airflow DAG files for branching, short-circuits, setup/teardown, sensors and external tasks
(tests/airflow_corpus/flow_*.py), loaded unchanged and run through the real `ledger` command: `ledger dags test`,
and the scheduler on one LEDGER_HOME with one worker slot, asserting which tasks ran, were skipped or waited, and
that a sensor waiting in reschedule mode gave its slot to other work (flow_sensors_2x has max_active_tasks=1)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"
DATE = "2024-03-01"  # a Friday, in March


def copy_corpus(cli: Cli) -> None:
    cli.dags.mkdir(parents=True, exist_ok=True)
    for path in CORPUS.glob("flow_*.py"):
        shutil.copy(path, cli.dags / path.name)


def run_dags_test(cli: Cli, dag_id: str) -> tuple[int, dict[str, str]]:
    """`ledger dags test`: its exit status and each task's last line (`--- task ...`), by task."""
    result = cli.run("dags", "test", dag_id, "--logical-date", DATE)
    lines = {}
    for line in result.stdout.splitlines():
        if line.startswith("--- "):
            task, _, rest = line[4:].partition(" ")
            lines[task.rstrip(":")] = rest
    return result.exit_code, lines


def test_dags_test_runs_a_2x_branching_file_with_airflows_skips(cli: Cli) -> None:
    copy_corpus(cli)
    code, lines = run_dags_test(cli, "flow_branching_2x")
    assert code == 1  # run_query fails: the run fails by its work, whatever its teardown did
    assert lines["right"] == "skipped (branch pick followed left)"
    assert lines["after_right"] == "skipped (trigger rule all_success)"
    assert lines["join"].startswith("try 1: success")  # none_failed_min_one_success after a skipped path
    assert lines["small"] == "skipped (branch by_size followed big)"
    assert lines["not_march"] == "skipped (branch in_march followed march)"
    assert lines["weekend"] == "skipped (branch weekend_or_not followed weekday)"
    assert lines["gated"] == "skipped (short-circuit gate: its condition was falsy)"
    assert lines["cleanup"].startswith("try 1: success")  # ignore_downstream_trigger_rules=False: all_done runs
    assert lines["through_gate"].startswith("try 1: success")
    assert lines["run_query"].startswith("try 1: failed") and lines["delete_cluster"].startswith("try 1: success")


def test_dags_test_runs_a_3x_sensor_file_checking_again_when_rescheduled(cli: Cli) -> None:
    copy_corpus(cli)
    code, lines = run_dags_test(cli, "flow_sensors_3x")
    assert code == 1
    assert lines["hard"].startswith("try 2: failed (no retry: SensorTimeout: sensor timed out")  # retries=3 unused
    assert lines["flag_size"].startswith("try 1: success") and lines["after"].startswith("try 1: success")


def states(cli: Cli, run_id: int) -> tuple[str, dict[str, str], dict[str, list[dict[str, Any]]]]:
    shown = cli.json("runs", "show", str(run_id))
    return (shown["state"], {t["task_id"]: t["state"] for t in shown["task_instances"]},
            {t["task_id"]: t["tries"] for t in shown["task_instances"]})


def events_of(cli: Cli, run_id: int, kind: str) -> list[dict[str, Any]]:
    return [e["details"] for e in cli.json("events", "--run", str(run_id), "--kind", kind)]


@pytest.mark.slow
def test_the_scheduler_runs_the_flow_corpus(ready_cli: Cli) -> None:
    cli = ready_cli
    copy_corpus(cli)
    cli.ok("scheduler", "--exit-when-idle")  # each DAG is scheduled @once, at 2024-03-01
    runs = {dag_id: cli.json("timeline", dag_id)[0]["run_id"] for dag_id in (
        "flow_branching_2x", "flow_branching_3x", "flow_sensors_2x", "flow_sensors_3x", "flow_child_2x",
        "flow_parent_2x")}

    state, tis, _tries = states(cli, runs["flow_branching_2x"])
    assert state == "failed" and tis["run_query"] == "failed" and tis["delete_cluster"] == "success"
    assert {t for t, s in tis.items() if s == "skipped"} == {"right", "after_right", "small", "not_march",
                                                              "weekend", "gated"}
    why = {e["task_id"]: e["reason"] for e in events_of(cli, runs["flow_branching_2x"], "task_skipped")}
    assert why == {"right": "branch pick followed left", "small": "branch by_size followed big",
                   "not_march": "branch in_march followed march", "weekend": "branch weekend_or_not followed weekday",
                   "gated": "short-circuit gate: its condition was falsy"}

    state, tis, _tries = states(cli, runs["flow_branching_3x"])
    assert state == "success" and tis["delete"] == "failed"
    assert {t for t, s in tis.items() if s == "skipped"} == {"left", "never", "other_day", "gated", "finally"}

    state, tis, tries = states(cli, runs["flow_sensors_2x"])
    assert state == "success" and tis["never"] == "skipped"
    assert tries["never"][0]["state"] == "up_for_reschedule" and tries["never"][-1]["state"] == "skipped"
    waited = tries["wait_for_flag"]
    assert waited[0]["state"] == "up_for_reschedule" and waited[-1]["state"] == "success"
    maker = tries["make_flag"][0]
    # with one slot for the DAG, the flag was made while the sensor waited between checks: it held no slot then
    assert waited[0]["ended_at"] <= maker["started_at"] and maker["ended_at"] <= waited[-1]["started_at"]
    checks = [e for e in events_of(cli, runs["flow_sensors_2x"], "sensor_checked") if e["task_id"] == "wait_for_flag"]
    assert checks[0]["state"] == "up_for_reschedule" and "next_check" in checks[0]
    assert checks[-1]["state"] == "success" and checks[-1]["checks"] == len(waited)
    assert {c["first_check"] for c in checks} == {checks[0]["first_check"]}  # one timeout clock across tries

    state, tis, tries = states(cli, runs["flow_sensors_3x"])
    assert state == "failed" and tis["hard"] == "failed" and len(tries["hard"]) == 2  # timed out: no retry spent
    assert tis["flag_size"] == tis["after"] == "success"

    for dag_id in ("flow_parent_2x", "flow_child_2x"):
        assert states(cli, runs[dag_id])[0] == "success"
    checked = events_of(cli, runs["flow_child_2x"], "sensor_checked")
    assert checked[-1]["state"] == "success" and checked[-1]["task_id"] == "wait_for_parent"

    cleared = cli.ok("tasks", "clear", "flow_parent_2x", str(runs["flow_parent_2x"]), "-t", "clear_child")
    assert f"of flow_child_2x run {runs['flow_child_2x']} (external task marker)" in cleared
    state, tis, _tries = states(cli, runs["flow_child_2x"])
    assert state == "queued" and tis["wait_for_parent"] == tis["consume"] == "scheduled"
