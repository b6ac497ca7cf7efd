"""The grid, graph, Gantt and log pages in headless Chromium (driven over the DevTools pipe: tests/web/cdp.py),
served by a real `ledger webserver` on the ledger of tests/web/conftest.py build_views: what a person sees
(edges drawn, boxes coloured, ANSI colours, the time zone chosen, dark mode) and a running try's log followed as
it grows. Screenshots go to $LEDGER_TEST_ARTIFACTS/web (default artifacts/web); docs/web.md shows them."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests import launcher
from tests.conftest import LEDGER, Cli
from tests.web.cdp import Browser, Tab
from tests.web.test_browser import ARTIFACTS, chromium_or_skip, fetch, webserver

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def views_server(views_home: Cli) -> Iterator[str]:
    with webserver(views_home) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Tab]:
    b = Browser(chromium_or_skip())
    try:
        yield b.tab()
    finally:
        b.close()


def computed(b: Tab, selector: str, prop: str) -> str:
    return str(b.run(f"getComputedStyle(document.querySelector({json.dumps(selector)}))[{json.dumps(prop)}]"))


def test_the_grid_graph_gantt_and_log_as_a_person_sees_them(views_server: str, browser: Tab) -> None:
    b = browser
    b.go(views_server + "/")
    assert "overridden 2 success 2" in b.text()
    b.screenshot(ARTIFACTS / "home_counts.png")
    b.go(views_server + "/backfills/1")
    assert b.run("[document.querySelector('progress').max, document.querySelector('progress').value]") == [2, 2]
    b.screenshot(ARTIFACTS / "backfill_page.png")
    b.go(views_server + "/dags/berlin/grid")
    assert b.run("document.querySelectorAll('a.sq:not(.group-sq)').length") == 4 * 2  # 4 tasks x 2 live runs
    assert computed(b, "a.sq.state-success", "backgroundColor") == "rgb(82, 183, 136)"
    assert b.run("document.querySelectorAll('a.replaced-mark').length") == 2
    b.screenshot(ARTIFACTS / "grid.png")

    b.go(views_server + "/runs/3")
    assert b.run("document.querySelectorAll('svg.dag-graph path.edge').length") == 3
    # each box filled in its state's colour (the old rule order left every box white)
    fills = b.run("[...document.querySelectorAll('svg.dag-graph g.node rect')].map(r => getComputedStyle(r).fill)")
    assert fills == ["rgb(216, 243, 220)"] * 4
    box = b.run("(() => { const r = document.querySelector('svg.dag-graph rect.group-box').getBBox();"
               " return [r.width, r.height]; })()")
    assert box[0] > 2 * 180 and box[1] > 44  # the load group's box around its two tasks
    b.screenshot(ARTIFACTS / "graph.png")

    b.go(views_server + "/runs/3/gantt")
    widths = b.run("[...document.querySelectorAll('svg.gantt rect.bar')].map(r => r.getBBox().width)")
    assert len(widths) == 5 and all(w >= 2 for w in widths)
    assert computed(b, "svg.gantt rect.bar", "fill") == "rgb(82, 183, 136)"
    b.screenshot(ARTIFACTS / "gantt.png")

    b.go(views_server + "/runs/3/tasks/colours/tries/1/log")
    assert b.run("document.querySelector('#log .ansi-fg-1').textContent") == "red alert"
    assert computed(b, "#log .ansi-fg-1", "color") == "rgb(196, 38, 46)"
    assert computed(b, "#log .ansi-bold", "fontWeight") == "700"
    lines = str(b.run("document.getElementById('log').innerText")).splitlines()
    assert "red alert plain bold green <b>x</b>" in lines and not any("\x1b" in line for line in lines)
    b.screenshot(ARTIFACTS / "log.png")


def pick_zone(b: Tab, value: str) -> None:
    """Choose in the header's zone list as a person does: the choice is sent as soon as it is made."""
    b.submit(f"(() => {{ const s = document.getElementById('tz-zone'); s.value = {json.dumps(value)}; "
             "s.dispatchEvent(new Event('change')); })()")


