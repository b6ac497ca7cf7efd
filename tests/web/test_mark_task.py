"""Marking one task instance success or failed from the browser's pages and the write API, in process on a real
ledger (made with the real CLI): the confirm page lists what the mark sets, the mark is the CLI's `ledger tasks
mark` (downstream, upstream), the user is its actor; a refused or outdated mark changes nothing and says why; a
viewer sees no mark link and is refused."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tests.web.conftest import app_client
from tests.web.test_actions import refused_like_the_cli, signed_in, token


@pytest.fixture(scope="module")
def ops(ops_home: Cli) -> Cli:
    return ops_home


@pytest.fixture(scope="module")
def web(ops: Cli) -> Iterator[TestClient]:
    yield from app_client(ops)


def states(cli: Cli, run: str) -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in cli.json("runs", "show", run)["task_instances"]}


def would_set(page: str) -> list[tuple[str, str, str]]:
    """The rows of the confirm page's table: (task instance, now, becomes)."""
    table = page.split('id="would-set"', 1)[1].split("</table>", 1)[0]
    return [(task, now, to) for task, now, to in re.findall(
        r"<tr><td>([^<]+)</td><td><span[^>]*>([^<]+)</span></td><td><span[^>]*>([^<]+)</span></td></tr>", table)]


def confirm_fields(page: str) -> dict[str, str]:
    form = page.split('id="confirm"', 1)[1].split("</form>", 1)[0]
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))


def test_an_operator_marks_a_task_instance_after_seeing_what_changes(ops: Cli, web: TestClient) -> None:
    signed_in(web, "op")
    run_page = web.get("/runs/1").text
    assert 'href="/runs/1/tasks/a/mark"' in run_page  # the task instance's mark link
    assert 'href="/runs/1/tasks/a/mark"' in web.get("/runs/1/tasks/a/tries/1/log").text
    chooser = web.get("/runs/1/tasks/a/mark")
    assert chooser.status_code == 200 and 'id="choose"' in chooser.text and 'id="confirm"' not in chooser.text
    before = ops.json("runs", "show", "1")
    page = web.get("/runs/1/tasks/a/mark", params={"state": "failed", "downstream": "true"})
    assert would_set(page.text) == [("a", "success", "failed"), ("b", "success", "failed")]
    assert ops.json("runs", "show", "1") == before  # showing it changed nothing
    fields = confirm_fields(page.text)
    done = web.post("/runs/1/tasks/a/mark", data={**fields, "reason": "wrong input file"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/runs/1"
    assert states(ops, "1") == {"a": "failed", "b": "failed"} and ops.json("runs", "show", "1")["state"] == "failed"
    event = ops.json("events", "--run", "1", "--kind", "tasks_marked")[-1]
    assert event["actor"] == "web:op" and event["details"]["tasks"] == ["a", "b"]
    assert event["details"]["reason"] == "wrong input file"

    # upstream: marking b success takes a with it, as `ledger tasks mark ... --upstream` does
    page = web.get("/runs/1/tasks/b/mark", params={"state": "success", "upstream": "true"})
    assert would_set(page.text) == [("a", "failed", "success"), ("b", "failed", "success")]
    assert web.post("/runs/1/tasks/b/mark", data=confirm_fields(page.text)).status_code == 200
    assert states(ops, "1") == {"a": "success", "b": "success"} and ops.json("runs", "show", "1")["state"] == "success"


def test_an_outdated_or_refused_mark_changes_nothing_and_says_why(ops: Cli, web: TestClient) -> None:
    signed_in(web, "op")
    page = web.get("/runs/2/tasks/a/mark", params={"state": "failed", "downstream": "true"})
    fields = confirm_fields(page.text)
    ops.ok("tasks", "mark", "ops", "2", "b", "--state", "failed")  # the run changes after the page was shown
    before = ops.json("runs", "show", "2")
    again = web.post("/runs/2/tasks/a/mark", data=fields)
    assert again.status_code == 200 and "the run changed since the list was shown" in again.text
    assert would_set(again.text) == [("a", "success", "failed")] and ops.json("runs", "show", "2") == before
    assert web.post("/runs/2/tasks/a/mark", data={**fields, "csrf": "forged"}).status_code == 403
    nothing = web.get("/runs/2/tasks/b/mark", params={"state": "failed"})
    assert nothing.status_code == 400 and "nothing to mark" in nothing.text
    unknown = web.get("/runs/2/tasks/zzz/mark", params={"state": "failed"})
    assert unknown.status_code == 400 and "task &#39;zzz&#39; is not in version" in unknown.text
    assert web.get("/runs/2/tasks/a/mark", params={"state": "running"}).status_code == 400
    assert ops.json("runs", "show", "2") == before


def test_the_write_api_marks_with_upstream_and_answers_a_dry_run(ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "mark")
    if states(ops, "2")["b"] != "failed":  # (the tests of this module may run in any order, or apart)
        ops.ok("tasks", "mark", "ops", "2", "b", "--state", "failed")
    before = ops.json("runs", "show", "2")
    dry = web.post("/api/v1/runs/2/tasks/mark", json={"tasks": ["b"], "state": "skipped", "upstream": True,
                                                        "dry_run": True}, headers=op)
    assert dry.status_code == 200, dry.text
    assert dry.json()["would_set"] == [{"task": "a", "from": "success", "to": "skipped"},
                                       {"task": "b", "from": "failed", "to": "skipped"}]
    assert ops.json("runs", "show", "2") == before
    refused_like_the_cli(ops, web.post("/api/v1/runs/2/tasks/mark", json={"tasks": ["b"], "state": "failed"},
                                       headers=op), 400, "tasks", "mark", "ops", "2", "b", "--state", "failed")
    done = web.post("/api/v1/runs/2/tasks/mark", json={"tasks": ["b"], "state": "success", "upstream": True},
                    headers=op)
    assert done.status_code == 200 and done.json()["tasks_set"] == ["b"] and done.json()["state"] == "success"
    assert ops.json("events", "--run", "2", "--kind", "tasks_marked")[-1]["actor"] == "api:op"
    schema = web.get("/api/openapi.json", headers=op).json()["components"]["schemas"]["MarkTasksBody"]["properties"]
    assert {"upstream", "downstream", "dry_run"} <= set(schema)


def test_a_viewer_sees_no_mark_link_and_is_refused(ops: Cli, web: TestClient) -> None:
    signed_in(web, "vi")
    assert "/tasks/a/mark" not in web.get("/runs/2").text
    assert "/tasks/a/mark" not in web.get("/runs/2/tasks/a/tries/1/log").text
    assert web.get("/runs/2/tasks/a/mark", params={"state": "failed"}).status_code == 403
    before = ops.json("runs", "show", "2")
    refused = web.post("/runs/2/tasks/a/mark", data={"csrf": web.cookies["ledger_csrf"], "state": "failed"})
    assert refused.status_code == 403 and "needs the operator role" in refused.text
    api = web.post("/api/v1/runs/2/tasks/mark", json={"tasks": ["a"], "state": "failed"},
                   headers=token(ops, "vi", "mark"))
    assert api.status_code == 403 and ops.json("runs", "show", "2") == before
