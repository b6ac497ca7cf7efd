"""What a run's document reads (`ledger runs show`, the run's web page and API), selected from the Core tables of
ledger/models/tables.py: no mapped class and no ORM, so a command that only shows a run loads neither
(decision 0317).

Each function takes a Connection or a Session (both execute a Core select) and returns rows, read-only: a row
names its columns as attributes, as a mapped object would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Row, select

from ledger.core.errors import InvalidInput, NotFound, RunNotFound
from ledger.core.mapping import label
from ledger.models.tables import (
    dag_run,
    dag_version,
    dataset_consumed,
    dataset_event,
    event,
    lineage_write,
    task_instance,
    task_try,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.orm import Session

    Reader = Connection | Session

V = TypeVar("V")

CODE_DROPPED = "code_dropped"  # the event a forced downgrade records (migrations/code_guard.py)


def run_key(run_id: int | str) -> int:
    """A run id as given on a command line or in a URL (InvalidInput: not a number)."""
    try:
        return int(run_id)
    except (TypeError, ValueError):
        raise InvalidInput(f"run id must be a number, got {run_id!r}") from None


def run(db: Reader, run_id: int | str) -> Row[Any]:
    """A run by its id (InvalidInput: not a number; RunNotFound: no such run)."""
    found = db.execute(select(dag_run).where(dag_run.c.id == run_key(run_id))).first()
    if found is None:
        raise RunNotFound(str(run_id))
    return found


def version(db: Reader, dag_id: str, version_hash: str) -> Row[Any]:
    """A version of a DAG by its full hash or an unambiguous prefix."""
    return one_version(db.execute(select(dag_version).where(
        dag_version.c.dag_id == dag_id, dag_version.c.version_hash.startswith(version_hash))).all(),
        dag_id, version_hash)


def one_version(rows: Sequence[V], dag_id: str, version_hash: str) -> V:
    """The one version a hash or prefix matched; NotFound when none did, InvalidInput when several did."""
    if len(rows) != 1:
        error = NotFound if not rows else InvalidInput
        what = "no" if not rows else "more than one"
        raise error(f"{what} version of DAG {dag_id!r} matches {version_hash!r}; "
                    f"see `ledger dags versions {dag_id}`")
    return rows[0]


def code_dropped_by(db: Reader, v: Any) -> Row[Any] | None:
    """The `code_dropped` event of a forced `ledger db downgrade` that dropped version `v`'s code (None: its code
    is stored, or it never had any)."""
    if v.code_snapshot is not None or v.source_code is not None:
        return None
    for e in db.execute(select(event).where(event.c.dag_id == v.dag_id, event.c.kind == CODE_DROPPED)
                        .order_by(event.c.id)):
        if v.version_hash in (e.details or {}).get("versions", ()):
            return e
    return None


def task_instances(db: Reader, run_id: int) -> list[Row[Any]]:
    """A run's task instances, in the order they were made."""
    return list(db.execute(select(task_instance).where(task_instance.c.run_id == run_id)
                           .order_by(task_instance.c.id)))


def tries_of_run(db: Reader, run_id: int) -> list[tuple[str, Row[Any]]]:
    """(label, try) of every try of a run's task instances (label: the task id, `task[i]` for a mapped
    instance), by task, map index, then try number."""
    return [(label(row.ti_task_id, row.ti_map_index), row) for row in db.execute(
        select(task_try, task_instance.c.task_id.label("ti_task_id"), task_instance.c.map_index.label("ti_map_index"))
        .join(task_instance, task_try.c.task_instance_id == task_instance.c.id)
        .where(task_instance.c.run_id == run_id)
        .order_by(task_instance.c.task_id, task_instance.c.map_index, task_try.c.try_number))]


def writes_of_run(db: Reader, run_id: int) -> list[Row[Any]]:
    """The dataset partitions a run's tries wrote, in the order they were written."""
    return list(db.execute(select(lineage_write).where(lineage_write.c.run_id == run_id)
                           .order_by(lineage_write.c.written_at, lineage_write.c.id)))


def consumed_of(db: Reader, run_ids: Iterable[int]) -> list[tuple[int, bool, Row[Any]]]:
    """(consumer run, cause, event) of the runs, oldest event first."""
    return [(row.consumer_run_id, bool(row.consumed_cause), row) for row in db.execute(
        select(dataset_event, dataset_consumed.c.run_id.label("consumer_run_id"),
               dataset_consumed.c.cause.label("consumed_cause"))
        .join(dataset_consumed, dataset_event.c.id == dataset_consumed.c.event_id)
        .where(dataset_consumed.c.run_id.in_(list(run_ids))).order_by(dataset_event.c.id))]


def writers_of(db: Reader, event_ids: Sequence[int]) -> dict[int, tuple[str, int, str, int | None]]:
    """event id -> (DAG, run, task, backfill of that run) that wrote it."""
    if not event_ids:
        return {}
    return {i: (d, r, t, b) for i, d, r, t, b in db.execute(
        select(dataset_event.c.id, dataset_event.c.dag_id, dataset_event.c.run_id, dataset_event.c.task_id,
               dag_run.c.backfill_id)
        .join(dag_run, dag_run.c.id == dataset_event.c.run_id)
        .where(dataset_event.c.id.in_(list(set(event_ids))))).tuples()}


def inlet_reads(db: Reader, run_id: int) -> list[Row[Any]]:
    """The `inlets_read` events of a run's tries (what each try was given of its inlets), oldest first."""
    return list(db.execute(select(event).where(event.c.run_id == run_id, event.c.kind == "inlets_read")
                           .order_by(event.c.id)))
