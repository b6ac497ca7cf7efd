"""The events' hash chains (decision 0260), on SQLite and PostgreSQL: every event is linked as its transaction
commits, each kind of tampering made with plain SQL is found and named by `verify`, and two writers of the same
chains at once leave chains that verify."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import select, text

from ledger import DAG, BashTask
from ledger.core.audit import ZERO
from ledger.core.errors import DagNotFound, InvalidInput
from ledger.core.states import RunState, RunType
from ledger.models import DagRun, Event, EventChain
from ledger.services import audit
from ledger.services.sync import register_dag
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import runs as run_store
from ledger.store.db import make_engine, make_sessions
from ledger.store.loop import set_run_state
from tests.conftest import copy_migrated
from tests.statements import statements_on

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")
NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        template = request.getfixturevalue("migrated_sqlite")
        engine = make_engine(f"sqlite:///{copy_migrated(template, tmp_path / 'l.db')}")
        made = make_sessions(engine)
    else:
        engine = make_engine(request.getfixturevalue("migrated_postgres_url"))
        made = make_sessions(engine)
    made.url = engine.url.render_as_string(hide_password=False)
    yield made
    engine.dispose()


def history(sessions: Any, dag_id: str = "daily", days: int = 3) -> list[int]:
    """A DAG with `days` runs, each queued, then running, then a success, one transaction per step as a scheduler
    writes them; a user and a pool event in the chain with no DAG."""
    with DAG(dag_id, schedule="@daily", start_date=T0, catchup=True) as dag:
        BashTask("a", "echo a")
    dag.fileloc = f"/dags/{dag_id}.py"
    with sessions.begin() as s:
        register_dag(s, dag, now=NOW, actor="test")
        spec = dag_store.current_spec(s, dag_id)
        ids = [run_store.splice(s, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=d)), RunType.BACKFILL),
                                now=NOW, actor="test").id for d in range(days)]
        events.record(s, "pool_set", at=NOW, actor="test", pool="p", slots=2)
    for state in (RunState.RUNNING, RunState.SUCCESS):
        with sessions.begin() as s:
            for run in s.scalars(select(DagRun).where(DagRun.id.in_(ids))):
                set_run_state(s, run, state, now=NOW, actor="test")
    return ids


def lines(sessions: Any, dags: list[str] | None = None, since: int | None = None) -> list[str]:
    with sessions() as s:
        return [b.line() for b in audit.verify(s, dags, since=since).breaks]


def tamper(sessions: Any, sql: str, **params: Any) -> None:
    with sessions.begin() as s:
        s.execute(text(sql), params)


def test_every_event_is_linked_into_its_dags_chain_as_its_transaction_commits(sessions: Any) -> None:
    history(sessions)
    with sessions() as s:
        chain = list(s.scalars(select(Event).where(Event.dag_id == "daily").order_by(Event.seq)))
        head = s.get(EventChain, "daily")
        other = s.get(EventChain, "")
    assert [e.seq for e in chain] == list(range(1, len(chain) + 1))
    assert chain[0].prev_hash == ZERO
    assert all(b.prev_hash == a.hash for a, b in zip(chain, chain[1:], strict=False))
    assert head is not None
    assert (head.head_id, head.head_hash, head.length) == (chain[-1].id, chain[-1].hash, len(chain))
    assert other is not None and other.length == 1  # pool_set: the chain of events with no DAG
    last = chain[-1]
    assert last.kind == "run_state_changed" and last.covers["run"]["state"] == "success"
    assert lines(sessions) == []


def test_a_run_state_changed_by_sql_is_named_with_the_event_that_recorded_it(sessions: Any) -> None:
    ids = history(sessions)
    tamper(sessions, "UPDATE dag_run SET state = 'failed' WHERE id = :id", id=ids[1])
    found = lines(sessions)
    assert len(found) == 1
    assert found[0].startswith(f"daily: run {ids[1]} is not what its last event (")
    assert "state 'success' -> 'failed'" in found[0] and found[0].endswith("no event explains it")


def test_a_deleted_event_is_named_by_the_event_after_it(sessions: Any) -> None:
    history(sessions)
    with sessions() as s:
        chain = list(s.scalars(select(Event.id).where(Event.dag_id == "daily").order_by(Event.seq)))
    tamper(sessions, "DELETE FROM event WHERE id = :id", id=chain[3])
    found = lines(sessions, ["daily"])
    assert len(found) == 1 and found[0].startswith(f"daily: event {chain[4]} (")
    assert found[0].endswith(f"does not follow event {chain[2]}: the event between them was deleted")


def test_an_event_inserted_with_sql_is_named(sessions: Any) -> None:
    ids = history(sessions)
    tamper(sessions, "INSERT INTO event (at, kind, actor, dag_id, run_id, details) "
                     "VALUES ('2024-03-10 12:00:00', 'run_marked', 'mallory', 'daily', :run, '{}')", run=ids[0])
    found = lines(sessions)
    assert len(found) == 1 and found[0].startswith("daily: event ") and \
        found[0].endswith("(run_marked) has no hash: it was written outside ledger")


def test_an_event_inserted_with_a_forged_link_is_named_as_inserted(sessions: Any) -> None:
    history(sessions)
    with sessions() as s:
        chain = list(s.scalars(select(Event).where(Event.dag_id == "daily").order_by(Event.seq)))
    # a copy of an event placed after the third, with that event's hash as its link and a hash of its own
    e = chain[2]
    tamper(sessions, "INSERT INTO event (at, kind, actor, dag_id, run_id, details, seq, prev_hash, covers, hash) "
                     "SELECT at, kind, actor, dag_id, run_id, details, seq, prev_hash, covers, hash FROM event "
                     "WHERE id = :id", id=e.id)
    tamper(sessions, "UPDATE event SET seq = :seq, prev_hash = :prev WHERE id = (SELECT max(id) FROM event)",
           seq=e.seq, prev=e.prev_hash)
    found = lines(sessions, ["daily"])
    assert len(found) == 1
    assert f"follows event {chain[1].id}, not event {e.id}: an event was inserted before it" in found[0]


def test_an_edited_event_is_named(sessions: Any) -> None:
    history(sessions)
    with sessions() as s:
        first = s.scalar(select(Event.id).where(Event.kind == "run_created").order_by(Event.id).limit(1))
    tamper(sessions, "UPDATE event SET actor = 'someone else' WHERE id = :id", id=first)
    assert lines(sessions) == [f"daily: event {first} (run_created) was edited: its content no longer gives its hash"]


def test_an_edited_code_blob_is_named(sessions: Any) -> None:
    history(sessions)
    with sessions.begin() as s:
        code_store.add_blobs(s, {audit.sha256_bytes(b"print(1)\n"): b"print(1)\n"})
    tamper(sessions, "UPDATE code_blob SET data = :data", data=zlib.compress(b"print(2)\n"))
    sha = audit.sha256_bytes(b"print(1)\n")
    assert lines(sessions) == [f"code: code blob {sha[:12]} was changed: its bytes no longer give its sha256"]


def test_a_run_inserted_with_sql_has_no_event_to_explain_it(sessions: Any) -> None:
    ids = history(sessions)
    tamper(sessions, "INSERT INTO dag_run (dag_id, logical_date, data_interval_start, data_interval_end, run_type, "
                     "state, version_hash, schedule, created_at) SELECT dag_id, :at, data_interval_start, "
                     "data_interval_end, run_type, 'success', version_hash, schedule, created_at FROM dag_run "
                     "WHERE id = :id", at="2025-03-01 00:00:00", id=ids[0])
    found = lines(sessions)
    assert len(found) == 1 and found[0].startswith("daily: run ") and \
        found[0].endswith("(success) has no event: it was written outside ledger")


def test_since_checks_the_events_from_there_on(sessions: Any) -> None:
    history(sessions)
    with sessions() as s:
        chain = list(s.scalars(select(Event.id).where(Event.dag_id == "daily").order_by(Event.seq)))
    tamper(sessions, "UPDATE event SET actor = 'x' WHERE id = :id", id=chain[1])
    assert len(lines(sessions, ["daily"])) == 1
    assert lines(sessions, ["daily"], since=chain[2]) == []


def test_an_unknown_dag_or_event_is_refused(sessions: Any) -> None:
    history(sessions)
    with sessions() as s, pytest.raises(DagNotFound):
        audit.verify(s, ["nope"])
    with sessions() as s, pytest.raises(InvalidInput, match="there is no event 99999"):
        audit.verify(s, None, since=99999)


def test_two_writers_of_the_same_chains_at_once_keep_one_chain_each(sessions: Any) -> None:
    """Two transactions, each on its own connection, write events of two DAGs in opposite orders and commit at once
    (a barrier holds both until both have written): the chains verify and hold every event once."""
    history(sessions, "a", days=1)
    history(sessions, "b", days=1)
    barrier = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    def writer(name: str, order: list[str]) -> None:
        engine = make_engine(sessions.url)
        try:
            with make_sessions(engine).begin() as s:
                for n in range(20):
                    for dag_id in order:
                        events.record(s, "signal_action", at=NOW, actor=name, dag_id=dag_id, n=n)
                barrier.wait()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()
        finally:
            engine.dispose()

    if sessions.url.startswith("sqlite"):  # SQLite: one writer holds the file from its BEGIN; the other waits
        pytest.skip("SQLite writers are serialised by the database's write lock from their first statement")
    threads = [threading.Thread(target=writer, args=("one", ["a", "b"])),
               threading.Thread(target=writer, args=("two", ["b", "a"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert lines(sessions) == []
    with sessions() as s:
        for dag_id in ("a", "b"):
            seqs = list(s.scalars(select(Event.seq).where(Event.dag_id == dag_id, Event.kind == "signal_action")))
            assert len(seqs) == 40 and len(set(seqs)) == 40


def finished_history(sessions: Any) -> list[int]:
    """history(), then each run's task instance finished (try 1, success) in the transaction that records the run's
    end again, as a scheduler's loop writes a run's last try and its end together."""
    ids = history(sessions, days=2)
    with sessions.begin() as s:
        s.execute(text("UPDATE task_instance SET state = 'success', try_number = 1"))
        for run in s.scalars(select(DagRun).where(DagRun.id.in_(ids))):
            events.record(s, "run_marked", at=NOW, actor="test", dag_id=run.dag_id, run_id=run.id)
    return ids


def test_a_finished_runs_task_instances_are_covered_and_an_outcome_changed_by_sql_is_named(sessions: Any) -> None:
    ids = finished_history(sessions)
    with sessions() as s:
        last = s.scalars(select(Event).where(Event.run_id == ids[0]).order_by(Event.seq.desc())).first()
    assert last is not None and len(last.covers["run"]["tries"]) == 64  # the digest of its task instances
    assert lines(sessions) == []
    tamper(sessions, "UPDATE task_instance SET state = 'failed' WHERE run_id = :id", id=ids[0])
    found = lines(sessions)
    assert found == [f"daily: run {ids[0]} is not what its last event ({last.id}) recorded (its task instances' "
                     "tries or outcomes): no event explains it"]
    tamper(sessions, "UPDATE task_instance SET state = 'success', try_number = 2 WHERE run_id = :id", id=ids[0])
    assert len(lines(sessions)) == 1  # another try number than recorded: named the same way


def test_a_run_whose_task_instances_had_not_finished_records_only_its_row(sessions: Any) -> None:
    ids = history(sessions, days=1)  # the run ended while its task instance had not (not finished: no digest)
    with sessions() as s:
        last = s.scalars(select(Event).where(Event.run_id == ids[0]).order_by(Event.seq.desc())).first()
    assert last is not None and "tries" not in last.covers["run"]
    tamper(sessions, "UPDATE task_instance SET state = 'success', try_number = 1")
    assert lines(sessions) == []  # nothing recorded of them, nothing to compare


def test_an_event_is_inserted_with_its_place_and_hash_not_updated_after_it(sessions: Any) -> None:
    """Decision 0327: a transaction's events are inserted as it commits, each already linked: no event row is
    written twice."""
    ids = history(sessions, days=1)
    engine = make_engine(sessions.url)
    try:
        with statements_on(engine) as seen, make_sessions(engine).begin() as s:
            for run in s.scalars(select(DagRun).where(DagRun.id.in_(ids))):
                set_run_state(s, run, RunState.FAILED, now=NOW, actor="test")
            events.record(s, "pool_set", at=NOW, actor="test", pool="p", slots=3)
    finally:
        engine.dispose()
    assert [q for q in seen if q.startswith("UPDATE event ")] == []
    inserts = [q for q in seen if q.startswith("INSERT INTO event ")]
    assert inserts and all("hash" in q for q in inserts)
    assert lines(sessions) == []


def test_events_read_by_the_transaction_that_recorded_them_are_linked_as_it_commits(sessions: Any) -> None:
    """Events a transaction reads back (plain SQL, a listing) are in the table before it commits, and are linked
    with the ones it records after the reads, in the order they were recorded."""
    history(sessions, days=1)
    with sessions.begin() as s:
        events.record(s, "signal_action", at=NOW, actor="test", dag_id="daily", n=0)
        counted = s.execute(text("SELECT count(*) FROM event WHERE kind = 'signal_action'")).scalar_one()
        events.record(s, "signal_action", at=NOW, actor="test", dag_id="daily", n=1)
        listed = [e.details["n"] for e in events.listing(s, dag_id="daily", kinds=["signal_action"])]
        events.record(s, "signal_action", at=NOW, actor="test", dag_id="daily", n=2)
        ids = events.written_ids(s)
    assert counted == 1 and listed == [0, 1]
    with sessions() as s:
        chain = list(s.scalars(select(Event).where(Event.dag_id == "daily").order_by(Event.seq)))
        head = s.get(EventChain, "daily")
    assert [e.details.get("n") for e in chain[-3:]] == [0, 1, 2]
    assert [e.id for e in chain[-3:]] == ids[-3:] and ids == sorted(ids)
    assert head is not None and (head.head_id, head.length) == (ids[-1], len(chain))
    assert lines(sessions) == []


def test_an_events_details_changed_by_its_caller_after_it_was_recorded_are_stored_as_they_were_hashed(
        sessions: Any) -> None:
    history(sessions, days=1)
    details = {"n": 1, "seen": ["a"]}
    with sessions.begin() as s:
        events.record_many(s, [{"at": NOW, "kind": "signal_action", "actor": "test", "dag_id": "daily",
                                "details": details}])
        details["seen"].append("b")  # the caller's own dict, reused after the call
        details["n"] = 2
    with sessions() as s:
        last = s.scalars(select(Event).where(Event.dag_id == "daily").order_by(Event.seq.desc())).first()
    assert last is not None and last.details == {"n": 1, "seen": ["a"]}
    assert lines(sessions) == []


def test_a_read_of_the_event_table_inside_a_savepoint_refuses_to_write_out_recorded_events(sessions: Any) -> None:
    """A savepoint's rollback would take the written-out rows that the commit then links: a hole in the chain."""
    history(sessions, days=1)
    with sessions.begin() as s:
        events.record(s, "signal_action", at=NOW, actor="test", dag_id="daily", n=0)
        with pytest.raises(RuntimeError, match="not written out inside a savepoint"), s.begin_nested():
            s.execute(text("SELECT count(*) FROM event"))
    assert lines(sessions) == []


