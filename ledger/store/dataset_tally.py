"""What was written of each dataset, kept as it is written (decision 0300): per dataset and source (`event`: its
dataset events, `write`: its recorded writes) how many rows, how many distinct partitions they name, and the newest
row's id, in `dataset_tally`. The dataset graph reads a row per dataset instead of counting index entries (two
200,000-entry indexes at 10,000 runs x 20 tasks).

The two doors that insert those rows (`datasets.record_events`, `lineage.record`) `note` them in the session; as
the transaction commits (ledger/store/commit.py) `apply` locks the tally rows of the datasets it wrote (one
`SELECT ... FOR UPDATE` in the order of their keys, so that two writers never wait for each other in a circle) and
only then asks which of its partitions are new: on PostgreSQL a writer of the same partition that committed first
is visible by then, so a partition is counted once; on SQLite every writing transaction holds the database's write
lock from its start.

A tally is a cache and is checkable: `differences` counts the rows again and names every tally that disagrees (the
dataset graph does so on each read in verify mode, LEDGER_VERIFY_MEMORY, on in the test suite); `recount` rewrites
them all from the rows (migration 0014, and a ledger written past these doors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.orm import Session

from ledger.models import DatasetEvent, LineageWrite, tables
from ledger.store import commit
from ledger.store.dialects import conflict_insert

CHUNK = 500  # values per IN (...) clause
PENDING = "ledger.dataset_rows_to_tally"  # session.info key: (source, dataset, partition, id) not tallied yet
SOURCES: dict[str, Any] = {"event": DatasetEvent, "write": LineageWrite}
TALLY = tables.dataset_tally


@dataclass(frozen=True, slots=True)
class Tally:
    rows: int
    partitions: int  # distinct partitions named (an unpartitioned row names none)
    newest_id: int


class StaleTally(AssertionError):
    """Verify mode found a dataset's tally different from its rows: a bug, or rows written past `note`."""


def note(session: Session, source: str, ids: Sequence[int], rows: Sequence[dict[str, Any]]) -> None:
    """Rows of `source` just inserted (their ids and values, in the same order), to tally as the session commits."""
    if session.in_nested_transaction():
        raise RuntimeError("dataset rows are not written inside a savepoint: its rollback would leave a tally wrong")
    pending = session.info.setdefault(PENDING, [])
    pending.extend((source, r["dataset"], r.get("partition"), i) for i, r in zip(ids, rows, strict=True))


def forget(session: Session) -> None:
    """The transaction ended without committing: nothing it noted is tallied."""
    session.info.pop(PENDING, None)


def apply(session: Session) -> None:
    """Add the rows this session's transaction noted to their tallies (before it commits)."""
    pending: list[tuple[str, str, str | None, int]] = session.info.pop(PENDING, None) or []
    if not pending:
        return
    session.flush()
    tallies = _lock(session, sorted({dataset for _s, dataset, _p, _i in pending}))
    changed = []
    for source, model in SOURCES.items():
        mine = [(d, p, i) for s, d, p, i in pending if s == source]
        if not mine:
            continue
        new = _new_partitions(session, model, Counter((d, p) for d, p, _i in mine if p is not None))
        by_dataset: dict[str, list[int]] = {}
        for d, _p, i in mine:
            by_dataset.setdefault(d, []).append(i)
        for dataset, ids in sorted(by_dataset.items()):
            old = tallies[(dataset, source)]
            changed.append({"d": dataset, "s": source, "n": old.rows + len(ids), "p": old.partitions + new[dataset],
                            "i": max(old.newest_id, *ids)})
    session.execute(update(TALLY).where(TALLY.c.dataset == bindparam("d"), TALLY.c.source == bindparam("s"))
                    .values(rows=bindparam("n"), partitions=bindparam("p"), newest_id=bindparam("i")),
                    changed)


