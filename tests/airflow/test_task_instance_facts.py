"""Airflow's TaskInstance and DagRun attributes that alerts and templates read (ti.log_url, ti.duration,
ti.start_date, ti.hostname, ti.max_tries, dag_run.id, dag_run.start_date ...): in a try's templates
(ledger/sdk/context.py, ledger/sdk/templates.py) and in a callback's context (ledger/airflow_compat/callbacks.py),
each filled from what the ledger holds, None where it holds nothing."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.airflow_compat.callbacks import callback_context
from ledger.sdk.context import TaskContext
from ledger.sdk.templates import render, template_names

T0 = pendulum.datetime(2024, 3, 5, tz="UTC")
BASE = "https://ledger.example.com/"
FACTS = ("{{ ti.max_tries }}|{{ ti.hostname }}|{{ ti.start_date | ts }}|{{ ti.end_date }}|{{ ti.duration }}|"
         "{{ ti.log_url }}|{{ ti.operator }}|{{ dag_run.id }}|{{ dag_run.start_date | ts }}|{{ dag_run.end_date }}|"
         "{{ dag_run.state }}")


def a_context(**overrides: Any) -> TaskContext:
    values: dict[str, Any] = dict(
        dag_id="alerting", task_id="load", run_id="12", logical_date=T0, data_interval_start=T0,
        data_interval_end=T0.add(days=1), try_number=2, dag_version="0" * 64, run_type="scheduled",
        tries_allowed=3, run_started="2024-03-06T00:00:05+00:00", operator="BashOperator",
        start_date=datetime(2024, 3, 6, 0, 1, tzinfo=UTC))
    return TaskContext(**(values | overrides))


def names_of(context: TaskContext) -> dict[str, Any]:
    return template_names(
        logical_date=context.logical_date, data_interval_start=context.data_interval_start,
        data_interval_end=context.data_interval_end, prev_interval=None, run_id=context.run_id,
        run_type=context.run_type, try_number=context.try_number, dag_version=context.dag_version, dag=None,
        task=None, params={}, conf={}, ti=context, run_started=context.run_started)


def test_a_trys_templates_read_its_task_instance_and_run_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_WEB_BASE_URL", BASE)
    context = a_context(map_index=4)
    assert render(FACTS, names_of(context), field="f").split("|") == [
        "2", socket.gethostname(), "2024-03-06T00:01:00+00:00", "None", "None",  # (a running try has not ended)
        "https://ledger.example.com/runs/12/tasks/load%5B4%5D/tries/2/log", "BashOperator", "12",
        "2024-03-06T00:00:05+00:00", "None", "running"]


def test_without_a_base_url_or_a_ledger_run_the_log_url_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_WEB_BASE_URL", raising=False)
    assert a_context().log_url is None
    monkeypatch.setenv("LEDGER_WEB_BASE_URL", BASE)
    test_run = a_context(run_id="0", tries_allowed=None, run_started=None)  # `ledger dags test`'s run: no record
    assert (test_run.log_url, test_run.max_tries) == (None, None)
    assert names_of(test_run)["dag_run"].id is None and names_of(test_run)["dag_run"].start_date is None


RECORDED = {"kind": "task_failure", "dag_id": "alerting", "run_id": 12, "run_type": "scheduled",
            "dag_version": "abc", "logical_date": T0.isoformat(), "data_interval_start": T0.isoformat(),
            "data_interval_end": T0.add(days=1).isoformat(), "conf": {}, "task_id": "load", "try_number": 3,
            "state": "failed", "reason": "exit code 3", "log_path": None, "run_state": "running",
            "run_started": "2024-03-06T00:00:05+00:00", "run_ended": None,
            "try": {"map_index": -1, "max_tries": 3, "start_date": "2024-03-06T00:10:00+00:00",
                    "end_date": "2024-03-06T00:10:02.500000+00:00", "hostname": "worker-7"}}


def test_a_failure_callbacks_ti_has_what_the_ledger_recorded_of_the_try(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_WEB_BASE_URL", BASE)
    context = callback_context(RECORDED, None, None)
    ti, run = context["ti"], context["dag_run"]
    assert (ti.start_date, ti.end_date) == (pendulum.datetime(2024, 3, 6, 0, 10, tz="UTC"),
                                            pendulum.datetime(2024, 3, 6, 0, 10, 2, 500000, tz="UTC"))
    assert (ti.duration, ti.hostname, ti.max_tries, ti.execution_date) == (2.5, "worker-7", 2, T0)
    assert ti.log_url == "https://ledger.example.com/runs/12/tasks/load/tries/3/log"
    assert (run.id, run.state, run.start_date, run.end_date) == (
        12, "running", pendulum.datetime(2024, 3, 6, 0, 0, 5, tz="UTC"), None)


def test_a_callback_of_a_try_the_ledger_has_no_times_for_gets_none() -> None:
    context = callback_context({**RECORDED, "try": {}}, None, None)  # (a task failed without a try)
    ti = context["ti"]
    assert (ti.start_date, ti.end_date, ti.duration, ti.hostname, ti.max_tries, ti.log_url) == (None,) * 6


ALERT = """\
import json
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

def alert(context):
    ti, run = context["ti"], context["dag_run"]
    with open(OUT, "w") as f:
        json.dump({"log_url": ti.log_url, "duration": ti.duration, "start": str(ti.start_date),
                   "end": str(ti.end_date), "host": ti.hostname, "max_tries": ti.max_tries, "run_id": run.id,
                   "run_start": str(run.start_date)}, f)

with DAG("alerting", start_date=pendulum.datetime(2024, 3, 5, tz="UTC"), schedule=None,
         default_args={"on_failure_callback": alert}):
    BashOperator(task_id="fails", bash_command="echo '{{ ti.max_tries }} {{ dag_run.id }} {{ ti.hostname }} "
                 "{{ dag_run.start_date is not none }} {{ ti.start_date is not none }}' > " + FACTS + "; exit 3")
"""


def test_the_standard_failure_alert_reads_the_trys_facts_under_the_scheduler(ready_cli: Any,
                                                                            tmp_path: Path) -> None:
    from tests.backfill.test_backfill_cli import schedule

    cli = ready_cli
    out, facts = tmp_path / "alert.json", tmp_path / "facts.txt"
    cli.write_dag("alerting.py", f"OUT = {str(out)!r}\nFACTS = {str(facts)!r}\n" + ALERT)
    cli.ok("trigger", "alerting", "--logical-date", "2024-03-05")
    schedule(cli, LEDGER_WEB_BASE_URL="http://ledger.example:8080")
    [call] = cli.json("callbacks", "--dag", "alerting")
    assert call["state"] == "ok", call
    run = cli.json("runs", "show", str(call["run_id"]))
    [ti] = run["task_instances"]
    [the_try] = ti["tries"]
    seen = json.loads(out.read_text())
    started, ended = (datetime.fromisoformat(the_try[k]) for k in ("started_at", "ended_at"))
    assert seen == {"log_url": f"http://ledger.example:8080/runs/{run['run_id']}/tasks/fails/tries/1/log",
                    "duration": (ended - started).total_seconds(), "start": str(pendulum.instance(started)),
                    "end": str(pendulum.instance(ended)), "host": the_try["hostname"], "max_tries": 0,
                    "run_id": int(run["run_id"]), "run_start": seen["run_start"]}
    assert seen["run_start"] != "None"
    assert facts.read_text().split() == ["0", str(run["run_id"]), socket.gethostname(), "True", "True"]