def test_times_switch_between_the_dags_zone_utc_and_the_browsers_own_and_the_choice_is_kept(
        views_server: str, browser: Tab) -> None:
    b = browser
    b.browser.call("Emulation.setTimezoneOverride", b.session, timezoneId="America/New_York")
    try:
        b.go(views_server + "/runs/3")
        shown = b.text()
        assert "logical date 2024-03-01 06:00:00+01:00" in shown and "05:00:00Z" not in shown
        assert b.run("document.getElementById('tz-mine').textContent") == "my time zone (America/New_York)"
        pick_zone(b, "utc")
        shown = b.text()
        assert b.url.endswith("/runs/3") and "logical date 2024-03-01 05:00:00Z" in shown and "+01:00" not in shown
        b.go(views_server + "/dags/berlin/grid")  # another page: still UTC
        assert "2024-03-01 05:00:00Z" in b.run("document.querySelector('table.grid .dates').innerText")
        pick_zone(b, "mine")  # the zone the browser says
        assert b.url.endswith("/dags/berlin/grid")
        assert "2024-03-01 00:00:00-05:00" in b.run("document.querySelector('table.grid .dates').innerText")
        b.go(views_server + "/runs/3")
        assert "logical date 2024-03-01 00:00:00-05:00" in b.text()
    finally:
        pick_zone(b, "dag")
        b.browser.call("Emulation.setTimezoneOverride", b.session, timezoneId="")
    assert "logical date 2024-03-01 06:00:00+01:00" in b.text()


def test_dark_mode_follows_the_browsers_preference(views_server: str, browser: Tab) -> None:
    b = browser
    b.dark(True)
    try:
        b.go(views_server + "/runs/3")
        assert computed(b, "body", "backgroundColor") == "rgb(20, 23, 29)"
        assert computed(b, "svg.dag-graph g.node.state-success rect", "fill") == "rgb(31, 77, 51)"
        b.screenshot(ARTIFACTS / "dark.png")
    finally:
        b.dark(False)
    b.go(views_server + "/runs/3")
    assert computed(b, "body", "backgroundColor") == "rgb(250, 251, 252)"


def test_a_running_trys_log_is_followed_until_the_try_ends(views_server: str, views_home: Cli,
                                                           browser: Tab) -> None:
    b = browser
    created = re.search(r"created manual run (\d+) of slow", views_home.ok("trigger", "slow"))
    assert created is not None
    run_id = created.group(1)
    scheduler = launcher.popen([LEDGER, "scheduler", "--exit-when-idle"], env=views_home.env, cwd=views_home.home,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        api = f"{views_server}/api/v1/runs/{run_id}/tasks/tick/tries/1/log"
        deadline = time.monotonic() + 120
        while True:  # the try has started and written its first ticks
            status, body = fetch(api)
            if status == 200 and "tick 2\n" in json.loads(body)["text"]:
                break
            assert time.monotonic() < deadline and scheduler.poll() is None, body
            time.sleep(0.1)
        b.go(f"{views_server}/runs/{run_id}/tasks/tick/tries/1/log")
        assert b.run("document.getElementById('log').hasAttribute('data-follow')")
        first = b.run("document.getElementById('log').textContent.split('tick ').length - 1")
        assert first < 20
        b.wait_for(f"document.getElementById('log').textContent.split('tick ').length - 1 > {first}", timeout=30)
        b.wait_for("document.querySelector('.following').textContent === 'the try has ended'", timeout=60)
        # the file is rewritten as the try ends, the secret it read masked: the page shows it as it is then
        b.wait_for("document.getElementById('log').textContent.includes('token ***')", timeout=30)
        text = str(b.run("document.getElementById('log').textContent"))
        assert [line for line in text.splitlines() if line.startswith("tick ")] == [f"tick {i}" for i in
                                                                                   range(1, 21)]
        assert "outcome: success" in text and "s3cr3t-value" not in text
        size = len((views_home.home / "logs" / "slow" / f"run_{run_id}" / "tick" / "try_1.log").read_bytes())
        assert f"to {size} of {size}" in b.text()
        b.screenshot(ARTIFACTS / "log_follow.png")
    finally:
        scheduler.wait(timeout=120)
