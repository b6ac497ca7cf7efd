"""A form sent again, or sent after what it showed has changed, does what the operator saw or nothing: a double
click on trigger makes one run (with "override" ticked, not a run that overrides its twin, which the timeline
would keep for good); a run marked from a page that showed it queued is not marked once it has succeeded; a clear
confirmed on the preview of one version does not run another. In process, on a ledger made with the real CLI."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import OPS_DAG, copy_ops
from tests.web.test_actions import signed_in
from tests.web.test_explicit_actions import field
from tests.web.test_pages import text_of


@pytest.fixture
def ops(tmp_path: Path, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path / "home")


@pytest.fixture
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        signed_in(c, "op")
        yield c


def said(page: str) -> str:
    found = re.search(r'<p class="said"[^>]*>([^<]+)</p>', page)
    assert found is not None, text_of(page)
    return found.group(1)


def trigger_form(page: str, **typed: str) -> dict[str, str]:
    return {"csrf": field(page, "csrf"), "seen": field(page, "seen"), **typed}


def test_a_trigger_form_sent_twice_makes_one_run_and_the_second_send_says_which(ops: Cli, web: TestClient) -> None:
    page = web.get("/dags/ops/actions").text
    form = trigger_form(page, logical_date="2024-03-02", replace="on")  # overrides run 2
    first = web.post("/dags/ops/trigger", data=form)
    second = web.post("/dags/ops/trigger", data=form)  # a double click
    made = [r for r in ops.json("timeline", "ops", "--all") if r["run_type"] == "manual"
            and r["logical_date"].startswith("2024-03-02") and r["state"] != "overridden"]
    assert len(made) == 1 and str(first.url).endswith(f"/runs/{made[0]['run_id']}")
    assert [r["run_id"] for r in ops.json("timeline", "ops", "--all") if r["state"] == "overridden"] == ["2"]
    assert str(second.url).endswith(f"/runs/{made[0]['run_id']}")
    assert said(second.text) == f"run {made[0]['run_id']} of ops was triggered from this form already: nothing more " \
                                "was triggered"
    again = web.post("/dags/ops/trigger", data=trigger_form(web.get("/dags/ops/actions").text,
                                                           logical_date="2024-03-06"))  # a new page: a new run
    assert said(again.text).startswith("triggered run ")


def test_a_run_marked_from_a_page_that_showed_it_queued_is_not_marked_once_it_has_moved(
        ops: Cli, web: TestClient) -> None:
    ops.ok("trigger", "ops", "--logical-date", "2024-03-05")
    run = str(max(r["run_id"] for r in ops.json("timeline", "ops")))
    page = web.get(f"/runs/{run}/actions").text
    assert 'name="from" value="queued"' in page
    ops.ok("runs", "mark-success", run)  # it succeeded while the operator read the page
    before = ops.json("events", "--kind", "run_marked")
    answer = web.post(f"/runs/{run}/mark", data={"csrf": field(page, "csrf"), "state": "failed", "from": "queued"})
    assert answer.status_code == 409
    assert f"run {run} is success now, not queued as the page showed it; nothing was marked" in text_of(answer.text)
    assert ops.json("runs", "show", run)["state"] == "success"
    assert ops.json("events", "--kind", "run_marked") == before


def test_a_clear_confirmed_on_the_preview_of_one_version_shows_the_preview_again_when_the_version_changed(
        ops: Cli, web: TestClient) -> None:
    preview = web.get("/runs/1/clear", params={"task": "b", "on_latest_version": "true"}).text
    ops.write_dag("ops.py", OPS_DAG.replace('"echo b"', '"echo bee"'))
    ops.ok("dags", "list")  # the new version registered, as the scheduler does
    before = ops.json("events", "--kind", "tasks_cleared")
    answer = web.post("/runs/1/clear", data={"csrf": field(preview, "csrf"), "task.b": "on",
                                             "on_latest_version": "on", "digest": field(preview, "digest")})
    assert "confirm it again" in answer.text and ops.json("events", "--kind", "tasks_cleared") == before
    newest = ops.json("dags", "versions", "ops")[-1]["version"]
    assert f"on version {newest[:8]}" in text_of(answer.text)
    done = web.post("/runs/1/clear", data={"csrf": field(answer.text, "csrf"), "task.b": "on",
                                           "on_latest_version": "on", "digest": field(answer.text, "digest")})
    assert said(done.text).startswith("cleared 1 task instance(s) (b) of run 1 on version")