def with_tries(sessions: Any, ids: list[int]) -> None:
    """Each run's task instance finished (try 1 on version v1, success) with its try's row and a lineage write, in
    the transaction that records the run's end again."""
    with sessions.begin() as s:
        s.execute(text("UPDATE task_instance SET state = 'success', try_number = 1"))
        s.execute(text("INSERT INTO task_try (task_instance_id, try_number, state, dag_version) "
                       "SELECT id, 1, 'success', 'v1' FROM task_instance"))
        s.execute(text("INSERT INTO lineage_write (dataset, partition, run_id, dag_id, task_id, try_number, "
                       "dag_version, try_state, rows, written_at, recorded_at) SELECT 'sales', 'p', run_id, dag_id, "
                       "task_id, 1, 'v1', 'success', 10, '2024-03-10 12:00:00', '2024-03-10 12:00:00' "
                       "FROM task_instance"))
        for run in s.scalars(select(DagRun).where(DagRun.id.in_(ids))):
            events.record(s, "run_marked", at=NOW, actor="test", dag_id=run.dag_id, run_id=run.id)


def override(sessions: Any, run_id: int) -> None:
    """A manual run at the date of `run_id` that replaces it (a backfill's reprocess does the same)."""
    with sessions.begin() as s:
        old = s.get(DagRun, run_id)
        assert old is not None
        spec = dag_store.current_spec(s, old.dag_id)
        run_store.splice(s, spec, run_store.NewRun(spec.schedule.interval_for(old.logical_date), RunType.MANUAL),
                         now=NOW, actor="test", replace=True)


