"""The dataset tallies (decision 0300): what was written of each dataset (rows, distinct partitions, the newest id, per
source) kept in the transaction that writes the rows, so that the dataset graph reads a row per dataset; checked
against the rows in verify mode; filled by migration 0014 from the rows already there. And a dataset's newest
partitions, read newest first along the `(dataset, id)` index of that migration. In process, real SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import insert

from ledger.models import DatasetEvent
from ledger.store import dataset_graph as graph_store
from ledger.store import dataset_tally, lineage
from ledger.store import datasets as dataset_store
from ledger.store.dataset_tally import StaleTally, Tally
from ledger.store.db import alembic_config, make_engine, make_sessions
from tests.conftest import migrated_sessions
from tests.store.test_timeline_store import add, setup_dag


def a_run(sessions: Any, clock: Any) -> int:
    with sessions.begin() as session:
        return int(add(session, setup_dag(session, clock), 0, clock).id)


def events(sessions: Any, run_id: int, clock: Any, *keys: tuple[str, str | None]) -> None:
    with sessions.begin() as session:
        dataset_store.record_events(session, [
            {"dataset": d, "partition": p, "run_id": run_id, "dag_id": "daily", "task_id": "a", "try_number": 1,
             "downstream": False, "created_at": clock.now()} for d, p in keys])


def writes(sessions: Any, run_id: int, clock: Any, *keys: tuple[str, str]) -> None:
    with sessions.begin() as session:
        lineage.record(session, [{"dataset": d, "partition": p, "rows": 1} for d, p in keys], run_id=run_id,
                       dag_id="daily", task_id="a", try_number=1, dag_version="v", try_state="success",
                       now=clock.now())


def tallies(sessions: Any) -> dict[tuple[str, str], Tally]:
    with sessions() as session:
        assert dataset_tally.differences(session) == []
        return dataset_tally.read(session)


def test_the_tallies_count_rows_partitions_and_the_newest_row_as_rows_are_written(sessions: Any, clock: Any) -> None:
    run_id = a_run(sessions, clock)
    assert tallies(sessions) == {}
    events(sessions, run_id, clock, ("sales", "2024-03-01"), ("sales", "2024-03-02"), ("audit", None))
    first = tallies(sessions)
    assert first[("sales", "event")] == Tally(2, 2, first[("sales", "event")].newest_id)
    assert first[("audit", "event")] == Tally(1, 0, first[("audit", "event")].newest_id)  # no partition named
    # a partition written again (also twice in one transaction) is one partition; a new one counts
    events(sessions, run_id, clock, ("sales", "2024-03-02"), ("sales", "2024-03-03"), ("sales", "2024-03-03"))
    writes(sessions, run_id, clock, ("sales", "2024-03-01"), ("sales", "2024-03-01"), ("clean", "2024-03-01"))
    now = tallies(sessions)
    assert now[("sales", "event")].rows == 5 and now[("sales", "event")].partitions == 3
    assert now[("sales", "write")].rows == 2 and now[("sales", "write")].partitions == 1
    assert now[("clean", "write")].rows == 1 and ("clean", "event") not in now
    with sessions() as session:
        found = graph_store.written(session, verify=True)
        newest = session.get(DatasetEvent, now[("sales", "event")].newest_id)
    assert newest is not None and newest.partition == "2024-03-03"
    assert (found["sales"].events, found["sales"].writes, found["sales"].partitions) == (5, 2, 3)
    assert found["sales"].newest is not None and found["sales"].newest.run_id == run_id


def test_a_transaction_rolled_back_leaves_the_tallies_as_they_were(sessions: Any, clock: Any) -> None:
    run_id = a_run(sessions, clock)
    events(sessions, run_id, clock, ("sales", "2024-03-01"))
    before = tallies(sessions)
    with pytest.raises(RuntimeError, match="given up"), sessions.begin() as session:
        dataset_store.record_events(session, [
            {"dataset": "sales", "partition": "2024-03-09", "run_id": run_id, "dag_id": "daily", "task_id": "a",
             "try_number": 1, "downstream": False, "created_at": clock.now()}])
        raise RuntimeError("given up")
    assert tallies(sessions) == before
    events(sessions, run_id, clock, ("sales", "2024-03-09"))  # nothing noted by the rolled back one is left over
    assert tallies(sessions)[("sales", "event")].rows == 2


def test_verify_mode_finds_a_tally_left_stale_by_rows_written_past_it(sessions: Any, clock: Any) -> None:
    run_id = a_run(sessions, clock)
    events(sessions, run_id, clock, ("sales", "2024-03-01"))
    with sessions.begin() as session:  # an INSERT past `record_events` (as a hand-written seed would)
        session.execute(insert(DatasetEvent), [{
            "dataset": "sales", "partition": "2024-03-02", "run_id": run_id, "dag_id": "daily", "task_id": "a",
            "try_number": 1, "downstream": False, "created_at": clock.now()}])
    with sessions() as session:
        assert graph_store.written(session)["sales"].events == 1  # the tally, unchecked
        (line,) = dataset_tally.differences(session)
        assert line.startswith("dataset 'sales' (events): tallied Tally(rows=1, partitions=1,")
        assert "counted Tally(rows=2, partitions=2," in line
        with pytest.raises(StaleTally, match="the dataset tallies disagree with the rows: dataset 'sales'"):
            graph_store.written(session, verify=True)
    with sessions.begin() as session:
        assert dataset_tally.recount(session) == 1
    assert tallies(sessions)[("sales", "event")].rows == 2


def test_the_migration_tallies_the_rows_already_written(tmp_path: Path, clock: Any) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    run_id = a_run(make_sessions(engine), clock)  # (made by today's code, then taken back to before the tallies)
    engine.dispose()
    command.downgrade(alembic_config(url), "0013")
    engine = make_engine(url)
    sessions = make_sessions(engine)
    with sessions.begin() as session:  # rows of a ledger from before the tallies
        session.execute(insert(DatasetEvent), [{
            "dataset": "sales", "partition": p, "run_id": run_id, "dag_id": "daily", "task_id": "a", "try_number": 1,
            "downstream": False, "created_at": clock.now()} for p in ("2024-03-01", "2024-03-01", "2024-03-02")])
    engine.dispose()
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    found = tallies(make_sessions(engine))
    engine.dispose()
    assert found == {("sales", "event"): Tally(3, 2, found[("sales", "event")].newest_id)}


def test_a_datasets_newest_partitions_are_those_written_last_read_a_page_at_a_time(
        sessions: Any, clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_store, "PAGE", 2)
    run_id = a_run(sessions, clock)
    for p in ("01", "02", "03", "04"):
        writes(sessions, run_id, clock, ("sales", p), ("other", p))
    writes(sessions, run_id, clock, ("sales", "02"), ("sales", "02"), ("sales", "02"))  # rewritten: newest again
    with sessions() as session:
        assert graph_store.newest_partitions(session, "sales", limit=3) == ["02", "04", "03"]
        assert graph_store.newest_partitions(session, "sales", limit=10) == ["02", "04", "03", "01"]
        assert graph_store.newest_partitions(session, "nothing", limit=3) == []


@pytest.mark.postgres
def test_two_transactions_writing_the_same_new_partition_at_once_count_it_once(postgres_url: str, clock: Any) -> None:
    engine, sessions = migrated_sessions(postgres_url)
    run_id = a_run(sessions, clock)
    row = {"dataset": "sales", "partition": "2024-03-01", "run_id": run_id, "dag_id": "daily", "task_id": "a",
           "try_number": 1, "downstream": False, "created_at": clock.now()}
    first, second = sessions(), sessions()
    try:
        # both insert the partition before either commits: neither sees the other's row yet
        dataset_store.record_events(first, [row])
        dataset_store.record_events(second, [row])
        first.commit()  # counts the partition: the second's row is not committed
        second.commit()  # locks the tally after the first committed, and sees its row: not a new partition
    finally:
        first.close()
        second.close()
    assert tallies(sessions)[("sales", "event")] == Tally(2, 1, tallies(sessions)[("sales", "event")].newest_id)
    engine.dispose()
