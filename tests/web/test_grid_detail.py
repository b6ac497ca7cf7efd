"""The grid's detail panel, its task groups and the clear and mark started from it (issue 41, part 4), in process on
real ledgers made with the real CLI (tests/web/conftest.py): a cell opens the panel of its task instance (its
tries, their states, durations, versions and logs, why it failed, and an operator's actions); a task group is a
row of its own that folds; a clear or mark from the panel goes through its preview and ends back on the grid."""

from __future__ import annotations

import html
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


def cell_links(markup: str) -> dict[tuple[str, str], str]:
    """(run id, task id) -> the href of its grid cell."""
    found = {}
    for href in re.findall(r'<a class="sq state-\w+" href="([^"]+)"', markup):
        href = html.unescape(href)
        run = re.search(r"[?&]run=(\d+)", href)
        task = re.search(r"[?&]task=([^&#]+)", href)
        assert run and task, href
        found[run.group(1), task.group(1)] = href
    return found


def panel(markup: str) -> str:
    start = markup.index('<section class="detail" id="detail"')
    return markup[start:markup.index("</section>", start)]


def test_a_grid_cell_opens_its_task_instances_tries_with_their_states_versions_and_logs(
        client: TestClient, ledger_home: Cli) -> None:
    grid = client.get("/dags/web/grid").text
    assert 'id="detail"' not in grid  # no panel before a click
    run = ledger_home.json("timeline", "web")[0]  # 2024-03-01: task flaky failed its first try, then succeeded
    href = cell_links(grid)[run["run_id"], "flaky"]
    assert href.endswith("#detail")
    shown = client.get(href)
    assert shown.status_code == 200
    box = panel(shown.text)
    assert 'class="cell picked"' in shown.text  # the clicked cell stands out
    tries = ledger_home.json("runs", "show", run["run_id"])
    flaky = next(ti for ti in tries["task_instances"] if ti["task_id"] == "flaky")
    rows = re.findall(r"<tr><td>(\d+)</td><td><span class=\"state state-(\w+)\">", box)
    assert rows == [(str(t["try_number"]), t["state"]) for t in flaky["tries"]] == [("1", "failed"), ("2", "success")]
    for t in flaky["tries"]:  # each try's version, and its log, which opens
        assert f'href="/dags/web/versions/{t["dag_version"]}"' in box
        log = f'/runs/{run["run_id"]}/tasks/flaky/tries/{t["try_number"]}/log'
        assert f'href="{log}"' in box and client.get(log).status_code == 200
    assert re.search(r"<td>\d+\.\d+s</td>", box)  # its duration
    assert "mark flaky" not in box and "clear flaky" not in box  # not signed in as an operator: no action


def test_the_panel_of_a_mapped_task_lists_its_instances_and_bad_choices_are_refused(views_client: TestClient) -> None:
    grid = views_client.get("/dags/berlin/grid").text
    (run, _), href = next((k, v) for k, v in cell_links(grid).items() if k[1] == "fan")
    box = panel(views_client.get(href).text)
    assert re.findall(r'<div class="instance" data-label="([^"]+)"', box) == ["fan[0]", "fan[1]"]
    assert f"/runs/{run}/tasks/fan%5B0%5D/tries/1/log" in box
    for params, says in (({"run": run}, "needs both a run and a task"),
                         ({"run": run, "task": "nope"}, "has no task 'nope'")):
        answer = views_client.get("/dags/berlin/grid", params=params)
        assert answer.status_code == 400 and says in text_of(answer.text)
    other = views_client.get("/dags/slow/grid", params={"run": run, "task": "fan"})
    assert other.status_code == 400 and "is not a run of DAG 'slow'" in text_of(other.text)
    assert views_client.get("/dags/berlin/grid", params={"run": 999_999, "task": "fan"}).status_code == 404