def test_an_overridden_runs_task_instances_are_covered_though_they_never_ran(sessions: Any) -> None:
    """Decision 0353: the run_overridden event records the displaced run's task instances when none is in flight
    (here still scheduled: the run was displaced before it ran them)."""
    ids = history(sessions, days=1)
    override(sessions, ids[0])
    with sessions() as s:
        last = s.scalars(select(Event).where(Event.run_id == ids[0]).order_by(Event.seq.desc())).first()
    assert last is not None and last.kind == "run_overridden" and len(last.covers["run"]["tries"]) == 64
    assert lines(sessions) == []
    tamper(sessions, "UPDATE task_instance SET state = 'success', try_number = 1 WHERE run_id = :id", id=ids[0])
    assert lines(sessions) == [f"daily: run {ids[0]} is not what its last event ({last.id}) recorded (its task "
                               "instances' tries or outcomes): no event explains it"]


def the_old_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events recorded as they were before decision 0353: covers with the task instances' digest of a finished run
    only (no try rows, no lineage writes, nothing of an overridden run's), run_created details with no data interval
    and no conf digest."""
    from ledger.core import audit as core
    from ledger.store import chain

    def old_cover(run_id: int, state: str, previous: int | None, version: str, code: str | None,
                  tries: str | None = None, try_rows: str | None = None, writes: str | None = None) -> Any:
        return core.run_cover(run_id, state, previous, version, code,
                              tries=tries if state in ("success", "failed") else None)

    def old_details(logical_date: Any, start: Any, end: Any, run_type: str, version: str, previous: int | None,
                    backfill_id: int | None, conf: Any) -> dict[str, Any]:
        return {"logical_date": logical_date.isoformat(), "run_type": run_type, "version": version,
                "previous_run_id": None if previous is None else str(previous), "backfill_id": backfill_id}

    monkeypatch.setattr(chain, "run_cover", old_cover)
    monkeypatch.setattr(run_store, "created_details", old_details)


def test_a_history_recorded_before_decision_0353_verifies_and_is_checked_for_what_it_recorded(
        sessions: Any) -> None:
    with pytest.MonkeyPatch.context() as old:
        the_old_way(old)
        ids = history(sessions, days=3)
        with_tries(sessions, ids)
        override(sessions, ids[2])
    with sessions() as s:
        created = s.scalars(select(Event).where(Event.kind == "run_created", Event.run_id == ids[0])).one()
        overridden = s.scalars(select(Event).where(Event.kind == "run_overridden")).one()
    assert "data_interval_start" not in created.details and "try_rows" not in overridden.covers["run"]
    assert "tries" not in overridden.covers["run"]
    assert lines(sessions) == []  # no false alarm: each event is checked against what it recorded
    tamper(sessions, "UPDATE task_try SET dag_version = 'deadbeef'")
    tamper(sessions, "UPDATE dag_run SET data_interval_start = '2024-01-01 00:00:00.000000'")
    tamper(sessions, "UPDATE lineage_write SET rows = 999")
    assert lines(sessions) == []  # recorded by none of those events: nothing to compare
    tamper(sessions, "UPDATE dag_run SET logical_date = '2025-01-01 00:00:00.000000' WHERE id = :id", id=ids[0])
    tamper(sessions, "UPDATE dag_run SET overridden_by = NULL WHERE id = :id", id=ids[2])
    assert lines(sessions) == [
        f"daily: run {ids[0]} is not what event {created.id} (run_created) recorded of it (logical_date "
        "'2024-03-01T00:00:00.000000Z' -> '2025-01-01T00:00:00.000000Z'): no event explains it",
        f"daily: run {ids[2]} is not what event {overridden.id} (run_overridden) recorded of it (overridden_by "
        f"{overridden.details['overridden_by']} -> None): no event explains it"]


def test_a_finished_runs_tries_and_lineage_writes_are_covered(sessions: Any) -> None:
    ids = history(sessions, days=2)
    with_tries(sessions, ids)
    with sessions() as s:
        last = {i: s.scalars(select(Event.id).where(Event.run_id == i).order_by(Event.seq.desc())).first()
                for i in ids}
    assert lines(sessions) == []
    tamper(sessions, "UPDATE task_try SET dag_version = 'deadbeef' WHERE task_instance_id IN "
                     "(SELECT id FROM task_instance WHERE run_id = :id)", id=ids[0])
    tamper(sessions, "UPDATE lineage_write SET rows = 999 WHERE run_id = :id", id=ids[1])
    assert lines(sessions) == [
        f"daily: run {ids[0]} is not what its last event ({last[ids[0]]}) recorded (its tries' states or "
        "versions): no event explains it",
        f"daily: run {ids[1]} is not what its last event ({last[ids[1]]}) recorded (its lineage writes): no event "
        "explains it"]
