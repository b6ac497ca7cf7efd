"""Operating the ledger in headless Chromium through a real `ledger webserver`: an operator signs in, triggers a
run with a param, clears a task and creates a backfill from its plan page; a viewer sees no action and the write
API answers it 403; a form posted without its CSRF token is refused; a foreign Host header is refused.
Screenshots go to $LEDGER_TEST_ARTIFACTS/web (default artifacts/web); docs/web.md shows copies of them."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import Cli
from tests.web.cdp import Browser, Tab
from tests.web.conftest import PASSWORD, copy_ops, served
from tests.web.test_browser import ARTIFACTS, chromium_or_skip

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served_ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Iterator[tuple[Cli, str]]:
    cli = copy_ops(ops_template, tmp_path_factory.mktemp("browser-ops") / "home")
    with served(cli) as base:
        yield cli, base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser(chromium_or_skip())
    try:
        yield b
    finally:
        b.close()


def shot(tab: Tab, name: str) -> None:
    tab.screenshot(ARTIFACTS / f"{name}.png")


def sign_in(tab: Tab, base: str, user: str, then: str, name: str | None = None) -> None:
    tab.go(f"{base}/login?next={then}")
    tab.run(f"document.querySelector('input[name=username]').value = {user!r};"
            f"document.querySelector('input[name=password]').value = {PASSWORD!r}")
    if name:
        shot(tab, name)
    tab.submit("document.getElementById('sign-in').click()")
    assert tab.url == base + then


def test_an_operator_triggers_clears_and_backfills_from_the_browser(served_ops: tuple[Cli, str],
                                                                    browser: Browser) -> None:
    cli, base = served_ops
    tab = browser.tab()
    sign_in(tab, base, "op", "/dags/ops/actions", "login")
    assert "param who (string)" in tab.text() and "op · operator" in tab.text()
    tab.run("document.querySelector('input[name=logical_date]').value = '2024-03-07';"
            "document.querySelector('input[name=\"param.who\"]').value = 'grace'")
    shot(tab, "dag_actions")
    tab.submit("document.querySelector('#trigger button').click()")
    run_id = tab.url.rsplit("/", 1)[1]
    assert tab.url == f"{base}/runs/{run_id}" and '"who": "grace"' in tab.text()
    assert cli.json("runs", "show", run_id)["conf"] == {"who": "grace"}

    tab.go(f"{base}/runs/1")
    tab.submit("document.querySelector('a.act').click()")  # the run's actions, from its page
    assert tab.url == f"{base}/runs/1/actions"
    tab.run("document.querySelector('#clear input[name=task][value=b]').checked = true")
    shot(tab, "run_actions")
    tab.submit("document.querySelector('#clear button').click()")  # the preview: what the clear re-runs
    rows = tab.run("[...document.querySelectorAll('#would-clear tbody tr')].map(r => r.innerText.split('\\t'))")
    assert rows == [["b", "success", "scheduled"]], rows
    shot(tab, "clear_preview")
    tab.submit("document.querySelector('#confirm button').click()")
    assert tab.url == f"{base}/runs/1" and "queued" in tab.text()
    assert "cleared 1 task instance(s) (b) of run 1; it is queued" in tab.text()  # says what it did
    cleared = cli.json("events", "--run", "1", "--kind", "tasks_cleared")
    assert cleared[-1]["actor"] == "web:op" and cleared[-1]["details"]["tasks"] == ["b"]

    tab.go(f"{base}/dags/ops/actions")
    tab.run("document.querySelector('#backfill input[name=start]').value = '2024-03-01';"
            "document.querySelector('#backfill input[name=end]').value = '2024-03-04'")
    tab.submit("document.querySelector('#backfill button').click()")
    plan = tab.text()
    assert "backfill plan for ops" in plan and "2 new, 0 override, 2 skip" in plan
    shot(tab, "backfill_plan")
    tab.submit("document.querySelector('#confirm button').click()")
    backfill_id = tab.url.rsplit("/", 1)[1]
    assert tab.url == f"{base}/backfills/{backfill_id}"
    shot(tab, "backfill_created")
    shown = cli.json("backfill", "show", backfill_id)
    assert shown["requested_by"] == "web:op" and len(shown["runs"]) == 2
    mark_from_the_browser(cli, tab, base, run_id)
    see_the_grid_change(cli, tab, base, run_id, [str(r["run_id"]) for r in shown["runs"]])

    # a form whose CSRF field was taken out is refused, and changes nothing
    tab.go(f"{base}/dags/ops/actions")
    tab.submit("document.querySelector('form[action$=\"/pause\"] input[name=csrf]').remove();"
               "document.querySelector('form[action$=\"/pause\"] button').click()")
    assert "403" in tab.text() and "CSRF" in tab.text()
    shot(tab, "csrf_refused")
    assert cli.json("dags", "list")[0]["is_paused"] is False


def mark_from_the_browser(cli: Cli, tab: Tab, base: str, run_id: str) -> None:
    """Task instance a of the triggered run marked success with its downstream task, from the run page's mark
    link through the confirm page that lists what the mark sets."""
    tab.go(f"{base}/runs/{run_id}")
    tab.submit("document.querySelector('a.mark[href$=\"/tasks/a/mark\"]').click()")
    tab.run("document.querySelector('#choose input[name=downstream]').checked = true")
    tab.submit("document.querySelector('#choose button').click()")
    rows = tab.run("[...document.querySelectorAll('#would-set tbody tr')].map(r => r.innerText.split('\\t'))")
    assert rows == [["a", "scheduled", "success"], ["b", "scheduled", "success"]], rows
    shot(tab, "mark_task")
    tab.submit("document.querySelector('#confirm button').click()")
    assert tab.url == f"{base}/runs/{run_id}"
    shown = cli.json("runs", "show", run_id)
    assert shown["state"] == "success" and {ti["state"] for ti in shown["task_instances"]} == {"success"}
    assert cli.json("events", "--run", run_id, "--kind", "tasks_marked")[-1]["actor"] == "web:op"


GRID = """[...document.querySelectorAll('table.grid thead a.run-head')].map((head, i) => [head.textContent,
  head.className.match(/state-(\\S+)/)[1],
  Object.fromEntries([...document.querySelectorAll('table.grid tbody tr')].map(row => {
    const sq = row.querySelectorAll('td.cell')[i].querySelector('a.sq');
    return [row.querySelector('th').textContent, sq ? sq.className.match(/state-(\\S+)/)[1] : null];
  }))])"""


def see_the_grid_change(cli: Cli, tab: Tab, base: str, triggered: str, backfilled: list[str]) -> None:
    """The grid, read from its DOM: a column per run (its id and state) with a square per task (its state);
    the triggered run, run 1 with its cleared task and the backfill's runs are there as the CLI shows them."""
    tab.go(f"{base}/dags/ops/grid")
    shot(tab, "grid_after_actions")
    columns = {run: (state, cells) for run, state, cells in tab.run(GRID)}
    assert {triggered, "1", *backfilled} <= set(columns)
    for run in (triggered, "1", *backfilled):
        shown = cli.json("runs", "show", run)
        by_task = {ti["task_id"]: ti["state"] for ti in shown["task_instances"]}
        assert columns[run] == (shown["state"], {t: by_task.get(t) for t in ("a", "b")}), run
    assert columns["1"][0] == "queued" and columns["1"][1]["a"] == "success" and columns["1"][1]["b"] != "success"


