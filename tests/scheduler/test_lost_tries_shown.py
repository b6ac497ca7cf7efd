"""A try lost to a crash is shown as lost wherever tries are counted or shown: the scheduler's metrics, the web
view's run page and try log, the API's run document; and it calls no failure callback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from fastapi.testclient import TestClient
from sqlalchemy import select

from ledger.clock import FixedClock
from ledger.config import load_settings
from ledger.models import DagRun, Event
from ledger.web.app import create_app
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts  # noqa: F401 (a fixture)


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
