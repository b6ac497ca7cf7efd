"""The audit chain's pure rules (ledger/core/audit.py, decision 0353): when an event records a run's task instances,
tries and lineage writes; which facts of a run's row the events state, and the breaks when the row says otherwise;
an event recorded before the covers held something vouches for what it holds and nothing more; a chain whose
verified history begins after unchecked events says so (decision 0359)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from ledger.core.audit import (
    ChainedEvent,
    conf_digest,
    created_details,
    fact_breaks,
    recorded_facts,
    restart_notice,
    rows_digest,
    run_breaks,
    run_cover,
    run_facts,
    tasks_recorded,
)

DAY = datetime(2024, 1, 3, tzinfo=UTC)


def event(i: int, kind: str, run_id: int | None, **details: Any) -> ChainedEvent:
    return ChainedEvent(i, i, "2024-03-10T12:00:00.000000Z", kind, "test", "daily", run_id, details, None, None, None)


def facts(**changed: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"logical_date": DAY, "data_interval_start": DAY, "data_interval_end": DAY + timedelta(1),
                           "run_type": "backfill", "backfill_id": 7, "conf": {"x": 1}, "overridden_by": None}
    return run_facts(**{**row, **changed})


def created(i: int = 1, run_id: int = 3) -> ChainedEvent:
    paris = timezone(timedelta(hours=1))  # the DAG's timezone: the same instants
    details = created_details(DAY.astimezone(paris), DAY, DAY + timedelta(1), "backfill", "v1", 2, 7, {"x": 1})
    return event(i, "run_created", run_id, **details)


def test_a_finished_runs_task_instances_are_recorded_once_all_finished_an_overridden_runs_once_none_is_in_flight(
) -> None:
    assert tasks_recorded("success", ["success", "skipped"]) and tasks_recorded("failed", [])
    assert not tasks_recorded("success", ["success", "scheduled"])
    assert tasks_recorded("overridden", ["success", "scheduled", "up_for_retry"])
    assert not tasks_recorded("overridden", ["success", "running"])
    assert not tasks_recorded("running", ["success"]) and not tasks_recorded("queued", [])


def test_a_rows_digest_is_the_same_in_any_order_and_takes_rows_with_nulls() -> None:
    a = ("load", 1, "sales", "2024-01-03", "v1", "success", None, None)
    b = ("load", 1, "sales", "2024-01-03", "v1", "success", 10, "/x")
    assert rows_digest([a, b]) == rows_digest([b, a]) != rows_digest([a])
    assert rows_digest([]) != rows_digest([a])


def test_an_event_recorded_before_the_covers_held_try_rows_vouches_for_what_it_holds() -> None:
    now = {3: run_cover(3, "success", 2, "v1", "c", tries="t", try_rows="edited", writes="w")}
    old = {3: (10, run_cover(3, "success", 2, "v1", "c", tries="t"))}
    assert run_breaks("daily", old, now) == []
    new = {3: (10, run_cover(3, "success", 2, "v1", "c", tries="t", try_rows="r", writes="w"))}
    assert run_breaks("daily", new, now)[0].line() == (
        "daily: run 3 is not what its last event (10) recorded (its tries' states or versions): no event explains it")


def test_a_row_whose_facts_are_what_run_created_stated_verifies_whatever_the_offset_it_was_written_in() -> None:
    assert fact_breaks("daily", recorded_facts([created()]), {3: facts()}) == []


def test_each_fact_a_run_created_event_stated_is_compared_one_line_per_run_and_event() -> None:
    found = fact_breaks("daily", recorded_facts([created()]), {
        3: facts(logical_date=DAY + timedelta(30), run_type="manual", backfill_id=None, conf={"x": 2})})
    assert [b.line() for b in found] == [
        "daily: run 3 is not what event 1 (run_created) recorded of it (logical_date '2024-01-03T00:00:00.000000Z' "
        "-> '2024-02-02T00:00:00.000000Z', run_type 'backfill' -> 'manual', backfill_id 7 -> None, conf_sha256 "
        f"'{conf_digest({'x': 1})[:12]}...' -> '{conf_digest({'x': 2})[:12]}...'): no event explains it"]


def test_overridden_by_is_what_the_last_override_or_restore_stated() -> None:
    overridden = [created(), event(2, "run_overridden", 3, overridden_by="9", state_before="success")]
    assert fact_breaks("daily", recorded_facts(overridden), {3: facts(overridden_by=9)}) == []
    assert [b.line() for b in fact_breaks("daily", recorded_facts(overridden), {3: facts()})] == [
        "daily: run 3 is not what event 2 (run_overridden) recorded of it (overridden_by 9 -> None): no event "
        "explains it"]
    restored = [*overridden, event(3, "run_restored", 3, state="success")]
    assert fact_breaks("daily", recorded_facts(restored), {3: facts()}) == []
    assert len(fact_breaks("daily", recorded_facts([created()]), {3: facts(overridden_by=9)})) == 1


def test_an_event_from_before_the_details_held_a_fact_states_only_those_it_holds() -> None:
    old = event(1, "run_created", 3, logical_date=DAY.isoformat(), run_type="backfill", version="v1",
                previous_run_id="2", backfill_id=7)  # no data interval, no conf digest
    recorded = recorded_facts([old])
    assert fact_breaks("daily", recorded, {3: facts(data_interval_end=DAY, conf=None)}) == []
    assert len(fact_breaks("daily", recorded, {3: facts(logical_date=DAY + timedelta(1))})) == 1
    unreadable = event(1, "run_created", 3, logical_date="someday", run_type="backfill")
    assert fact_breaks("daily", recorded_facts([unreadable]), {3: facts()}) == []


def test_a_chain_whose_verified_history_begins_after_unchecked_events_says_so_in_one_line() -> None:
    def genesis(i: int) -> ChainedEvent:
        return ChainedEvent(i, i, "2024-03-10T12:00:00.000000Z", "audit_started", "db", "daily", None, {}, None,
                            None, None)

    assert restart_notice("daily", [genesis(1), event(2, "run_created", 3)]) is None  # nothing before it
    assert restart_notice("daily", [event(1, "run_created", 3)]) is None  # a chain made by ledger from its start
    upgraded = restart_notice("daily", [event(1, "run_created", 3), event(2, "run_marked", 3), genesis(3)])
    assert upgraded is not None and upgraded.line() == ("daily: chain restarted at event 3 (audit_started): "
                                                        "history before it was not verified (2 event(s))")
    twice = restart_notice("daily", [genesis(1), event(2, "run_marked", 3), genesis(3), event(4, "run_marked", 3)])
    assert twice is not None and twice.what.endswith("(2 event(s)); it had started before, at event 1")
    dropped = restart_notice("daily", [genesis(1), event(2, "audit_stopped", None), genesis(3)])
    assert dropped is not None and dropped.what.endswith("; `ledger db downgrade` dropped the chain at event 2 "
                                                         "(audit_stopped)")