def test_a_viewer_sees_no_action_and_the_write_api_refuses_it(served_ops: tuple[Cli, str], browser: Browser) -> None:
    cli, base = served_ops
    tab = browser.tab()
    sign_in(tab, base, "vi", "/runs/2")
    shot(tab, "viewer_run")
    assert "vi · viewer · read-only" in tab.text()
    assert tab.run("document.querySelectorAll('a.act, form[action^=\"/runs\"]').length") == 0
    status, message = tab.run(
        "fetch('/api/v1/runs/2/cancel', {method: 'POST', headers: {'X-Ledger-CSRF': "
        "document.querySelector('input[name=csrf]').value}})"
        ".then(r => r.json().then(j => [r.status, j.message]))")
    assert status == 403 and "needs the operator role" in message
    assert cli.json("runs", "show", "2")["state"] == "success"


def test_a_foreign_host_header_is_refused(served_ops: tuple[Cli, str]) -> None:
    _cli, base = served_ops
    where = urlsplit(base)
    for host, status in (("attacker.example", 400), (where.netloc, 200), (f"localhost:{where.port}", 200)):
        connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
        connection.request("GET", "/login", headers={"Host": host})
        assert connection.getresponse().status == status, host
        connection.close()


def test_an_admin_sees_connections_and_variables_with_their_secrets_masked(served_ops: tuple[Cli, str],
                                                                         browser: Browser) -> None:
    cli, base = served_ops
    assert cli.run("users", "create", "boss", "--role", "admin", input=PASSWORD + "\n").exit_code == 0
    cli.ok("connections", "add", "warehouse", "--uri", "postgresql://etl:pw-s3cret@db.example:5432/sales")
    cli.ok("variables", "set", "api_token", "tok-s3cret")
    tab = browser.tab()
    sign_in(tab, base, "boss", "/admin/users")
    shot(tab, "admin_users")
    tab.submit("document.querySelector('.admin-nav a[href=\"/admin/connections\"]').click()")
    shot(tab, "admin_connections")
    row = tab.run("[...document.querySelectorAll('#connections tbody tr td')].map(td => td.innerText)")
    assert row[:7] == ["warehouse", "postgresql", "db.example", "5432", "etl", "sales", "***"], row
    tab.go(f"{base}/admin/variables")
    assert "api_token *** " in tab.text() and "s3cret" not in tab.run("document.documentElement.outerHTML")
