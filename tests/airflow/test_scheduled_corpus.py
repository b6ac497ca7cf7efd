"""Corpus files whose behaviour depends on the timeline or on other runs, run by the scheduler through the real CLI:
catch-up runs of LatestOnlyOperator (the older run skips what follows it, the latest runs everything), the
prev_*_success names (the second run sees the first), an ExternalTaskSensor waiting for another DAG's task group,
and runs marked by hand whose teardowns still run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pendulum
import pytest

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"
FAST = {"LEDGER_POLL_INTERVAL": "0.2"}


def test_the_scheduler_runs_latest_only_prior_success_and_external_group_files(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    for name in ("af2_latest_only.py", "af3_prev_success.py", "af3_external_group.py"):
        shutil.copy(CORPUS / name, cli.dags / name)
    cli.ok("scheduler", "--exit-when-idle", **FAST)  # two daily runs from two days ago; the group pair @once

    older, latest = cli.json("timeline", "af2_latest_only")  # oldest first
    today = pendulum.today("UTC")
    assert older["logical_date"] == today.subtract(days=2).isoformat()
    states = {run["run_id"]: {t["task_id"]: t["state"] for t in cli.json("runs", "show", str(run["run_id"]))[
        "task_instances"]} for run in (older, latest)}
    assert states[older["run_id"]] == {"latest_only": "success", "task1": "skipped", "task2": "success",
                                       "task3": "skipped", "task4": "success"}
    assert set(states[latest["run_id"]].values()) == {"success"}
    skips = [e["details"] for e in cli.json("events", "--run", str(older["run_id"]), "--kind", "task_skipped")]
    assert [(s["task_id"], s["reason"]) for s in skips] == [("task1", "branch latest_only followed nothing")]
    # sla_miss_callback, with Airflow's arguments: the run had not started when its deadline was found passed
    [log] = (cli.home / "logs" / "af2_latest_only" / f"run_{older['run_id']}" / "callbacks").glob("*.log")
    day = today.subtract(days=2).isoformat()
    assert (f"SLA missed in af2_latest_only: {[f'{t} on {day}' for t in sorted(states[older['run_id']])]} blocked "
            "by 5 task instances") in log.read_text()

    first, second = cli.json("timeline", "af3_prev_success")
    assert first["state"] == second["state"] == "success"
    values = {run["run_id"]: cli.json("tasks", "xcom", "af3_prev_success", str(run["run_id"]), "report")[0]["value"]
              for run in (first, second)}
    assert values[first["run_id"]] == {"interval": ["None", "None"], "started": None, "ended": None}
    shown = cli.json("runs", "show", str(first["run_id"]))
    assert values[second["run_id"]]["interval"] == [str(pendulum.parse(first["data_interval_start"])),
                                                    str(pendulum.parse(first["data_interval_end"]))]
    assert pendulum.parse(values[second["run_id"]]["started"]) == pendulum.parse(shown["started_at"])
    assert pendulum.parse(values[second["run_id"]]["ended"]) == pendulum.parse(shown["ended_at"])

    [producer], [consumer] = cli.json("timeline", "af3_group_producer"), cli.json("timeline", "af3_group_consumer")
    assert producer["state"] == consumer["state"] == "success"
    ended = {t["task_id"]: t["ended_at"] for t in cli.json("runs", "show", str(producer["run_id"]))["task_instances"]}
    checks = cli.json("events", "--run", str(consumer["run_id"]), "--kind", "sensor_checked")
    # it waited while the group's slow task ran: every check before the group's end was a reschedule, and the one
    # that succeeded came after it (how many checks fell inside the 3 s depends on the machine: not asserted)
    assert [c["details"]["state"] for c in checks] == ["up_for_reschedule"] * (len(checks) - 1) + ["success"]
    assert pendulum.parse(checks[-1]["at"]) >= pendulum.parse(ended["load.slow.table"])


@pytest.mark.slow
def test_a_run_marked_by_hand_still_runs_its_teardown_and_ends_by_its_work(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    shutil.copy(CORPUS / "af2_teardown_mark.py", cli.dags / "af2_teardown_mark.py")
    for day in ("2024-03-01", "2024-03-02", "2024-03-03"):
        cli.ok("trigger", "af2_teardown_mark", "--logical-date", day)
    cli.ok("scheduler", "--exit-when-idle", **FAST)  # run 1 fails; runs 2 and 3 wait at run_query, their setups done

    def tasks(run: int) -> dict[str, str]:
        return {t["task_id"]: t["state"] for t in cli.json("runs", "show", str(run))["task_instances"]}

    assert tasks(2) == tasks(3) == {"create_cluster": "success", "run_query": "scheduled",
                                    "delete_cluster": "scheduled"}
    assert cli.ok("runs", "mark-failed", "2").strip() == (
        "run 2 of af2_teardown_mark marked failed: running → running; tasks set: run_query; teardowns left to run: "
        "delete_cluster")
    assert "teardowns left to run: delete_cluster" in cli.ok("runs", "mark-success", "3")
    [marked, _] = [e["details"] for e in cli.json("events", "--dag", "af2_teardown_mark", "--kind", "run_marked")]
    assert marked["to"] == "failed" and marked["teardowns_to_run"] == ["delete_cluster"]
    cli.ok("scheduler", "--exit-when-idle", **FAST)
    # the teardowns ran (their setups had succeeded); each run's state comes from its work, as marked
    assert tasks(2) == {"create_cluster": "success", "run_query": "failed", "delete_cluster": "success"}
    assert tasks(3) == {"create_cluster": "success", "run_query": "success", "delete_cluster": "success"}
    assert [r["state"] for r in cli.json("timeline", "af2_teardown_mark")] == ["failed", "failed", "success"]
