"""The views teams expect (issue 41, part 5) as headless Chromium shows them, in light and dark, at full width and
at 390 px: the calendar, the task duration chart and a version's page with its diff on tests/web/conftest.py's `web`
ledger, and the dataset graph on its datasets ledger, each served by a real `ledger webserver`. Their screenshots go
to the folder SHOTS names ($LEDGER_TEST_ARTIFACTS/web/views, default artifacts/web/views); docs/web.md shows them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import Cli
from tests.web.cdp import Browser, Tab
from tests.web.test_browser import ARTIFACTS, chromium_or_skip, fetch, webserver

pytestmark = pytest.mark.browser
SHOTS = ARTIFACTS / "views"


@pytest.fixture(scope="module")
def web_server(ledger_home: Cli) -> Iterator[str]:
    with webserver(ledger_home) as base:
        yield base


@pytest.fixture(scope="module")
def datasets_server(datasets_home: Cli) -> Iterator[str]:
    with webserver(datasets_home) as base:
        yield base


def both_schemes(tab: Tab, name: str) -> None:
    """A screenshot in light, then in dark; the dark page's background is the dark one."""
    tab.screenshot(SHOTS / f"{name}.png")
    tab.dark(True)
    try:
        assert tab.run("getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 29)"
        tab.screenshot(SHOTS / f"{name}_dark.png")
    finally:
        tab.dark(False)


def test_the_calendar_durations_and_versions_as_a_person_sees_them(web_server: str) -> None:
    browser = Browser(chromium_or_skip(), width=1300, height=900)
    try:
        tab = browser.tab()
        tab.go(web_server + "/dags/web/calendar")
        assert tab.run("document.querySelectorAll('a.day').length") == 3  # its three live runs, a day each
        both_schemes(tab, "calendar")
        tab.go(web_server + "/dags/web/durations")
        bars = tab.run("[...document.querySelectorAll('svg.durations rect.bar')].map(r => r.getBBox().height)")
        assert len(bars) == 2 * 3 and all(h >= 2 for h in bars), bars  # its two tasks in its three runs
        both_schemes(tab, "durations")
        versions = [v["version"] for v in json.loads(fetch(web_server + "/api/v1/dags/web/versions")[1])]
        tab.go(f"{web_server}/dags/web/versions/{versions[-1]}")
        assert tab.run("document.querySelector('h1').innerText").startswith("v2 · ")
        assert tab.run("document.querySelectorAll('pre.diff .add').length") > 0
        both_schemes(tab, "version_diff")
    finally:
        browser.close()


def test_the_dataset_graph_as_a_person_sees_it(datasets_server: str) -> None:
    browser = Browser(chromium_or_skip(), width=1600, height=900)
    try:
        tab = browser.tab()
        tab.go(datasets_server + "/datasets")
        boxes = tab.run("[...document.querySelectorAll('svg.dataset-graph g.node')].map(g => g.getBBox().width)")
        assert len(boxes) == 7 and all(w >= 230 for w in boxes)  # 4 DAGs, 3 datasets
        assert tab.run("document.querySelectorAll('svg.dataset-graph path.edge').length") == 6
        both_schemes(tab, "dataset_graph")
        tab.submit("document.querySelector('svg.dataset-graph a[href=\"/datasets/sales_raw\"]')"
                   ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        assert tab.url.endswith("/datasets/sales_raw") and "recorded writes" in tab.text()
        both_schemes(tab, "dataset_page")
    finally:
        browser.close()


@pytest.mark.parametrize("path", ["/dags/web/calendar", "/dags/web/durations", "/datasets"])
def test_the_new_views_at_390_px_do_not_scroll_sideways(web_server: str, datasets_server: str, path: str) -> None:
    browser = Browser(chromium_or_skip(), width=390, height=844)
    try:
        tab = browser.tab()
        tab.go((datasets_server if path.startswith("/datasets") else web_server) + path)
        assert tab.run("document.documentElement.scrollWidth") <= 390
        tab.screenshot(SHOTS / f"narrow_{path.strip('/').replace('/', '_')}.png")
    finally:
        browser.close()
