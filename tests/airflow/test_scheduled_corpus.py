"""Corpus files whose behaviour depends on the timeline, run by the scheduler through the real CLI: catch-up runs
of LatestOnlyOperator (the older run skips what follows it, the latest runs everything) and the prev_*_success
names (the second run sees the first)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pendulum

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"


def test_the_scheduler_runs_latest_only_and_prior_success_catch_up_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    for name in ("af2_latest_only.py", "af3_prev_success.py"):
        shutil.copy(CORPUS / name, cli.dags / name)
    cli.ok("scheduler", "--exit-when-idle")  # each DAG: two daily runs, from two days ago

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
