"""`ledger events --task T`: the events about one task, whether they name it alone or among several."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.store import events
from tests.store.test_timeline_store import T0


def recorded(session: Any) -> None:
    rows: list[tuple[str, dict[str, Any]]] = [
        ("task_failed", {"task_id": "extract", "try_number": 1}),
        ("task_failed", {"task_id": "extract_more", "try_number": 1}),  # a longer id that starts the same
        ("tasks_cleared", {"tasks": ["extract", "load"]}),
        ("tasks_marked", {"tasks": ["load"], "reason": 'not "extract"'}),  # names it, but not as its task
        ("run_state_changed", {"state": "running"}),
        ("zombie", {"task_id": "extract", "try_number": 2}),
    ]
    for i, (kind, details) in enumerate(rows):
        events.record(session, kind, at=T0.add(minutes=i), actor="test", dag_id="d", run_id=1, **details)


def test_the_task_filter_finds_events_naming_the_task_alone_or_among_several(session: Any) -> None:
    recorded(session)
    found = events.listing_json(session, task_id="extract", task_signals=False)
    assert [(e["kind"], e["details"].get("try_number")) for e in found] == [
        ("task_failed", 1), ("tasks_cleared", None), ("zombie", 2)]
    assert [e["kind"] for e in events.listing_json(session, task_id="load", task_signals=False)] == [
        "tasks_cleared", "tasks_marked"]


@pytest.mark.parametrize("limit, kinds", [(1, ["zombie"]), (2, ["tasks_cleared", "zombie"])])
def test_the_task_filter_keeps_the_newest_events_of_the_task_under_a_limit(session: Any, limit: int,
                                                                            kinds: list[str]) -> None:
    recorded(session)
    found = events.listing_json(session, task_id="extract", limit=limit, task_signals=False)
    assert [e["kind"] for e in found] == kinds


def test_a_task_no_event_names_finds_nothing(session: Any) -> None:
    recorded(session)
    assert events.listing_json(session, task_id="nosuchtask", task_signals=False) == []
    assert events.listing_json(session, task_id="extract", dag_id="other", task_signals=False) == []


def test_a_limit_keeps_the_newest_events_and_before_pages_back(session: Any) -> None:
    recorded(session)
    ids = [e.id for e in events.listing(session)]
    assert [e.id for e in events.listing(session, limit=2)] == ids[-2:]
    assert [e.id for e in events.listing(session, limit=2, before=ids[-2])] == ids[-4:-2]
    assert [e.id for e in events.listing(session, kinds=["task_failed"], limit=1)] == [ids[1]]
    assert [e["kind"] for e in events.listing_json(session, task_id="extract", limit=1, before=ids[-1],
                                                   task_signals=False)] == ["tasks_cleared"]
