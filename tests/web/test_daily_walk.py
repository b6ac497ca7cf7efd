"""An operator's day and a viewer's walk in headless Chromium, by clicks only (issue 41, part 7), on a real
`ledger webserver` and a real `ledger scheduler` that runs what the operator asks for.

The operator types one URL (the sign-in page) and then only clicks and fills forms: from the home page's count of
failed runs to yesterday's failed run, its failure reason and its log; a clear of the failed task and its downstream
task with the preview, and the run page turning green without a reload (the run is not re-run until the test has
fixed what made it fail: a file the DAG's task tests); a mark of a task from the grid's detail panel; a trigger with
params where a bad value is refused inline with what was typed kept; a backfill planned in the web view with max
active runs 1, run by the scheduler while the test holds each run's task on a file it controls, never two runs
running at once; its cancel, whose preview says what becomes of each date, after which the second date keeps the
backfill's run (its running try ends, what had not started is skipped: it ran, so the timeline keeps naming its
code there); a pause from the DAG list. The viewer then walks the same pages, is offered no action, is refused each
one, chooses the time zone the pages print in, and the events before and after are equal.

Screenshots of each view in light and dark go to $LEDGER_TEST_ARTIFACTS/web/daily (default artifacts/web/daily);
docs/web.md shows copies of some of them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests import launcher
from tests.conftest import LEDGER, Cli, _clean_env, copy_migrated
from tests.web.cdp import Browser, Tab
from tests.web.conftest import PASSWORD, served
from tests.web.test_browser import ARTIFACTS, chromium_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]  # an operator's whole day: minutes on a busy 2-core host

SHOTS = ARTIFACTS / "daily"
DEADLINE = 90  # seconds a step that waits on the scheduler may take on a loaded machine

DAILY_DAG = """
import pendulum
from ledger import DAG, BashTask
from ledger.sdk.params import Param

with DAG("daily", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 10, tz="UTC"), catchup=False,
         params={"who": Param("world", type="string"), "n": Param(1, type="integer")}):
    extract = BashTask("extract", "echo extracting")
    load = BashTask("load", 'while [ -f "GATES/hold-{{ ds }}" ]; do sleep 0.1; done; '
                            'test -f "GATES/warehouse-up" || { echo "warehouse refused the load" >&2; exit 3; }')
    report = BashTask("report", "echo report")
    extract >> load >> report
