"""The HTML pages: what they show, what they escape, and the live part the timeline and backfill pages refresh."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import EVIL


def page(client: TestClient, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def text_of(markup: str) -> str:
    """The page as a person reads it: tags dropped, entities decoded, blanks collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_the_timeline_shows_overridden_runs_beside_their_replacement_and_the_version_change(
        client: TestClient) -> None:
    runs = client.get("/api/v1/dags/web/timeline").json()
    by_date: dict[str, list[str]] = {}
    for r in runs:
        by_date.setdefault(r["logical_date"], []).append(r["run_id"])
    markup = page(client, "/dags/web")
    order = re.findall(r'<tr class="(live|overridden)[^"]*" id="run-(\d+)"', markup)
    # newest date first; at each date the live run, then the runs it replaced
    expected = []
    for date in sorted(by_date, reverse=True):
        ids = by_date[date]
        live = [i for i in ids if next(r for r in runs if r["run_id"] == i)["state"] != "overridden"]
        expected += [("live", i) for i in live] + [("overridden", i) for i in ids if i not in live]
    assert order == expected
    shown = text_of(markup)
    old, new = (v["version"][:8] for v in client.get("/api/v1/dags/web/versions").json())
    assert f"◆ version {old} → {new}" in shown
    assert "overridden by run 4" in shown and "replaced run 2 (scheduled" in shown
    assert "backfills on this page: backfill 1 (1 live)" in shown
    assert markup.count('class="bar state-') == len(runs)  # every run drawn on the strip
    # the runs of each backfill grouped on the strip by one bracket that links the backfill
    assert re.findall(r'<a href="/backfills/(\d+)"><rect class="backfill-span"', markup) == ["1"]


def timeline_pages(client: TestClient, limit: int) -> list[list[str]]:
    """The run ids of each page of the web timeline, following its `older` links."""
    pages, url = [], f"/dags/web?limit={limit}"
    while url:
        markup = page(client, url)
        pages.append(re.findall(r'id="run-(\d+)"', markup))
        following = re.search(r'href="([^"]+)" rel="next"', markup)
        url = html.unescape(following.group(1)) if following else ""
    return pages


def test_the_timeline_pages_with_a_cursor_and_filters_by_date(client: TestClient) -> None:
    assert timeline_pages(client, 2) == [["5", "3"], ["4", "2"], ["1"]]
    # a page does not end between a live run and the runs it replaced (5 runs on 3 dates, newest first)
    assert timeline_pages(client, 3) == [["5", "3"], ["4", "2", "1"]]
    assert timeline_pages(client, 1) == [["5"], ["3"], ["4"], ["2"], ["1"]]  # unless one run fills a page
    only = re.findall(r'id="run-(\d+)"', page(client, "/dags/web?start=2024-03-01&end=2024-03-01"))
    assert only == ["1"]


def test_a_run_page_shows_its_graph_tries_versions_writes_and_what_it_replaced(client: TestClient) -> None:
    shown = text_of(page(client, "/runs/4"))
    assert "graph of version" in shown and "replaced run 2 (scheduled" in shown
    assert "flaky success 1/2 failed" in shown and "flaky success 2/2 success" in shown
    assert "sales_clean 2024-03-02 write 1 (success) 11" in shown
    assert "replaced by run 4" in text_of(page(client, "/runs/2"))


def test_a_version_page_shows_its_source_and_the_diff_against_the_version_before(client: TestClient) -> None:
    old, new = (v["version"] for v in client.get("/api/v1/dags/web/versions").json())
    shown = text_of(page(client, f"/dags/web/versions/{new}"))
    assert 'rows=11' in shown and "diff against the version before" in shown
    assert re.search(r'<span class="add">\+ +context\.record_write', page(client, f"/dags/web/versions/{new}"))
    assert "the first version of web" in text_of(page(client, f"/dags/web/versions/{old}"))


@pytest.mark.parametrize("path", ["/", "/dags/web", "/runs/1", "/runs/1/tasks/write/tries/1/log",
                                  "/dags/web/versions/{v}", "/lineage", "/lineage/sales_clean", "/backfills",
                                  "/backfills/1", "/events", "/events?dag=web&kind=run_overridden", "/signals",
                                  "/signals?key=web.ready"])
