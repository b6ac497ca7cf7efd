"""Task code that reaches the ledger, run on a Celery worker that has no database: a try sends a signal, a try
triggers a DAG (whose run the scheduler then runs) and waits for it, an ExternalTaskSensor waits for that try; all
through ledger's webserver's worker API with the worker's token (ledger/sdk/ledger_client.py). Real redis-server,
`ledger webserver`, `ledger worker` and `ledger scheduler`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
from typing import Any

import pytest

from tests import launcher
from tests.celery_cluster import Cluster
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import wait_until
from tests.scheduler.test_celery_faults import start_scheduler

pytestmark = pytest.mark.timeout(180)

DAGS = """
import os
import time

import pendulum
from airflow import DAG as AirflowDAG
from airflow.operators.trigger_dagrun import TriggerDagRunOperator
from ledger import DAG, PythonTask
from ledger.sdk.external_task import ExternalTaskSensor

START = pendulum.datetime(2024, 1, 1, tz="UTC")
GATE = @GATE@


def say(context):
    sent = context.send_signal("ci.from_worker", "hello", meta={"n": 1})
    print("sent version", sent.version, "by", sent.sender)


def receive(context):
    while not os.path.exists(GATE):  # (the test writes it once the watcher has waited)
        time.sleep(0.05)
    print("received", context.conf)


with DAG("sayer", schedule="@once", start_date=START):
    PythonTask("say", say)

with DAG("called", schedule=None, start_date=START, params={"n": 0}):
    PythonTask("receive", receive)

with AirflowDAG("kicker", schedule="@once", start_date=START):
    TriggerDagRunOperator(task_id="kick", trigger_dag_id="called", conf={"n": 2},
                          logical_date="2024-01-01T12:00:00+00:00", wait_for_completion=True, poke_interval=0.2)

with DAG("watcher", schedule="@once", start_date=START):
    ExternalTaskSensor("wait", external_dag_id="kicker", external_task_id="kick", mode="reschedule",
                       poke_interval=0.2, timeout=120)
"""


def query(cluster: Cluster, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(cluster.home / "ledger.db") as db:
        return db.execute(sql, args).fetchall()


def ledger(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return launcher.run([LEDGER, *args], env=cluster.scheduler_env(), cwd=cluster.home, capture_output=True,
                        text=True, timeout=120)


def as_json(cluster: Cluster, *args: str) -> Any:
    done = ledger(cluster, *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_signals_triggers_and_external_task_sensors_work_from_a_worker_without_a_database(
        cluster: Cluster) -> None:
    gate = cluster.home.parent / "gate"
    (cluster.home / "dags" / "reach.py").write_text(textwrap.dedent(DAGS).replace("@GATE@", repr(str(gate))))
    assert ledger(cluster, "dags", "list").returncode == 0
    cluster.start_webserver()
    cluster.start_worker("w1", concurrency=3)
    scheduler = start_scheduler(cluster)
    # the triggered run's task waits for the gate, so the sensor finds the kick unfinished and reschedules
    wait_until("the sensor waits", lambda: query(
        cluster, "SELECT count(*) FROM task_try t JOIN task_instance ti ON ti.id = t.task_instance_id "
                 "WHERE ti.dag_id = 'watcher' AND t.state = 'up_for_reschedule'")[0][0] > 0)
    gate.touch()
    assert scheduler.wait(150) == 0, cluster.procs.output(scheduler)

    tries = query(cluster, "SELECT ti.dag_id, ti.task_id, t.state, t.hostname FROM task_try t JOIN task_instance ti "
                           "ON ti.id = t.task_instance_id ORDER BY ti.dag_id, t.id")
    assert {(dag, task, state) for dag, task, state, _h in tries} == {
        ("sayer", "say", "success"), ("kicker", "kick", "success"), ("called", "receive", "success"),
        ("watcher", "wait", "up_for_reschedule"), ("watcher", "wait", "success")}, tries
    assert [state for dag, _t, state, _h in tries if dag == "watcher"][-1] == "success"
    assert {host for *_, host in tries} == {"w1"}
    assert not (cluster.worker_home("w1") / "ledger.db").exists()  # the worker has no database, and made none

    (signal,) = as_json(cluster, "signal", "list", "ci.from_worker")
    assert (signal["version"], signal["value"], signal["meta"]) == (1, "hello", {"n": 1})
    assert signal["sender"] == "task:sayer.say@run 1 try 1"
    sent = [e for e in as_json(cluster, "events", "--kind", "signal_sent") if e["actor"] == signal["sender"]]
    assert [e["details"]["key"] for e in sent] == ["ci.from_worker"]

    (run,) = as_json(cluster, "timeline", "called")
    assert (run["state"], run["logical_date"]) == ("success", "2024-01-01T12:00:00+00:00"), run
    (created,) = as_json(cluster, "events", "--dag", "called", "--kind", "run_created")
    kick_run = query(cluster, "SELECT id FROM dag_run WHERE dag_id = 'kicker'")[0][0]
    assert created["actor"] == f"task:kicker.kick@run {kick_run} try 1"
    received = (cluster.home / "logs" / "called" / f"run_{run['run_id']}" / "receive" / "try_1.log").read_text()
    assert "received {'n': 2}" in received
    kicked = (cluster.home / "logs" / "kicker" / f"run_{kick_run}" / "kick" / "try_1.log").read_text()
    assert f"triggered run {run['run_id']} of called" in kicked and "ended success" in kicked
    watch_run = query(cluster, "SELECT id FROM dag_run WHERE dag_id = 'watcher'")[0][0]
    watched = sorted((cluster.home / "logs" / "watcher" / f"run_{watch_run}" / "wait").glob("try_*.log"))
    assert "kicker at 2024-01-01T00:00:00+00:00: success -> done" in watched[-1].read_text()
