"""How a job tells other processes' changes from its own: events newer than the id its last transaction began
with, leaving out the ids that transaction appended (ledger/store/loop.py events_since)."""

from __future__ import annotations

from typing import Any

from ledger.store import events
from ledger.store.loop import events_since
from tests.store.test_timeline_store import T0


def appended(session: Any, n: int) -> list[int]:
    before = len(events.written_ids(session))
    for i in range(n):
        events.record(session, "pool_set", at=T0.add(minutes=i), actor="someone", pool="p", slots=i)
    return events.written_ids(session)[before:]


def test_the_jobs_own_events_are_not_taken_for_another_process_change(session: Any) -> None:
    seen = appended(session, 2)[-1]
    mine = appended(session, 3)
    assert events_since(session, seen, mine) == (mine[-1], False)


def test_an_event_appended_among_the_jobs_own_is_another_process_change(session: Any) -> None:
    """On PostgreSQL another process's event can take an id between the job's own while the job's transaction
    runs: it is still seen, though the job's newest id is above it."""
    seen = appended(session, 1)[-1]
    first, _another, last = appended(session, 3)
    assert events_since(session, seen, [first, last]) == (last, True)


def test_with_nothing_newer_the_watermark_stays(session: Any) -> None:
    seen = appended(session, 2)[-1]
    assert events_since(session, seen, []) == (seen, False)
    assert events_since(session, 0, []) == (seen, True)