def test_every_page_renders(client: TestClient, path: str) -> None:
    version = client.get("/api/v1/dags/web/versions").json()[0]["version"]
    markup = page(client, path.format(v=version))
    assert "<nav>" in markup
    assert client.get(path.format(v=version)).headers["content-security-policy"].startswith("default-src 'self'")


def test_what_users_control_is_escaped(client: TestClient) -> None:
    conf_run = client.get("/api/v1/dags/web/timeline").json()[-1]["run_id"]  # the manual run, with the conf
    assert EVIL in str(client.get(f"/api/v1/runs/{conf_run}").json()["conf"])
    pages = {
        "conf": page(client, f"/runs/{conf_run}"),
        "log": page(client, "/runs/1/tasks/write/tries/1/log"),
        "source": page(client, "/dags/web/versions/" + client.get("/api/v1/dags").json()[0]["version"]),
        "signal": page(client, "/signals?key=web.ready"),
        "events": page(client, "/events?kind=signal_sent"),
    }
    for name, markup in pages.items():
        assert "<script>alert" not in markup and "<img src=x" not in markup, name
        assert "&lt;script&gt;alert(" in markup and "&lt;img src=x onerror=alert(1)&gt;" in markup, name
        assert re.findall(r"<script[^>]*>", markup) == ['<script src="/static/live.js" defer>'], name


def test_the_live_part_of_a_page_comes_alone_when_the_script_asks(client: TestClient) -> None:
    for path, words in (("/dags/web", "overridden by"), ("/backfills", "runs done"), ("/backfills/1", "runs done"),
                        ("/", "runs by state"), ("/runs/1", "task instances and tries")):
        whole = page(client, path)
        assert 'data-live="2000"' in whole
        part = client.get(path, headers={"X-Ledger-Live": "1"}).text
        assert "<html" not in part and words in part and part.strip() in whole
    script = client.get("/static/live.js").text
    assert "X-Ledger-Live" in script and "2000" in script


def test_the_live_part_of_the_timeline_follows_a_run_written_after_the_server_started(
        ledger_home: Cli, tmp_path: Path) -> None:
    home = tmp_path / "home"  # a copy: the other tests read the shared ledger as it was built
    shutil.copytree(ledger_home.home, home)
    cli = Cli(home=home, env={**ledger_home.env, "LEDGER_HOME": str(home)})
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(home)})), base_url="http://localhost") as c:
        before = c.get("/dags/web", headers={"X-Ledger-Live": "1"}).text
        cli.ok("trigger", "web", "--logical-date", "2024-03-01", "--replace")
        after = c.get("/dags/web", headers={"X-Ledger-Live": "1"}).text
    assert "run 6" not in text_of(before)
    assert "overridden by run 6" in text_of(after) and "replaced run 1 (scheduled" in text_of(after)


def test_the_run_page_and_the_home_follow_a_clear_made_after_they_were_loaded(ledger_home: Cli, tmp_path: Path) -> None:
    home = tmp_path / "home"  # a copy: the other tests read the shared ledger as it was built
    shutil.copytree(ledger_home.home, home)
    cli = Cli(home=home, env={**ledger_home.env, "LEDGER_HOME": str(home)})
    run = [r for r in cli.json("timeline", "web") if r["state"] == "success"][-1]["run_id"]
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(home)})), base_url="http://localhost") as c:
        run_before = c.get(f"/runs/{run}", headers={"X-Ledger-Live": "1"}).text
        home_before = c.get("/", headers={"X-Ledger-Live": "1"}).text
        cli.ok("tasks", "clear", "web", run, "-t", "flaky")
        run_after = c.get(f"/runs/{run}", headers={"X-Ledger-Live": "1"}).text
        home_after = c.get("/", headers={"X-Ledger-Live": "1"}).text
    assert f"run {run} of web success" in text_of(run_before) and f"run {run} of web queued" in text_of(run_after)
    queued = [re.search(r"queued (\d+)", text_of(markup)) for markup in (home_before, home_after)]
    assert [int(m.group(1)) if m else 0 for m in queued] == [1, 2]  # the home's counts: one more queued run


def test_page_errors_are_pages_with_the_status(client: TestClient) -> None:
    response = client.get("/runs/999")
    assert response.status_code == 404 and "no DAG run" in response.text and "<nav>" in response.text
    assert client.get("/dags/web?start=nonsense").status_code == 400