def rows_of(markup: str) -> list[str]:
    """The grid's rows as shown: a task by its id, a group as `▾ id` (open) or `▸ id` (folded)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", r)).strip()
            for r in re.findall(r'<th class="task-col(?: group-name)?">(.*?)</th><td', markup)]


def test_a_task_group_has_a_row_of_its_own_that_folds_its_tasks(views_client: TestClient) -> None:
    grid = views_client.get("/dags/berlin/grid").text
    assert rows_of(grid) == ["colours", "▾ load", "load.extract", "load.copy", "fan"]
    group_cells = re.findall(r'<a class="sq group-sq state-(\w+)"', grid)
    assert group_cells and set(group_cells) == {"success"}  # its tasks' most urgent state, per run
    fold = html.unescape(re.search(r'<a class="fold" href="([^"]+)"', grid).group(1))  # type: ignore[union-attr]
    folded = views_client.get(fold).text
    assert rows_of(folded) == ["colours", "▸ load", "fan"]
    unfold = html.unescape(re.search(r'<a class="fold" href="([^"]+)"', folded).group(1))  # type: ignore[union-attr]
    assert "fold=" not in unfold and rows_of(views_client.get(unfold).text) == rows_of(grid)
    # a cell clicked on a folded grid keeps the group folded
    href = next(v for k, v in cell_links(folded).items() if k[1] == "fan")
    assert "fold=load" in href and rows_of(views_client.get(href).text) == ["colours", "▸ load", "fan"]


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path_factory.mktemp("grid-detail") / "home")  # runs 1 and 2 of ops: success


@pytest.fixture()
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        yield c


def test_a_clear_from_the_grid_panel_is_previewed_confirmed_and_ends_on_the_grid(ops: Cli, web: TestClient) -> None:
    signed_in(web, "op")
    grid = web.get("/dags/ops/grid").text
    box = panel(web.get(cell_links(grid)["1", "b"]).text)
    clear = html.unescape(re.search(r'<a class="act clear" href="([^"]+)"', box).group(1))  # type: ignore[union-attr]
    assert clear.startswith("/runs/1/clear?task=b&back=")
    preview = web.get(clear).text
    assert "the clear gives 1 task instance(s) fresh tries" in text_of(preview)
    assert ops.json("runs", "show", "1")["state"] == "success"  # the preview changed nothing
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">',
                             preview[preview.index('id="confirm"'):]))
    done = web.post("/runs/1/clear", data={k: html.unescape(v) for k, v in fields.items()}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/dags/ops/grid?run=1&task=b")
    back = web.get(done.headers["location"]).text
    assert "cleared 1 task instance(s) (b) of run 1; it is queued" in text_of(back)  # says what it did, on the grid
    assert cell_links(back)["1", "b"] and 'state state-scheduled' in panel(back)
    assert ops.json("events", "--run", "1", "--kind", "tasks_cleared")[-1]["actor"] == "web:op"


def test_a_mark_from_the_grid_panel_ends_on_the_grid_and_a_viewer_is_offered_nothing(ops: Cli, web: TestClient) -> None:
    signed_in(web, "op")
    box = panel(web.get(cell_links(web.get("/dags/ops/grid").text)["2", "b"]).text)
    mark = html.unescape(re.search(r'<a class="act mark" href="([^"]+)"', box).group(1))  # type: ignore[union-attr]
    choice = web.get(mark + "&state=failed").text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">',
                             choice[choice.index('id="confirm"'):]))
    done = web.post("/runs/2/tasks/b/mark", data={k: html.unescape(v) for k, v in fields.items()},
                    follow_redirects=False)
    assert done.headers["location"].startswith("/dags/ops/grid?run=2&task=b")
    assert ops.json("runs", "show", "2")["state"] == "failed"
    signed_in(web, "vi")
    seen = panel(web.get(cell_links(web.get("/dags/ops/grid").text)["2", "b"]).text)
    assert "failed" in seen and 'class="act' not in seen


@pytest.mark.parametrize("back", ["https://evil.example/dags/x/grid", "//evil.example/grid", "/runs/1",
                                  "/admin/users?x=/grid"])
def test_an_action_ends_on_a_grid_of_this_server_only(web: TestClient, back: str) -> None:
    signed_in(web, "op")
    page = web.get("/runs/1/clear", params={"task": "a", "back": back}).text
    assert 'name="back"' not in page
