"""The calendar of a DAG's runs by day (issue 41, part 5): in process on tests/web/conftest.py's ledgers (DAG `web`,
three daily runs in March 2024, UTC; DAG `berlin`, two runs at 06:00 Europe/Berlin), and its pure rule."""

from __future__ import annotations

import re
from datetime import date

from fastapi.testclient import TestClient

from ledger.web.views import calendar
from tests.conftest import Cli
from tests.web.test_pages import text_of


def days(markup: str) -> dict[str, tuple[str, str]]:
    """Title date -> (state, href) of each day with runs."""
    return {d: (s, h) for s, h, d in re.findall(
        r'<a class="day state-(\w+)" href="([^"]+)" title="(\d{4}-\d\d-\d\d):', markup)}


def test_the_calendar_shows_each_day_in_its_runs_state_and_links_its_run(client: TestClient, ledger_home: Cli) -> None:
    page = client.get("/dags/web/calendar")
    assert page.status_code == 200 and "calendar of web: 2024" in text_of(page.text)  # the year of its last run
    live = {r["logical_date"][:10]: (r["state"], f"/runs/{r['run_id']}") for r in ledger_home.json("timeline", "web")
            if r["state"] != "overridden"}
    assert days(page.text) == live and sorted(live) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert page.text.count('<table class="month">') == 12 and '<span class="day" title="2024-03-04: no run">' \
        in page.text
    assert days(client.get("/dags/web/calendar", params={"year": 2023}).text) == {}
    assert client.get("/dags/web/calendar", params={"year": 0}).status_code == 400
    assert client.get("/dags/nope/calendar").status_code == 404


def test_a_days_runs_are_counted_in_the_dags_time_zone(views_client: TestClient) -> None:
    shown = days(views_client.get("/dags/berlin/calendar", params={"year": 2024}).text)
    assert sorted(shown) == ["2024-03-01", "2024-03-02"]  # 06:00 in Berlin: 05:00 UTC, the same day


def test_a_day_shows_its_most_urgent_state_and_links_the_timeline_of_that_day() -> None:
    months = calendar(2024, {date(2024, 2, 29): [("success", 7), ("failed", 8)], date(2024, 3, 1): [("running", 9)]},
                      "d")
    february, march = months[1], months[2]
    assert [d.day.day if d else None for d in february.weeks[0]] == [None, None, None, 1, 2, 3, 4]  # Thursday
    leap = february.weeks[-1][3]
    assert leap is not None and (leap.day, leap.state, leap.runs) == (date(2024, 2, 29), "failed", 2)
    assert leap.href == "/dags/d?start=2024-02-29&end=2024-02-29"
    first = march.weeks[0][4]
    assert first is not None and (first.state, first.href) == ("running", "/runs/9")


def test_a_year_beyond_what_dates_allow_is_refused_in_one_line(views_client: TestClient) -> None:
    """Year 1 in Europe/Berlin starts before year 1 in UTC, which no date can hold: the years a typed date may name
    (1000 to 9000) are the calendar's, and the others a 400 with one line, not a server error."""
    for year in (1, 999, 9001):
        page = views_client.get("/dags/berlin/calendar", params={"year": year})
        assert page.status_code == 400
        assert re.findall(r'<p class="error">([^<]*)</p>', page.text) == [
            f"year {year} is out of range; give a year between 1000 and 9000"]
    for year in (1000, 9000):
        page = views_client.get("/dags/berlin/calendar", params={"year": year})
        assert page.status_code == 200 and f"calendar of berlin: {year}" in text_of(page.text)
