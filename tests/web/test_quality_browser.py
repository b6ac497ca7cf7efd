"""Quality in Chromium (issue 41, part 6). Swagger UI renders the API's OpenAPI document (3.1, as FastAPI writes
it): its operations appear on the page, from assets the server serves itself (no network at runtime); a screenshot
goes to $LEDGER_TEST_ARTIFACTS/web/swagger.png. At 390 px (a phone) no page scrolls sideways: its tables scroll in
their box and the nav stays one row; screenshots in light and dark (narrow_*.png)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Cli
from tests.web.cdp import Browser
from tests.web.test_browser import ARTIFACTS, chromium_or_skip, webserver

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(ledger_home: Cli) -> Iterator[str]:
    with webserver(ledger_home) as base:
        yield base


def test_swagger_ui_shows_the_apis_operations_in_chromium(server: str) -> None:
    browser = Browser(chromium_or_skip())
    try:
        tab = browser.tab()
        tab.go(server + "/api/docs")
        tab.wait_for("document.querySelectorAll('.opblock').length > 10")  # rendered, not only served
        paths = tab.run("[...document.querySelectorAll('.opblock-summary-path')]"
                        ".map(e => e.innerText.replace(/\\u200b/g, '').trim())")
        assert "/api/v1/dags" in paths and "/api/v1/runs/{run_id}" in paths, paths
        assert "Unable to render this definition" not in tab.text()
        assert tab.run("document.querySelector('.info .title').innerText").startswith("ledger")
        tab.screenshot(ARTIFACTS / "swagger.png")
    finally:
        browser.close()


@pytest.mark.parametrize("path", ["/", "/dags/web", "/runs/4", "/events", "/dags/web/grid"])
def test_a_page_at_390_px_keeps_its_tables_in_their_box_and_the_nav_on_one_row(server: str, path: str) -> None:
    browser = Browser(chromium_or_skip(), width=390, height=844)
    try:
        tab = browser.tab()
        tab.go(server + path)
        # the page itself does not scroll sideways: wide tables scroll inside their own box
        assert tab.run("document.documentElement.scrollWidth") <= 390
        nav = tab.run("(() => { const r = document.querySelector('header nav').getBoundingClientRect();"
                      " return [r.right, r.height]; })()")
        assert nav[0] <= 390 and nav[1] < 40, nav  # one row within the screen
        name = "narrow_" + (path.strip("/").replace("/", "_") or "home")
        tab.screenshot(ARTIFACTS / f"{name}.png")
        tab.dark(True)
        tab.screenshot(ARTIFACTS / f"{name}_dark.png")
    finally:
        browser.close()
