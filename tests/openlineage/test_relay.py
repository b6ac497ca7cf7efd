"""The OpenLineage relay in-process: which events it makes of the tries it reads (a try's phases, ids committed
late), where it has got to across a restart, and what it says when sending fails and works again."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from openlineage.client import OpenLineageClient
from prometheus_client import CollectorRegistry

from ledger.services.openlineage import _GAP_POLLS, LineageRelay, RelayCounters, RelayState, build_event
from ledger.store.db import make_engine, make_sessions
from ledger.store.openlineage import TryFacts, TryRow
from tests.conftest import copy_migrated
from tests.openlineage.receiver import check_event, receiving

AT = datetime(2024, 3, 1, 12, tzinfo=UTC)


def a_try(id: int, state: str, *, started: bool = True) -> TryRow:
    ended = state not in ("queued", "running")
    return TryRow(id, id, 1, state, AT if started else None, AT if ended else None, None, "host")


def a_relay(tmp_path: Path, migrated_sqlite: Path, client: object = None, say: list[str] | None = None
            ) -> LineageRelay:
    engine = make_engine(f"sqlite:///{copy_migrated(migrated_sqlite, tmp_path / 'ledger.db')}")
    return LineageRelay(make_sessions(engine), tmp_path / "state.json", RelayCounters(CollectorRegistry()),
                        (say if say is not None else []).append, client=client, namespace="t", queue_size=10,
                        poll_interval=60, drain_timeout=60)


def test_a_try_is_started_once_and_ended_once_whatever_polls_see_it(tmp_path: Path, migrated_sqlite: Path) -> None:
    relay = a_relay(tmp_path, migrated_sqlite)
    relay.state.cursor = 0
    plan = relay._plan
    assert plan([a_try(1, "queued", started=False)], [])[1] == []
    assert relay.state.watching == {1: "queued"}
    assert plan([], [a_try(1, "running")])[1] == [(1, "START")]
    assert plan([], [a_try(1, "running")])[1] == []
    assert plan([], [a_try(1, "failed")])[1] == [(1, "FAIL")]
    assert relay.state.watching == {}
    # seen only once ended: both; a try that never started (stopped before it ran): its end only
    assert plan([a_try(2, "success"), a_try(3, "stopped", started=False)], [])[1] == [
        (2, "START"), (2, "COMPLETE"), (3, "ABORT")]
    assert plan([a_try(4, "lost")], [])[1] == [(4, "START"), (4, "ABORT")]


def test_a_try_committed_after_a_newer_one_is_still_sent(tmp_path: Path, migrated_sqlite: Path) -> None:
    relay = a_relay(tmp_path, migrated_sqlite)
    relay.state.cursor = 0
    assert relay._plan([a_try(2, "success")], [])[1] == [(2, "START"), (2, "COMPLETE")]
    assert relay.state.gaps == {1: _GAP_POLLS}
    assert relay._plan([], [a_try(1, "running")])[1] == [(1, "START")]
    assert relay.state.gaps == {} and relay.state.watching == {1: "started"}
    relay._plan([a_try(4, "success")], [])  # id 3: never committed (a rolled back transaction) is let go
    for _ in range(_GAP_POLLS):
        relay._plan([], [a_try(1, "running")])
    assert relay.state.gaps == {}


def test_a_restarted_relay_goes_on_from_where_it_got_to(tmp_path: Path) -> None:
    RelayState(7, {5: "started"}, {6: 3}).save(tmp_path / "state.json")
    assert RelayState.load(tmp_path / "state.json") == RelayState(7, {5: "started"}, {6: 3})
    assert RelayState.load(tmp_path / "missing.json") == RelayState()


FACTS = TryFacts(row=TryRow(1, 1, 1, "running", AT, None, "a" * 64, "host"), dag_id="d", task_id="t", map_index=-1,
                 run_id=1, logical_date=AT, data_interval=(AT, AT), run_type="manual", previous_run_id=None,
                 overridden_by=None, overrode=(), backfill_id=None, version_hash="a" * 64, code_snapshot=None)


def test_sending_that_fails_is_said_once_and_once_when_it_works_again(tmp_path: Path, migrated_sqlite: Path) -> None:
    said: list[str] = []
    with receiving() as (url, got):
        client = OpenLineageClient(config={"transport": {"type": "http", "url": url}})
        relay = a_relay(tmp_path, migrated_sqlite, client, said)
        relay.start()
        got.status = 400
        for _ in range(3):
            relay.offer(build_event(FACTS, "START", "t"))
        with got.changed:
            assert got.changed.wait_for(lambda: len(got.events) == 3, timeout=60), got.events
        got.status = 200
        relay.offer(build_event(FACTS, "START", "t"))
        with got.changed:
            assert got.changed.wait_for(lambda: len(got.events) == 4, timeout=60), got.events
        relay.stop()
    for e in got.events:
        check_event(e)
    assert said[0].startswith("openlineage: cannot send events (HTTPError: 400 Client Error"), said
    assert said[1:] == ["openlineage: sending events works again (3 dropped meanwhile)",
                        "openlineage: 1 event(s) sent, 3 dropped"]


def test_a_start_seen_only_after_the_try_ended_still_reports_a_running_try() -> None:
    from openlineage.client.serde import Serde

    ended = TryFacts(**{**{f: getattr(FACTS, f) for f in FACTS.__dataclass_fields__},
                        "row": TryRow(1, 1, 1, "stopped", AT, AT, "a" * 64, "host")})
    start, end = (Serde.to_dict(build_event(ended, t, "t")) for t in ("START", "ABORT"))
    check_event(start)
    assert (start["run"]["facets"]["ledger"]["tryState"], end["run"]["facets"]["ledger"]["tryState"]) == (
        "running", "stopped")