"""


def build_daily(home: Path, template: Path) -> Cli:
    """DAG `daily` with three green runs (2024-03-01 to 03) and yesterday's run (03-04) failed at task `load` (the
    warehouse was down), report upstream_failed; users `op` (operator) and `vi` (viewer)."""
    home.mkdir()
    gates = home / "gates"
    gates.mkdir()
    cli = Cli(home=home, env={**_clean_env(home), "LEDGER_POLL_INTERVAL": "0.2", "LEDGER_HEARTBEAT_INTERVAL": "0.5"})
    copy_migrated(template, home / "ledger.db")
    cli.write_dag("daily.py", DAILY_DAG.replace("GATES", str(gates)))
    (gates / "warehouse-up").touch()
    for day in ("2024-03-01", "2024-03-02", "2024-03-03"):
        cli.ok("trigger", "daily", "--logical-date", day)
    cli.ok("scheduler", "--exit-when-idle")
    (gates / "warehouse-up").unlink()
    cli.ok("trigger", "daily", "--logical-date", "2024-03-04")
    cli.ok("scheduler", "--exit-when-idle")
    for user, role in (("op", "operator"), ("vi", "viewer")):
        assert cli.run("users", "create", user, "--role", role, input=PASSWORD + "\n").exit_code == 0
    return cli


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Iterator[tuple[Cli, str]]:
    """The ledger, a real webserver on it and a real scheduler running beside it."""
    cli = build_daily(tmp_path_factory.mktemp("daily-walk") / "home", migrated_sqlite)
    scheduler = launcher.popen([LEDGER, "scheduler"], env=cli.env, cwd=cli.home, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    try:
        with served(cli) as base:
            yield cli, base
    finally:
        for hold in (cli.home / "gates").glob("hold-*"):
            hold.unlink()
        scheduler.terminate()
        scheduler.wait(timeout=60)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser(chromium_or_skip())
    try:
        yield b
    finally:
        b.close()


def views(tab: Tab, name: str) -> None:
    """The page as it is now, in light and in dark."""
    tab.screenshot(SHOTS / f"{name}.png")
    tab.dark(True)
    tab.screenshot(SHOTS / f"{name}_dark.png")
    tab.dark(False)


def click(tab: Tab, selector: str) -> None:
    """Click the element `selector` finds (a link or a button) and wait for the page it leads to."""
    assert tab.run(f"!!document.querySelector({selector!r})"), f"nothing to click: {selector}"
    tab.submit(f"document.querySelector({selector!r}).click()")


def fill(tab: Tab, selector: str, value: str) -> None:
    tab.run(f"document.querySelector({selector!r}).value = {value!r}")


def rows(tab: Tab, selector: str) -> list[list[str]]:
    return list(tab.run(f"[...document.querySelectorAll({selector + ' tbody tr'!r})]"
                        ".map(r => [...r.cells].map(c => c.innerText.trim()))"))


def run_of(cli: Cli, date: str, *, live: bool = True) -> dict[str, Any]:
    found = [r for r in cli.json("timeline", "daily", "--all") if r["logical_date"].startswith(date)
             and (r["state"] != "overridden") == live]
    assert len(found) == 1, found
    run: dict[str, Any] = found[0]
    return run


def test_an_operators_day_by_clicks_only(day: tuple[Cli, str], browser: Browser) -> None:
    cli, base = day
    gates = cli.home / "gates"
    tab = browser.tab()
    tab.go(f"{base}/login?next=/")  # the one URL typed
    fill(tab, "input[name=username]", "op")
    fill(tab, "input[name=password]", PASSWORD)
    click(tab, "#sign-in")
    assert tab.url == base + "/"
    views(tab, "home")

    # yesterday's failed run, from the home page's count of failed runs
    yesterday = run_of(cli, "2024-03-04")
    assert yesterday["state"] == "failed"
    click(tab, "#totals a.count.state-failed")
    assert tab.url == base + "/runs?state=failed"
    views(tab, "runs_failed")
    click(tab, f"table.runs a[href='/runs/{yesterday['run_id']}']")
    views(tab, "run_failed")
    failure = cli.json("events", "--run", str(yesterday["run_id"]), "--kind", "task_failed")[-1]["details"]
    assert rows(tab, "#failures")[0][:3] == ["load", "1", failure["reason"].splitlines()[0]]  # its one-line reason
    click(tab, "#failures a[href$='/log']")
    assert "warehouse refused the load" in tab.run("document.getElementById('log').innerText")
    views(tab, "log")

    # clear with the preview (load and its downstream task), fix the warehouse, watch the run turn green
    click(tab, "a.act.clear")
    tab.run("document.querySelector('#choose input[name=downstream]').checked = true")
    click(tab, "#choose button")
    assert rows(tab, "#would-clear") == [["load", "failed", "scheduled"], ["report", "upstream_failed", "scheduled"]]
    views(tab, "clear_preview")
    (gates / "warehouse-up").touch()  # what the operator fixed before re-running
    click(tab, "#confirm button")
    assert tab.url == f"{base}/runs/{yesterday['run_id']}"
    assert f"cleared 2 task instance(s) (load, report) of run {yesterday['run_id']}" in tab.text()
    tab.run("window.notReloaded = true")
    tab.wait_for("document.querySelector('#live h1 .state').textContent === 'success'", DEADLINE)
    assert tab.run("window.notReloaded") is True  # turned green in place, without a reload
    views(tab, "run_green")

    # mark a task from the grid's detail panel: the report of 03-03 mailed wrong numbers
    marked = run_of(cli, "2024-03-03")
    click(tab, "a[href='/dags/daily/grid']")
    click(tab, f"table.grid a.sq[href*='run={marked['run_id']}&task=report']")
    views(tab, "grid_detail")
    assert tab.run("document.querySelector('#detail h2').innerText").startswith(f"report in run {marked['run_id']}")
    click(tab, "#detail a.act.mark")
    tab.run("document.querySelector('#choose input[value=failed]').checked = true")
    click(tab, "#choose button")
    assert rows(tab, "#would-set") == [["report", "success", "failed"]]
    fill(tab, "#confirm input[name=reason]", "the report mailed wrong numbers")
    click(tab, "#confirm button")
    assert "/dags/daily/grid?" in tab.url and "of run" in tab.text()  # back on the grid, told what was done
    assert cli.json("runs", "show", marked["run_id"])["state"] == "failed"

    # trigger with params: a bad value is said inline, what was typed kept; then the run, run by the scheduler
    click(tab, "a[href='/dags/daily']")
    click(tab, "header a.act")  # the DAG's actions
    fill(tab, "#trigger input[name=logical_date]", "2024-03-05")
    fill(tab, "#trigger input[name='param.who']", "grace")
    fill(tab, "#trigger input[name='param.n']", "many")
    click(tab, "#trigger button")
    assert "n" in tab.run("document.getElementById('problem').innerText")
    assert tab.run("document.querySelector(\"#trigger input[name='param.n']\").value") == "many"
    views(tab, "trigger_refused")
    fill(tab, "#trigger input[name='param.n']", "3")
    click(tab, "#trigger button")
    triggered = tab.url.rsplit("/", 1)[1]
    assert cli.json("runs", "show", triggered)["conf"] == {"who": "grace", "n": 3}
    tab.wait_for("document.querySelector('#live h1 .state').textContent === 'success'", DEADLINE)

    # a backfill of 03-01 and 03-02 planned here with max active runs 1: each run's load held on a file
    for date in ("2024-03-01", "2024-03-02"):
        (gates / f"hold-{date}").touch()
    first_green, second_green = run_of(cli, "2024-03-01"), run_of(cli, "2024-03-02")
    click(tab, "#live h1 a[href='/dags/daily']")
    click(tab, "header a.act")
    fill(tab, "#backfill input[name=start]", "2024-03-01")
    fill(tab, "#backfill input[name=end]", "2024-03-02")
    tab.run("document.querySelector('#backfill select[name=reprocess]').value = 'completed'")
    fill(tab, "#backfill input[name=max_active_runs]", "1")
    click(tab, "#backfill button")
    assert "0 new, 2 override, 0 skip" in tab.text()
    views(tab, "backfill_plan")
    click(tab, "#confirm button")
    backfill = tab.url.rsplit("/", 1)[1]
    running = "[...document.querySelectorAll('table.backfill-runs tbody tr')].map(r => r.cells[2].innerText.trim())"
    states = tab.wait_for(f"(s => s.includes('running') && s)({running})", DEADLINE)
    assert states.count("running") == 1, states  # the second waits
    views(tab, "backfill_one_running")
    (gates / "hold-2024-03-01").unlink()  # the first may finish: then the second runs, alone
    states = tab.wait_for(f"(s => s[0] === 'success' && s[1] === 'running' && s)({running})", DEADLINE)
    ran = cli.json("backfill", "show", backfill)["runs"]
    shown = {r["run_id"]: cli.json("runs", "show", r["run_id"]) for r in ran}
    first, second = sorted(shown.values(), key=lambda r: r["logical_date"])
    assert first["ended_at"] <= second["started_at"], (first, second)  # never two at once

    # cancel: the preview says what becomes of each date; the second run's load runs: its date keeps it
    click(tab, "header a.act")
    fates = rows(tab, "table.cancel-preview")
    assert [f[0][:10] for f in fates] == ["2024-03-01", "2024-03-02"], fates
    assert f"run {second['run_id']} stops and stays, ending as its tasks did: its tries ran" in fates[1][2], fates
    views(tab, "backfill_cancel_preview")
    click(tab, "form[action$='/cancel'] button")
    assert f"cancelled backfill {backfill}" in tab.text()
    # a cancel starts nothing more and lets a running try end: the held load may end now, its report is skipped
    (gates / "hold-2024-03-02").unlink()
    click(tab, "h1 a[href='/dags/daily']")
    ended = f"document.querySelector('tr.live#run-{second['run_id']}')?.cells[3].innerText.trim() === 'failed'"
    tab.wait_for(ended, DEADLINE)  # its load ended, the rest skipped
    views(tab, "timeline_after_cancel")
    assert run_of(cli, "2024-03-02")["run_id"] == second["run_id"] != second_green["run_id"]
    assert run_of(cli, "2024-03-01")["state"] == "success"  # the backfill's finished run stays, green
    assert first_green["run_id"] != run_of(cli, "2024-03-01")["run_id"]

    # pause from the DAG list
    click(tab, "header a.brand")
    click(tab, "form.toggle[action='/dags/daily/pause'] button")
    assert tab.url == base + "/" and "paused daily" in tab.text()
    assert cli.json("dags", "list")[0]["is_paused"] is True
    views(tab, "home_paused")


ACTIONS = """(async () => {
  const csrf = document.querySelector('input[name=csrf]').value;
  const out = {};
  for (const path of PATHS) {
    const r = await fetch(path, {method: 'POST', body: new URLSearchParams({csrf, state: 'success', 'task.load': 'on'}),
                                 redirect: 'manual'});
    out[path] = r.status;
  }
  return out;
})()"""


def test_a_viewer_walks_the_same_pages_is_offered_nothing_and_changes_nothing(day: tuple[Cli, str],
                                                                             browser: Browser) -> None:
    cli, base = day
    before = cli.json("events", "--limit", "100000")
    run_id = cli.json("runs", "list", "--state", "failed", "--dag", "daily")[0]["run_id"]  # a live failed run
    tab = browser.tab()
    tab.go(f"{base}/login?next=/")
    fill(tab, "input[name=username]", "vi")
    fill(tab, "input[name=password]", PASSWORD)
    click(tab, "#sign-in")
    # the viewer's own choices (log out, the time zone pages print in: decision 0276) are not actions on the ledger
    none = ("document.querySelectorAll('a.act, form[method=post]:not([action=\"/logout\"])"
            ":not([action=\"/timezone\"])').length")
    assert tab.run(none) == 0 and "vi · viewer · read-only" in tab.text()
    views(tab, "viewer_home")
    click(tab, "#totals a.count.state-failed")
    click(tab, f"table.runs a[href='/runs/{run_id}']")
    assert tab.run(none) == 0
    views(tab, "viewer_run")
    click(tab, "a[href='/dags/daily/grid']")
    # `load` ran in every failed run, whichever order this module's tests ran in (a worker of its own builds the
    # day afresh: 03-04's load failed, its report never ran; after the operator's walk, 03-03's load succeeded)
    click(tab, f"table.grid a.sq[href*='run={run_id}&task=load']")
    assert "load in run" in tab.text() and tab.run(none) == 0
    views(tab, "viewer_grid_detail")
    click(tab, "#detail a.log")
    assert tab.run(none) == 0
    backfills = [b["backfill_id"] for b in cli.json("backfill", "list")]  # the operator's, when it walked first
    paths = ["/dags/daily/trigger", "/dags/daily/pause", "/dags/daily/unpause", "/dags/daily/backfill/plan",
             f"/runs/{run_id}/clear", f"/runs/{run_id}/tasks/load/mark", f"/runs/{run_id}/mark",
             f"/runs/{run_id}/cancel", *(f"/backfills/{b}/{act}" for b in backfills for act in ("cancel", "resume"))]
    refused = tab.run(ACTIONS.replace("PATHS", repr(paths)))
    assert refused == {p: 403 for p in paths}, refused
    # the viewer's own time zone (decision 0276), chosen from the list: the calendar counts days in it, every page
    # keeps it, and the ledger is not changed by it
    tab.go(f"{base}/dags/daily/grid")
    click(tab, "#tz-form a[href^='/timezone']")
    fill(tab, "form.filter select[name=zone]", "America/New_York")
    click(tab, "form.filter button")
    assert tab.url.endswith("/dags/daily/grid"), tab.url
    assert tab.run("document.querySelector('#tz-zone').value") == "America/New_York"
    assert "00:00:00-05:00" not in tab.text() and "19:00:00-05:00" in tab.text()  # the runs' midnights in UTC
    click(tab, "a[href='/dags/daily/calendar']")
    views(tab, "viewer_calendar_new_york")
    assert "days in America/New_York" in tab.text()
    assert calendar_days(tab) == run_days(cli, "America/New_York") != run_days(cli, "UTC")
    fill(tab, "#tz-zone", "dag")
    click(tab, "#tz-form button")
    assert "days in UTC" in tab.text() and calendar_days(tab) == run_days(cli, "UTC")
    assert cli.json("events", "--limit", "100000") == before


def calendar_days(tab: Tab) -> set[str]:
    """The days the calendar page shows a run on (each linked day's title starts with its date)."""
    return set(tab.run("[...document.querySelectorAll('.calendar a.day')].map(a => a.title.split(':')[0])"))


def run_days(cli: Cli, zone: str) -> set[str]:
    """The days of DAG daily's live runs' logical dates in `zone`."""
    return {datetime.fromisoformat(r["logical_date"]).astimezone(ZoneInfo(zone)).date().isoformat()
            for r in cli.json("timeline", "daily")}
