"""Storing signals: versions per key, batches, listings, validation and cursors, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pendulum
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError

from ledger.core.errors import InvalidInput
from ledger.core.signals import MAX_VALUE_BYTES, Signal, is_valid_key, validate_key, validate_value
from ledger.models import Event, SignalKey, SignalRecord
from ledger.store import events
from ledger.store import signals as store
from tests.signals.conftest import Db
from tests.statements import statements_on

NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")


def count(db: Db, model: Any = SignalRecord) -> int:
    with db.sessions.begin() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_versions_rise_by_one_per_key_and_are_independent_across_keys(db: Db) -> None:
    with db.sessions.begin() as s:
        a1 = store.send(s, "a", "1", sender="t", now=NOW)
        b1 = store.send(s, "b", "1", sender="t", now=NOW)
    with db.sessions.begin() as s:
        a2 = store.send(s, "a", "2", sender="t", now=NOW, meta={"run": 7})
        a3 = store.send(s, "a", "3", sender="t", now=NOW)
        b2 = store.send(s, "b", "2", sender="t", now=NOW)
    assert [(x.key, x.version) for x in (a1, b1, a2, a3, b2)] == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]
    assert [x.id for x in (a1, b1, a2, a3, b2)] == sorted(x.id for x in (a1, b1, a2, a3, b2))
    with db.sessions.begin() as s:
        assert store.newest_version(s, "a") == 3 and store.newest_version(s, "b") == 2
        assert store.newest_version(s, "never") == 0
        stored = store.listing(s, "a")
    assert stored == [a1, a2, a3]
    assert stored[1].meta == {"run": 7} and stored[0].meta is None
    assert stored[0].sent_at == NOW and stored[0].sent_at.utcoffset() is not None
    assert a2.as_json() == {"id": a2.id, "key": "a", "version": 2, "value": "2", "sender": "t",
                            "sent_at": "2024-03-10T12:00:00+00:00", "meta": {"run": 7}}


def test_a_rolled_back_send_leaves_no_gap_in_the_versions(db: Db) -> None:
    with db.sessions.begin() as s:
        store.send(s, "k", "kept", sender="t", now=NOW)
    with pytest.raises(RuntimeError), db.sessions.begin() as s:
        store.send(s, "k", "lost", sender="t", now=NOW)
        raise RuntimeError("abort")
    with db.sessions.begin() as s:
        again = store.send(s, "k", "kept too", sender="t", now=NOW)
        assert again.version == 2
        assert [x.value for x in store.listing(s, "k")] == ["kept", "kept too"]


def test_send_many_gives_each_key_consecutive_versions_in_list_order(db: Db) -> None:
    with db.sessions.begin() as s:
        store.send(s, "x", "before", sender="t", now=NOW)
    items: list[tuple[str, str, dict[str, Any] | None]] = [
        ("x", "x2", None), ("y", "y1", {"i": 1}), ("x", "x3", None), ("z", "z1", None), ("y", "y2", None),
        ("x", "x4", None)]
    with db.sessions.begin() as s:
        sent = store.send_many(s, items, sender="batch", now=NOW)
        assert store.send_many(s, [], sender="batch", now=NOW) == []
    assert [(x.key, x.version, x.value) for x in sent] == [
        ("x", 2, "x2"), ("y", 1, "y1"), ("x", 3, "x3"), ("z", 1, "z1"), ("y", 2, "y2"), ("x", 4, "x4")]
    assert [x.id for x in sent] == sorted(x.id for x in sent)  # ids in list order
    with db.sessions.begin() as s:
        assert store.listing(s) == store.listing(s, "x")[:1] + sent
        assert store.by_ids(s, [sent[1].id, sent[4].id, 10_000]) == {sent[1].id: sent[1], sent[4].id: sent[4]}
        assert {k.key: k.version for k in s.scalars(select(SignalKey))} == {"x": 4, "y": 2, "z": 1}


def test_a_large_batch_over_many_keys_is_stored_with_gap_free_versions(db: Db) -> None:
    items: list[tuple[str, str, dict[str, Any] | None]] = [(f"key.{i % 700}", str(i), None) for i in range(3000)]
    with db.sessions.begin() as s, statements_on(db.engine) as statements:
        sent = store.send_many(s, items, sender="t", now=NOW)
    per_key: dict[str, list[int]] = defaultdict(list)
    for x in sent:
        per_key[x.key].append(x.version)
    assert all(v == list(range(1, len(v) + 1)) for v in per_key.values())
    assert len(per_key) == 700 and count(db) == 3000 and count(db, Event) == 3000
    # its cost, without a clock: a few round trips on PostgreSQL however many signals; on SQLite (in process) one
    # insert per signal and per event, and nothing read per signal
    assert len(statements) <= (12 if db.dialect == "postgresql" else 2 * len(items) + 5), len(statements)


def test_listing_by_key_since_a_version_or_an_id(db: Db) -> None:
    with db.sessions.begin() as s:
        sent = store.send_many(s, [("a", "1", None), ("b", "1", None), ("a", "2", None), ("a", "3", None)],
                               sender="t", now=NOW)
    a1, b1, a2, a3 = sent
    with db.sessions.begin() as s:
        assert store.listing(s) == sent
        assert store.listing(s, "a") == [a1, a2, a3]
        assert store.listing(s, "a", since_version=1) == [a2, a3]
        assert store.listing(s, "a", since_version=3) == []
        assert store.listing(s, since_id=b1.id) == [a2, a3]
        assert store.listing(s, limit=2) == [a1, b1]
        assert store.listing(s, "a", since_version=1, limit=1) == [a2]
        assert store.listing(s, "nothing.here") == []
        assert store.newest_id(s) == a3.id
        assert store.after_id(s, 0) == sent
        assert store.after_id(s, a1.id, keys=["a"]) == [a2, a3]
        assert store.after_id(s, 0, keys=["b", "zz"], limit=5) == [b1]
        assert store.after_id(s, 0, keys=[]) == []
        assert store.after_id(s, 0, limit=1) == [a1]
        with pytest.raises(InvalidInput, match="needs a key"):
            store.listing(s, since_version=1)
        with pytest.raises(InvalidInput, match="0 or more"):
            store.listing(s, "a", since_version=-1)
        with pytest.raises(InvalidInput, match="outside letters"):
            store.listing(s, "a b")


def test_newest_id_is_zero_without_signals(db: Db) -> None:
    with db.sessions.begin() as s:
        assert store.newest_id(s) == 0
        assert store.listing(s) == []


@pytest.mark.parametrize(("key", "message"), [
    ("", "signal key '' is empty"),
    ("a b", "signal key 'a b' has characters outside letters, digits and _ . : / -"),
    ("tab\there", "has characters outside letters, digits and _ . : / -"),
    ("trailing\n", "has characters outside letters, digits and _ . : / -"),
    ("ключ", "has characters outside letters, digits and _ . : / -"),
    ("-dash", "signal key '-dash' must start with a letter or a digit"),
    ("_under", "must start with a letter or a digit"),
    ("k" * 201, "is 201 characters; the limit is 200"),
])
def test_bad_keys_are_refused_with_one_clear_line(key: str, message: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_key(key)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert not is_valid_key(key)


def test_good_keys_and_values_pass() -> None:
    for key in ("a", "0", "dag:daily/extract.done", "A-b_c.d:e/f", "k" * 200):
        assert validate_key(key) == key and is_valid_key(key)
    assert validate_value("") == ""
    assert validate_value("é" * (MAX_VALUE_BYTES // 2)) == "é" * (MAX_VALUE_BYTES // 2)


def test_bad_values_are_refused_with_one_clear_line() -> None:
    with pytest.raises(InvalidInput, match=r"^signal value is 70000 bytes; the limit is 65536$"):
        validate_value("x" * 70000)
    with pytest.raises(InvalidInput, match="65538 bytes"):
        validate_value("é" * (MAX_VALUE_BYTES // 2 + 1))
    with pytest.raises(InvalidInput, match="NUL"):
        validate_value("a\x00b")
    with pytest.raises(InvalidInput, match="UTF-8"):
        validate_value("\udcff")


def test_a_batch_with_one_bad_item_stores_nothing(db: Db) -> None:
    with db.sessions.begin() as s:
        store.send(s, "ok", "1", sender="t", now=NOW)
    for bad in [("ok", "x" * 70000, None), ("b a d", "v", None), ("ok", "v", {"x": object()}), ("ok", "v", [1])]:
        with pytest.raises(InvalidInput), db.sessions.begin() as s:
            store.send_many(s, [("ok", "fine", None), bad], sender="t", now=NOW)  # type: ignore[list-item]
    assert count(db) == 1 and count(db, Event) == 1
    with db.sessions.begin() as s:
        assert store.newest_version(s, "ok") == 1


def test_every_signal_is_a_signal_sent_event(db: Db) -> None:
    with db.sessions.begin() as s:
        one = store.send(s, "e", "v" * 300, sender="cli:me@host", now=NOW, meta={"why": "test"})
        two, three = store.send_many(s, [("e", "2", None), ("f", "3", None)], sender="job:1", now=NOW)
    with db.sessions.begin() as s:
        rows = events.listing(s, kinds=["signal_sent"])
    assert [(e.actor, e.details) for e in rows] == [
        ("cli:me@host", {"key": "e", "version": 1, "value": "v" * 200, "signal_id": one.id, "meta": {"why": "test"}}),
        ("job:1", {"key": "e", "version": 2, "value": "2", "signal_id": two.id, "meta": None}),
        ("job:1", {"key": "f", "version": 1, "value": "3", "signal_id": three.id, "meta": None})]
    assert rows[0].at == NOW


def test_cursors_start_at_zero_and_never_move_backwards(db: Db) -> None:
    with db.sessions.begin() as s:
        assert store.cursor(s, "L", "k") == 0
        store.advance(s, "L", "k", 5, NOW)
        store.advance(s, "other", "k", 1, NOW)
    with db.sessions.begin() as s:
        assert store.cursor(s, "L", "k") == 5
        store.advance(s, "L", "k", 3, NOW.add(minutes=1))
        assert store.cursor(s, "L", "k") == 5
        store.advance(s, "L", "k", 7, NOW.add(minutes=2))
        store.advance_many(s, "L", {"k": 6, "j": 2}, NOW.add(minutes=3))
    with db.sessions.begin() as s:
        assert store.cursors(s, "L", ["k", "j", "none"]) == {"k": 7, "j": 2, "none": 0}
        assert store.cursor(s, "other", "k") == 1
        assert store.cursor(s, "L", "k", lock=True) == 7
        store.advance(s, "scheduler", "*", 42, NOW)  # a cursor key is free text: a position by id, say
        assert store.cursor(s, "scheduler", "*", lock=True) == 42
        with pytest.raises(InvalidInput):
            store.advance(s, "L", "k", -1, NOW)
        with pytest.raises(InvalidInput):
            store.advance(s, "", "k", 1, NOW)


def test_concurrent_senders_of_one_key_get_gap_free_versions(db: Db) -> None:
    errors: list[BaseException] = []

    def sender(n: int) -> None:
        try:
            for i in range(25):
                with db.sessions.begin() as s:
                    store.send(s, "shared", f"{n}-{i}", sender=f"thread-{n}", now=NOW)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with db.sessions.begin() as s:
        stored = store.listing(s, "shared")
    assert [x.version for x in stored] == list(range(1, 101))
    assert [x.id for x in stored] == sorted(x.id for x in stored)  # version order is id order
    for n in range(4):  # each thread's signals in the order it sent them
        mine = [x.value for x in stored if x.sender == f"thread-{n}"]
        assert mine == [f"{n}-{i}" for i in range(25)]


@pytest.mark.postgres
def test_on_postgres_after_id_waits_for_senders_in_flight_so_a_reader_by_id_never_skips(
        migrated_postgres_url: str) -> None:
    """Ids come from a sequence: a later id can commit first. `after_id` must not hand it out before
    the earlier one is committed, or a reader keeping the last id handled would skip the earlier one."""
    from tests.conftest import sessions_on

    engine, sessions = sessions_on(migrated_postgres_url)
    first = sessions()
    first.begin()
    early = store.send(first, "a", "early", sender="t", now=NOW)
    late = _send_one(sessions, "b", "late")  # senders do not wait for each other
    assert late.id > early.id
    with sessions.begin() as s:
        assert [x.value for x in store.listing(s)] == ["late"]  # the hazard: a gap below a visible id
    read: list[list[Signal]] = []

    def reader() -> None:
        with sessions.begin() as s:
            read.append(store.after_id(s, 0))

    t = threading.Thread(target=reader)
    t.start()
    t.join(timeout=1.0)
    assert t.is_alive() and not read  # waits for the sender in flight
    first.commit()
    first.close()
    t.join(timeout=60)
    assert [[x.value for x in batch] for batch in read] == [["early", "late"]]
    engine.dispose()


@pytest.mark.postgres
def test_on_postgres_two_transactions_that_sent_then_read_by_id_do_not_deadlock(migrated_postgres_url: str) -> None:
    from tests.conftest import sessions_on

    engine, sessions = sessions_on(migrated_postgres_url)
    one, two = sessions(), sessions()
    one.begin()
    two.begin()
    store.send(one, "a", "one", sender="t", now=NOW)
    store.send(two, "b", "two", sender="t", now=NOW)
    read: list[Any] = []
    reader = threading.Thread(target=lambda: read.append(store.after_id(two, 0)))
    reader.start()
    reader.join(timeout=60)  # a read that waited for `one` would wait for ever: `one` commits only after this
    assert not reader.is_alive() and read == [[]]  # `one` is in flight: no horizon yet, nothing lost
    one.commit()
    one.close()
    assert [x.value for x in store.after_id(two, 0)] == ["one", "two"]  # its own signal too
    two.commit()
    two.close()
    with sessions.begin() as s:  # reading first, then sending: no wait at all
        assert len(store.after_id(s, 0)) == 2
        store.send(s, "c", "three", sender="t", now=NOW)
    engine.dispose()


def _send_one(sessions: Any, key: str, value: str) -> Signal:
    with sessions.begin() as s:
        return store.send(s, key, value, sender="t", now=NOW)


@pytest.mark.postgres
def test_on_postgres_a_locked_cursor_makes_a_second_process_wait_for_the_first(migrated_postgres_url: str) -> None:
    from tests.conftest import sessions_on

    engine, sessions = sessions_on(migrated_postgres_url)
    first = sessions()
    first.begin()
    assert store.cursor(first, "L", "k", lock=True) == 0
    seen: list[int] = []

    def second() -> None:
        with sessions.begin() as s:
            seen.append(store.cursor(s, "L", "k", lock=True))

    t = threading.Thread(target=second)
    t.start()
    t.join(timeout=1.0)
    assert t.is_alive() and not seen
    with sessions.begin() as s:  # skip_locked: a third one does not wait, and is told nothing
        assert store.cursors(s, "L", ["k"], lock=True, skip_locked=True) == {}
    store.advance(first, "L", "k", 9, NOW)
    first.commit()
    first.close()
    t.join(timeout=60)
    assert seen == [9]
    engine.dispose()


def _send_lock_is_free(engine: Any, within: float = 0.0) -> bool:
    """Whether another connection could take the send lock exclusively (and gives it back): right now,
    or within `within` seconds (a server ends the backend of a closed connection, and frees its
    session locks, a moment after the client closed it)."""
    from sqlalchemy import text

    deadline = time.monotonic() + within
    with engine.connect() as conn:
        while True:
            free = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": store.SEND_LOCK}).scalar())
            if free:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": store.SEND_LOCK})
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@pytest.mark.postgres
def test_on_postgres_the_read_barrier_gives_the_send_lock_back_even_when_its_read_fails(
        migrated_postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import text

    from tests.conftest import sessions_on

    engine, sessions = sessions_on(migrated_postgres_url)
    _send_one(sessions, "a", "1")
    with sessions.begin() as s:
        assert [x.value for x in store.after_id(s, 0)] == ["1"]
        assert _send_lock_is_free(engine)  # released at once, not at the end of the transaction
    monkeypatch.setattr(store, "_RELEASE", text("SELECT pg_advisory_unlock(:lock), no_such_column"))
    with pytest.raises(DBAPIError), sessions.begin() as s:
        store.after_id(s, 0)
    assert _send_lock_is_free(engine, within=10.0)  # the connection that held it was closed
    monkeypatch.undo()
    _send_one(sessions, "a", "2")  # and senders go on
    with sessions.begin() as s:
        assert [x.value for x in store.after_id(s, 0)] == ["1", "2"]
    engine.dispose()


def test_task_state_signals_are_listed_among_the_events_by_time(db: Db) -> None:
    def state(task: str, value: str, run: int, minute: int) -> None:
        with db.sessions.begin() as s:
            store.send_many(s, [(f"ledger.task.d.{task}", value, {"dag_id": "d", "task_id": task, "run_id": run,
                                                                   "try_number": 1})],
                            sender="schedulerjob:1", now=NOW.add(minutes=minute), record_events=False)

    def event(kind: str, run: int, minute: int) -> None:
        with db.sessions.begin() as s:
            events.record(s, kind, at=NOW.add(minutes=minute), actor="t", dag_id="d", run_id=run)

    event("run_created", 1, 0)
    state("a", "running", 1, 1)
    state("a", "success", 1, 2)
    event("run_state_changed", 1, 3)
    state("a", "running", 2, 4)
    with db.sessions.begin() as s:  # another DAG's task states and a user's signal (an event already)
        store.send_many(s, [("ledger.task.other.a", "running", {"run_id": 1})], sender="x", now=NOW,
                        record_events=False)
        store.send(s, "user.key", "v", sender="me", now=NOW.add(minutes=5))
    with db.sessions.begin() as s:
        rows = events.listing_json(s, dag_id="d")
        assert [(r["kind"], r["details"].get("state")) for r in rows] == [
            ("run_created", None), ("task_state_signal", "running"), ("task_state_signal", "success"),
            ("run_state_changed", None), ("task_state_signal", "running")]
        signal_row = rows[1]
        assert signal_row["id"] is None and signal_row["dag_id"] == "d" and signal_row["run_id"] == "1"
        assert signal_row["details"]["key"] == "ledger.task.d.a" and signal_row["details"]["task_id"] == "a"
        assert [r["kind"] for r in events.listing_json(s, dag_id="d", run_id=2)] == ["task_state_signal"]
        assert [r["details"].get("state") for r in events.listing_json(s, dag_id="d", limit=2)] == [None, "running"]
        assert [r["kind"] for r in events.listing_json(s, dag_id="d", kinds=["run_created"])] == ["run_created"]
        assert all(r["kind"] != "task_state_signal" for r in events.listing_json(s, task_signals=False))
        everything = events.listing_json(s)
        assert sum(r["kind"] == "task_state_signal" for r in everything) == 4
        assert sum(r["kind"] == "signal_sent" for r in everything) == 1  # not listed twice
