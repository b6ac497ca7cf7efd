""""The newest N" is the newest everywhere (`ledger events --limit`, /api/v1/events, the events and signals pages),
older pages follow by keyset (before=ID), and the task state signals the scheduler sends as tries change are
hidden on the pages unless asked for. The ledger is tests/web/conftest.py's, built with the real `ledger`."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import Cli


def event_ids(html: str) -> list[int]:
    """The event ids in an events page's table, top to bottom."""
    return [int(i) for i in re.findall(r"<tr><td>(\d+)</td>", html)]


def all_events(cli: Cli) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = cli.json("events", "--json")
    return rows


def test_ledger_events_limit_lists_the_newest_events(ledger_home: Cli) -> None:
    ids = [e["id"] for e in all_events(ledger_home) if e["id"] is not None]
    assert len(ids) > 6
    newest = ledger_home.json("events", "--limit", "3", "--no-task-signals", "--json")
    assert [e["id"] for e in newest] == sorted(ids)[-3:]
    created = [e["id"] for e in all_events(ledger_home) if e["kind"] == "run_created"]
    assert [e["id"] for e in ledger_home.json("events", "--kind", "run_created", "--limit", "2", "--json")] \
        == created[-2:]


def test_ledger_events_pages_back_with_before_through_every_event_and_signal_once(ledger_home: Cli) -> None:
    everything = all_events(ledger_home)
    assert any(e["id"] is None for e in everything), "the ledger has task state signals to page through"
    seen: list[dict[str, Any]] = []
    before: list[str] = []
    before_signal: list[str] = []
    while True:
        page = ledger_home.json("events", "--limit", "7", *before, *before_signal, "--json")
        seen = page + seen
        if len(page) < 7:
            break
        events = [e["id"] for e in page if e["id"] is not None]
        signals = [e["details"]["signal_id"] for e in page if e["id"] is None]
        before = ["--before", str(min(events))] if events else before
        before_signal = ["--before-signal", str(min(signals))] if signals else before_signal
    assert seen == everything


def test_the_api_lists_the_newest_events_and_links_the_older_page(client: TestClient) -> None:
    everything = client.get("/api/v1/events", params={"limit": 10_000, "task_signals": False}).json()
    first = client.get("/api/v1/events", params={"kind": "run_created", "limit": 2, "task_signals": False})
    created = [e["id"] for e in everything if e["kind"] == "run_created"]
    assert [e["id"] for e in first.json()] == created[-2:]
    older = client.get(first.links["next"]["url"])
    assert [e["id"] for e in older.json()] == created[-4:-2]
    walked: list[dict[str, Any]] = []
    answer = client.get("/api/v1/events", params={"limit": 5})
    while True:
        walked = answer.json() + walked
        if "next" not in answer.links:
            break
        answer = client.get(answer.links["next"]["url"])
    assert walked == client.get("/api/v1/events", params={"limit": 10_000}).json()


def test_the_events_page_shows_the_newest_first_and_pages_back(client: TestClient) -> None:
    everything = client.get("/api/v1/events", params={"limit": 10_000, "task_signals": False}).json()
    created = [e["id"] for e in everything if e["kind"] == "run_created"]
    page = client.get("/events", params={"kind": "run_created", "limit": 3})
    assert page.status_code == 200
    assert event_ids(page.text) == created[::-1][:3]
    older = re.search(r'<a href="([^"]+)" rel="next">older', page.text)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&"))
    assert event_ids(second.text) == created[::-1][3:6]
    assert "« newest" in second.text
    assert event_ids(client.get("/events").text)[0] == everything[-1]["id"]


def test_the_events_page_hides_task_state_signals_unless_asked(client: TestClient) -> None:
    assert "task_state_signal" not in client.get("/events").text
    shown = client.get("/events", params={"task_signals": "true"}).text
    assert "task_state_signal" in shown
    assert 'name="task_signals" value="true" checked' in shown


def test_the_signals_page_hides_task_state_signals_and_shows_the_newest_first(client: TestClient) -> None:
    default = client.get("/signals").text
    assert "ledger.task." not in default
    assert "web.ready" in default
    shown = client.get("/signals", params={"task_signals": "true"}).text
    ids = [int(i) for i in re.findall(r"<tr><td>(\d+)</td><td><a href=\"/signals\?key=", shown)]
    assert "ledger.task." in shown and ids == sorted(ids, reverse=True) and len(ids) > 2
    first = client.get("/signals", params={"task_signals": "true", "limit": 2}).text
    older = re.search(r'<a href="([^"]+)" rel="next">older', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).text
    assert [int(i) for i in re.findall(r"<tr><td>(\d+)</td>", second)] == ids[2:4]


def test_the_events_page_shows_details_as_words_not_raw_json(client: TestClient) -> None:
    page = client.get("/events", params={"kind": "run_created", "limit": 1}).text
    row = page.split('<td class="details">', 1)[1].split("</td>", 1)[0]
    assert "<b>logical date</b>" in row  # keys in words, each with its value beside it
    assert "{" not in row and "&#34;" not in row  # not JSON


def test_readable_details_shorten_versions_and_join_lists() -> None:
    from ledger.web.render import readable

    text = str(readable({"tasks": ["a", "b"], "version": "f" * 64, "reason": None, "run_state_before": "failed"}))
    assert "<b>tasks</b> a, b" in text and "<b>version</b> ffffffffffff<" in text
    assert "<b>reason</b> none" in text and "<b>run state before</b> failed" in text
