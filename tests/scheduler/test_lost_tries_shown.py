"""A try lost to a crash is shown as lost wherever tries are counted or shown: the scheduler's metrics, the web
view's run page and try log, the API's run document; it calls no failure callback, and a task whose tries are
all lost fails after LEDGER_MAX_LOST_TRIES of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from fastapi.testclient import TestClient
from sqlalchemy import select

from ledger.infra.clock import FixedClock
from ledger.infra.config import load_settings
from ledger.models import DagRun, Event
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts  # noqa: F401 (a fixture)
from tests.scheduler.test_scheduler_cli import schedule


def test_a_lost_try_is_counted_and_shown_as_lost_and_its_task_succeeds_on_a_new_try(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    executor = FakeExecutor(outcome=lambda item: "lost" if (item.task_id, item.try_number) == ("a", 1) else "success")
    job = a_job(tmp_path, engine, sessions, FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC")), executor)
    for _ in range(10):
        job.loop_once()
        with sessions() as s:
            if s.scalar(select(DagRun.state)) == "success":
                break
    job.shutdown()
    with sessions() as s:
        (run_id,) = s.scalars(select(DagRun.id))
    assert [(i.task_id, i.try_number) for i in executor.submitted] == [("a", 1), ("a", 2), ("b", 1)]
    finished = {state: job.metrics.registry.get_sample_value("ledger_task_instances_finished_total",
                                                             {"state": state})
                for state in ("lost", "success", "failed", "up_for_retry")}
    assert finished == {"lost": 1.0, "success": 2.0, "failed": None, "up_for_retry": None}
    with sessions() as s:
        kinds = list(s.scalars(select(Event.kind)))
    assert "try_lost" in kinds and "task_failed" not in kinds, kinds

    app = create_app(load_settings({"LEDGER_HOME": str(tmp_path)}))  # the job's database is tmp_path/ledger.db
    with TestClient(app, base_url="http://localhost") as web:
        shown = web.get(f"/api/v1/runs/{run_id}").json()
        (a,) = [t for t in shown["task_instances"] if t["task_id"] == "a"]
        assert [(t["try_number"], t["state"]) for t in a["tries"]] == [(1, "lost"), (2, "success")]
        page = web.get(f"/runs/{run_id}").text
        assert '<span class="state state-lost">lost</span>' in page
        log = web.get(f"/runs/{run_id}/tasks/a/tries/1/log").text
        assert "lost" in log and "it gets a new try (a lost try spends no retry)" in log, log


KILLS_ITS_WORKER = """
import os
import signal
import pendulum
from ledger import DAG, PythonTask


def kill_worker():
    os.kill(os.getppid(), signal.SIGKILL)  # the try's parent is the worker that runs it
    while True:  # its code never ends (a try that returned would leave its report and be recorded by it): the
        signal.pause()  # kernel's SIGKILL, sent as its worker dies, ends it


def noted(context):
    print("failure callback")


with DAG("k", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         default_args={"retries": 5, "on_failure_callback": noted}):
    PythonTask("killer", kill_worker)
"""


def test_a_task_that_kills_its_worker_fails_after_max_lost_tries_in_a_row_saying_so(ready_cli: Cli) -> None:
    """Retries are not spent on lost tries, and the task cannot loop for ever: LEDGER_MAX_LOST_TRIES lost tries in
    a row fail it, with the reason; only then is its failure callback called, once."""
    cli = ready_cli
    cli.write_dag("k.py", KILLS_ITS_WORKER)
    cli.ok("trigger", "k")
    said = schedule(cli, LEDGER_MAX_LOST_TRIES="2")
    assert "k run 1 task killer try 1: lost (lost: worker died; it gets a new try" in said, said
    assert ("k run 1 task killer try 2: lost (lost: worker died; 2 tries lost in a row (LEDGER_MAX_LOST_TRIES), "
            "so the task fails)") in said, said
    (ti,) = cli.json("runs", "show", "1")["task_instances"]
    assert ti["state"] == "failed" and [t["state"] for t in ti["tries"]] == ["lost", "lost"]
    events = cli.json("events", "--dag", "k", "--kind", "try_lost", "--kind", "task_failed")
    assert [(e["kind"], e["details"]["state"]) for e in events] == [("try_lost", "scheduled"), ("try_lost", "failed")]
    assert [c["state"] for c in cli.json("callbacks", "--dag", "k")] == ["ok"]