def _lock(session: Session, datasets: list[str]) -> dict[tuple[str, str], Tally]:
    """The tallies of `datasets` (both sources), locked in the order of their keys; rows made for those missing."""
    def locked() -> dict[tuple[str, str], Tally]:
        found = {}
        for part in (datasets[i:i + CHUNK] for i in range(0, len(datasets), CHUNK)):
            for d, s, n, p, i in session.execute(
                    select(TALLY.c.dataset, TALLY.c.source, TALLY.c.rows, TALLY.c.partitions, TALLY.c.newest_id)
                    .where(TALLY.c.dataset.in_(list(part))).order_by(TALLY.c.dataset, TALLY.c.source)
                    .with_for_update()):
                found[(d, s)] = Tally(n, p, i)
        return found

    tallies = locked()
    missing = [{"dataset": d, "source": s, "rows": 0, "partitions": 0, "newest_id": 0}
               for d in datasets for s in SOURCES if (d, s) not in tallies]
    if missing:  # a dataset's first rows: make its tallies (another writer may make them at the same moment)
        dialect = session.get_bind().dialect.name
        make: Any = conflict_insert(dialect)(TALLY)
        session.execute(make.on_conflict_do_nothing(index_elements=["dataset", "source"]), missing)
        tallies = locked()
    return tallies


def _new_partitions(session: Session, model: Any, mine: Counter[tuple[str, str | None]]) -> Counter[str]:
    """Per dataset, how many of the partitions this transaction wrote no other row names: all rows of the
    partition are its own (read after the tallies are locked, so a writer that committed first is seen)."""
    new: Counter[str] = Counter()
    by_dataset: dict[str, list[str]] = {}
    for (dataset, partition), _n in sorted(mine.items()):
        by_dataset.setdefault(dataset, []).append(str(partition))
    for dataset, partitions in by_dataset.items():
        for part in (partitions[i:i + CHUNK] for i in range(0, len(partitions), CHUNK)):
            for partition, n in session.execute(
                    select(model.partition, func.count()).where(model.dataset == dataset,
                                                                model.partition.in_(list(part)))
                    .group_by(model.partition)).tuples():
                if n == mine[(dataset, partition)]:
                    new[dataset] += 1
    return new


commit.step(2, apply, forget)


def read(session: Session, datasets: Sequence[str] | None = None) -> dict[tuple[str, str], Tally]:
    """(dataset, source) -> its tally, of every dataset written (or only `datasets`)."""
    stmt = select(TALLY.c.dataset, TALLY.c.source, TALLY.c.rows, TALLY.c.partitions, TALLY.c.newest_id).where(
        TALLY.c.rows > 0)
    if datasets is not None:
        stmt = stmt.where(TALLY.c.dataset.in_(list(datasets)))
    return {(d, s): Tally(n, p, i) for d, s, n, p, i in session.execute(stmt).tuples()}


def counted(session: Session, datasets: Sequence[str] | None = None) -> dict[tuple[str, str], Tally]:
    """What `read` should say, counted from the rows: a scan of each table's `(dataset, partition)` index."""
    found = {}
    for source, model in SOURCES.items():
        # two statements: with count(DISTINCT) beside other aggregates SQLite sorts the partitions in a temporary
        # B-tree; alone, it counts them in the index's order
        counts = select(model.dataset, func.count(), func.max(model.id))
        distinct = select(model.dataset, func.count(model.partition.distinct()))
        if datasets is not None:
            counts = counts.where(model.dataset.in_(list(datasets)))
            distinct = distinct.where(model.dataset.in_(list(datasets)))
        parts = dict(session.execute(distinct.group_by(model.dataset)).tuples().all())
        for d, n, last in session.execute(counts.group_by(model.dataset)).tuples():
            found[(d, source)] = Tally(n, parts.get(d, 0), last)
    return found


def differences(session: Session, datasets: Sequence[str] | None = None) -> list[str]:
    """One line per tally (of `datasets`, or all) that is not what the rows say."""
    kept, truth = read(session, datasets), counted(session, datasets)
    return [f"dataset {d!r} ({s}s): tallied {kept.get((d, s))}, counted {truth.get((d, s))}"
            for d, s in sorted(set(kept) | set(truth)) if kept.get((d, s)) != truth.get((d, s))]


def verified(session: Session, datasets: Sequence[str] | None = None) -> dict[tuple[str, str], Tally]:
    """`read`, after checking it against the rows (verify mode): StaleTally naming what differs."""
    found = differences(session, datasets)
    if found:
        raise StaleTally("the dataset tallies disagree with the rows: " + "; ".join(found[:5]))
    return read(session, datasets)


def recount(session: Session) -> int:
    """Rewrite every tally from the rows (a ledger whose rows were written past `note`); how many there are."""
    truth = counted(session)
    session.execute(delete(TALLY))
    rows = [{"dataset": d, "source": s, "rows": t.rows, "partitions": t.partitions, "newest_id": t.newest_id}
            for (d, s), t in sorted(truth.items())]
    if rows:
        session.execute(insert(TALLY), rows)
    return len(rows)
