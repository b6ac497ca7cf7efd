"""The viewer's own time zone (issue 41, part 5): beside each DAG's zone and UTC, kept in a cookie, one format per
page, applied to every date the pages print. In process on tests/web/conftest.py's views ledger (DAG `berlin`, its
live runs 3 and 4 at 06:00 Europe/Berlin, 05:00 UTC, on 2024-03-01 and 02), with a client of its own (its cookies are
not the shared client's)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from ledger.web.render import zone_choice
from tests.conftest import Cli
from tests.web.conftest import app_client
from tests.web.test_actions import signed_in
from tests.web.test_pages import text_of


@pytest.fixture
def web(views_home: Cli) -> Iterator[TestClient]:
    yield from app_client(views_home)


def choose(web: TestClient, zone: str, back: str = "/runs/3", **extra: str) -> object:
    web.get("/")  # the CSRF cookie
    return web.post("/timezone", data={"zone": zone, "to": back, "csrf": web.cookies["ledger_csrf"], **extra},
                    follow_redirects=False)


def times(markup: str) -> list[str]:
    return re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)", text_of(markup))


def test_times_are_in_the_dags_zone_by_default_one_format_per_page(web: TestClient) -> None:
    run = web.get("/runs/3").text
    assert "logical date 2024-03-01 06:00:00+01:00" in text_of(run)
    assert times(run) and all(t.endswith("+01:00") for t in times(run))  # no UTC copy beside them
    assert all(t.endswith("Z") for t in times(web.get("/events").text))  # times of no one DAG: UTC


def test_utc_then_the_viewers_own_zone_apply_to_every_date_a_page_prints(web: TestClient) -> None:
    chosen = choose(web, "utc")
    assert chosen.status_code == 303 and chosen.headers["location"] == "/runs/3"  # type: ignore[attr-defined]
    assert web.cookies["ledger_tz"] == "utc"
    run = web.get("/runs/3").text
    assert "logical date 2024-03-01 05:00:00Z" in text_of(run) and all(t.endswith("Z") for t in times(run))
    choose(web, "mine", browser="America/New_York")  # the zone static/live.js reads from the browser
    assert web.cookies["ledger_tz"].strip('"') == "America/New_York"  # quoted: it holds a slash
    for path in ("/runs/3", "/dags/berlin", "/dags/berlin/grid", "/", "/events", "/backfills/1"):
        shown = times(web.get(path).text)
        assert shown and all(t.endswith("-05:00") for t in shown), (path, shown)
    assert "logical date 2024-03-01 00:00:00-05:00" in text_of(web.get("/runs/3").text)
    assert '<option value="America/New_York" selected>' in web.get("/").text
    choose(web, "dag")
    assert "logical date 2024-03-01 06:00:00+01:00" in text_of(web.get("/runs/3").text)


def test_the_calendar_counts_days_in_the_zone_shown(web: TestClient) -> None:
    days = re.compile(r'<a class="day state-\w+" href="[^"]+" title="(\d{4}-\d\d-\d\d):')
    assert days.findall(web.get("/dags/berlin/calendar?year=2024").text) == ["2024-03-01", "2024-03-02"]
    choose(web, "Pacific/Honolulu")  # 05:00 UTC is 19:00 the day before
    page = web.get("/dags/berlin/calendar?year=2024").text
    assert days.findall(page) == ["2024-02-29", "2024-03-01"] and "days in Pacific/Honolulu" in text_of(page)


def test_a_zone_is_chosen_from_the_list_when_the_browser_says_none(web: TestClient) -> None:
    listed = web.get("/timezone", params={"to": "/dags/berlin"})
    assert listed.status_code == 200 and '<option value="Asia/Tokyo">' in listed.text
    assert '<input type="hidden" name="to" value="/dags/berlin">' in listed.text
    none_said = choose(web, "mine", browser="")
    assert none_said.status_code == 400  # type: ignore[attr-defined]
    assert "did not say its time zone: choose one from the list at /timezone" in none_said.text  # type: ignore


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "", "Europe/Berlin\nx"])
def test_an_unknown_zone_is_refused_and_changes_nothing(web: TestClient, zone: str) -> None:
    answer = choose(web, zone)
    assert answer.status_code == 400 and "unknown time zone" in answer.text  # type: ignore[attr-defined]
    assert "ledger_tz" not in web.cookies


def test_the_form_needs_its_csrf_value_and_goes_back_only_to_a_page_here(web: TestClient) -> None:
    web.get("/")
    assert web.post("/timezone", data={"zone": "utc", "csrf": "forged"}).status_code == 403
    away = web.post("/timezone", data={"zone": "utc", "to": "//evil.example/x", "csrf": web.cookies["ledger_csrf"]},
                    follow_redirects=False)
    assert away.status_code == 303 and away.headers["location"] == "/"


def test_a_forged_cookie_shows_each_dags_zone() -> None:
    assert [zone_choice(v) for v in ("utc", "dag", "Asia/Tokyo", "../x", "", None, "UTC; x")] == [
        "utc", "dag", "Asia/Tokyo", "dag", "dag", "dag", "dag"]


def test_a_viewer_may_choose_its_zone(ops_home: Cli) -> None:
    for web in app_client(ops_home):
        signed_in(web, "vi")
        answer = web.post("/timezone", data={"zone": "utc", "to": "/", "csrf": web.cookies["ledger_csrf"]},
                          follow_redirects=False)
        assert answer.status_code == 303 and web.cookies["ledger_tz"] == "utc"
