"""Live and explicit actions (issue 41, part 3), in process on a real ledger made with the real CLI: a clear shows
what it re-runs and asks to confirm (ticked by default: the failed task instances), every action ends on a page
that says what it did, a refused trigger says why above its form with what was typed kept, deletes ask first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import copy_ops
from tests.web.test_actions import signed_in
from tests.web.test_pages import text_of


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path_factory.mktemp("explicit") / "home")


@pytest.fixture(scope="module")
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        signed_in(c, "op")
        yield c


def field(markup: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', markup)
    assert found is not None, name
    return found.group(1)


def test_a_clear_shows_what_it_reruns_then_clears_on_confirmation_and_says_what_it_did(
        ops: Cli, web: TestClient) -> None:
    run = "1"
    assert 'href="/runs/1/clear?task=b"' in web.get(f"/runs/{run}").text  # offered from each task row
    preview = web.get(f"/runs/{run}/clear", params={"task": "b"})
    assert preview.status_code == 200
    assert "the clear gives 1 task instance(s) fresh tries" in text_of(preview.text)
    assert ops.json("runs", "show", run)["state"] == "success"  # the preview changed nothing
    before = ops.json("events", "--kind", "tasks_cleared")
    unconfirmed = web.post(f"/runs/{run}/clear", data={"csrf": web.cookies["ledger_csrf"], "task.b": "on"})
    assert "confirm it again" in unconfirmed.text and ops.json("events", "--kind", "tasks_cleared") == before
    done = web.post(f"/runs/{run}/clear", data={"csrf": web.cookies["ledger_csrf"], "task.b": "on",
                                                "digest": field(preview.text, "digest")})
    assert done.status_code == 200 and str(done.url).endswith(f"/runs/{run}")
    said = re.search(r'<p class="said"[^>]*>([^<]+)</p>', done.text)
    assert said is not None and said.group(1) == f"cleared 1 task instance(s) (b) of run {run}; it is queued"
    assert "class=\"said\"" not in web.get(f"/runs/{run}").text  # said once
    assert ops.json("runs", "show", run)["state"] == "queued"


def test_a_clear_of_nothing_ticked_asks_for_tasks_and_a_bad_choice_is_said_with_the_choice_kept(
        web: TestClient) -> None:
    page = web.get("/runs/2/clear")  # no failed task instance: nothing ticked by default
    assert "tick the tasks to clear" in text_of(page.text) and "checked" not in page.text.split('id="choose"')[1]
    bad = web.get("/runs/2/clear", params={"task": "nope"})
    assert bad.status_code == 400 and "task 'nope' is not in version" in text_of(bad.text)
    assert 'value="nope" checked' not in bad.text  # (not a task of the run: no box for it) ...
    assert 'id="problem"' in bad.text and 'id="choose"' in bad.text  # ... the form is there to choose again


def test_a_refused_trigger_says_why_above_its_form_with_what_was_typed_kept(ops: Cli, web: TestClient) -> None:
    before = ops.json("timeline", "ops")
    page = web.get("/dags/ops/actions")
    answer = web.post("/dags/ops/trigger", data={"csrf": field(page.text, "csrf"), "logical_date": "2024-03-07",
                                                 "param.n": "many", "param.who": "ada"})
    assert answer.status_code == 400 and 'id="problem"' in answer.text
    assert "integer" in text_of(answer.text.split('id="problem"')[1].split("</p>")[0])
    assert 'name="param.n" value="many"' in answer.text and 'name="param.who" value="ada"' in answer.text
    assert 'name="logical_date" value="2024-03-07"' in answer.text
    assert ops.json("timeline", "ops") == before
    made = web.post("/dags/ops/trigger", data={"csrf": field(page.text, "csrf"), "logical_date": "2024-03-07",
                                               "param.n": "3"})
    assert re.search(r"triggered run \d+ of ops at 2024-03-07T00:00:00\+00:00; it is queued", made.text)


def test_a_delete_asks_first() -> None:
    from ledger.web.render import ENV

    form = ENV.from_string('{% from "macros.html" import delete_form %}{{ delete_form("/admin/pools/p/delete") }}')
    markup = form.render(account=lambda: type("A", (), {"csrf": "x"})())
    assert '<input type="checkbox" name="sure" required>' in markup  # the browser sends nothing until it is ticked


BOOM_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("boom", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("ok", "true") >> BashTask("breaks", "echo first; echo second; exit 3")
"""


def test_the_run_page_says_why_each_failed_task_failed_in_one_line(ops: Cli, web: TestClient) -> None:
    ops.write_dag("boom.py", BOOM_DAG)
    ops.ok("trigger", "boom", "--logical-date", "2024-03-01")
    ops.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    (run,) = [r["run_id"] for r in ops.json("timeline", "boom")]
    reason = ops.json("events", "--run", run, "--kind", "task_failed")[-1]["details"]["reason"]
    page = web.get(f"/runs/{run}").text
    assert 'id="failures"' in page
    row = text_of(page.split('id="failures"')[1].split("</table>")[0])
    assert "breaks 1" in row and reason.splitlines()[0].strip()[:200] in row and "log" in row
    assert "ok " not in row  # only the failed ones
