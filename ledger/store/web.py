"""Read-only queries of the web view: pages of a timeline, the latest runs of DAGs, a version's predecessor.

Pages are keyed by a cursor (the id of the last run shown) and read with the (dag_id, logical_date) index,
so the first page of a 100,000-run timeline reads a page of rows, not the timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from ledger.core.errors import InvalidInput
from ledger.core.states import RunState
from ledger.models import DagRun, DagVersion, TaskInstance, TaskTry
from ledger.store.runs import TIMELINE_COLUMNS, _raw


def _one_more(limit: int) -> int:
    """A page's rows and one more (to tell whether another page follows), within a 64-bit integer: a limit of
    2**63 - 1, the largest a command takes, asks for every row."""
    return min(limit, 2**63 - 2) + 1


def versions_of_tries(session: Session, run_ids: list[int]) -> dict[int, int]:
    """Run id -> how many DAG versions its tries ran, for those of the runs whose tries ran more than one (a part
    of it cleared on a later version): one grouped query over the page's runs."""
    if not run_ids:
        return {}
    versions = func.count(func.distinct(TaskTry.dag_version))
    return {run_id: n for run_id, n in session.execute(
        select(TaskInstance.run_id, versions).join(TaskTry, TaskTry.task_instance_id == TaskInstance.id)
        .where(TaskInstance.run_id.in_(run_ids)).group_by(TaskInstance.run_id).having(versions > 1))}


def timeline_page(session: Session, dag_id: str, *, start: datetime | None = None, end: datetime | None = None,
                  cursor: int | None = None, limit: int = 100, newest_first: bool = False) -> list[Any]:
    """Up to `limit` + 1 runs of a DAG (live and overridden, raw rows as store.runs.timeline_rows gives them),
    in timeline order (logical date, creation, id) or its reverse, after the run `cursor` in that order.
    The extra row says that there is a next page."""
    key = (DagRun.logical_date, DagRun.created_at, DagRun.id)
    stmt = select(*(_raw(c) for c in TIMELINE_COLUMNS)).where(DagRun.dag_id == dag_id)
    if start is not None:
        stmt = stmt.where(DagRun.logical_date >= start)
    if end is not None:
        stmt = stmt.where(DagRun.logical_date <= end)
    if cursor is not None:
        at = session.execute(select(*key).where(DagRun.id == cursor, DagRun.dag_id == dag_id)).first()
        if at is None:
            raise InvalidInput(f"cursor {cursor} is not a run of DAG {dag_id!r}")
        logical, created, run_id = at
        if newest_first:
            stmt = stmt.where(DagRun.logical_date <= logical, or_(
                DagRun.logical_date < logical,
                and_(DagRun.logical_date == logical, or_(
                    DagRun.created_at < created, and_(DagRun.created_at == created, DagRun.id < run_id)))))
        else:
            stmt = stmt.where(DagRun.logical_date >= logical, or_(
                DagRun.logical_date > logical,
                and_(DagRun.logical_date == logical, or_(
                    DagRun.created_at > created, and_(DagRun.created_at == created, DagRun.id > run_id)))))
    order = [c.desc() for c in key] if newest_first else list(key)
    return list(session.connection().execute(stmt.order_by(*order).limit(_one_more(limit))))


def latest_states(session: Session, dag_id: str, n: int = 5) -> list[tuple[int, str]]:
    """(run id, state) of the DAG's `n` latest runs by logical date, newest first."""
    return [(r.id, r.state) for r in session.execute(
        select(DagRun.id, DagRun.state).where(DagRun.dag_id == dag_id)
        .order_by(DagRun.logical_date.desc(), DagRun.created_at.desc()).limit(n))]


def previous_version(session: Session, version: DagVersion) -> DagVersion | None:
    """The version of the same DAG registered just before `version`."""
    return session.scalar(
        select(DagVersion).where(DagVersion.dag_id == version.dag_id, or_(
            DagVersion.created_at < version.created_at,
            and_(DagVersion.created_at == version.created_at, DagVersion.id < version.id)))
        .order_by(DagVersion.created_at.desc(), DagVersion.id.desc()).limit(1))


def replaced_by_run(session: Session, run_id: int) -> list[DagRun]:
    """The runs that `run_id` overrode (they point at it with overridden_by)."""
    return list(session.scalars(select(DagRun).where(DagRun.overridden_by == run_id).order_by(DagRun.id)))


def grid_runs(session: Session, dag_id: str, *, limit: int, before: int | None = None,
              states: list[str] | None = None, until: datetime | None = None) -> list[DagRun]:
    """Up to `limit` + 1 live (not overridden) runs of a DAG, newest logical date first, older than the run
    `before` when given: the columns of a grid page, read through the (dag_id, logical_date) index. `states`:
    only runs in them (the failed-only filter); `until`: only runs at or before that logical date (a jump to a
    date)."""
    stmt = select(DagRun).where(DagRun.dag_id == dag_id, DagRun.state != RunState.OVERRIDDEN.value)
    if states:
        stmt = stmt.where(DagRun.state.in_(states))
    if until is not None:
        stmt = stmt.where(DagRun.logical_date <= until)
    if before is not None:
        at = session.execute(select(DagRun.logical_date, DagRun.id)
                             .where(DagRun.id == before, DagRun.dag_id == dag_id)).first()
        if at is None:
            raise InvalidInput(f"run {before} is not a run of DAG {dag_id!r}")
        stmt = stmt.where(or_(DagRun.logical_date < at[0], and_(DagRun.logical_date == at[0], DagRun.id < at[1])))
    return list(session.scalars(stmt.order_by(DagRun.logical_date.desc(), DagRun.id.desc()).limit(_one_more(limit))))


def grid_cells(session: Session, run_ids: list[int]) -> list[tuple[int, str, int, str, int]]:
    """(run id, task id, map index, state, try number) of every task instance of these runs."""
    if not run_ids:
        return []
    return [tuple(r) for r in session.execute(
        select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state,
               TaskInstance.try_number).where(TaskInstance.run_id.in_(run_ids)))]


def replaced_among(session: Session, runs: list[DagRun]) -> list[tuple[int, int, str]]:
    """(overridden run id, the run that replaced it, its run type) for the runs these runs (of one DAG) overrode;
    read through the (dag_id, logical_date) index over the runs' dates."""
    if not runs:
        return []
    ids = [r.id for r in runs]
    return [(r.id, r.overridden_by, r.run_type) for r in session.execute(
        select(DagRun.id, DagRun.overridden_by, DagRun.run_type)
        .where(DagRun.dag_id == runs[0].dag_id, DagRun.logical_date >= min(r.logical_date for r in runs),
               DagRun.logical_date <= max(r.logical_date for r in runs), DagRun.overridden_by.in_(ids))
        .order_by(DagRun.id))]


def runs_across(session: Session, *, states: list[str], run_types: list[str], dag_id: str | None,
                start: datetime | None, end: datetime | None, before: int | None, limit: int) -> list[DagRun]:
    """Up to `limit` + 1 runs of every DAG (or of `dag_id`), newest created first (by id), in `states` and of
    `run_types` (any when empty), their logical date within [start, end], with an id below `before` (the next
    older page, by keyset). The extra row says that there is a next page."""
    stmt = select(DagRun)
    if states:
        stmt = stmt.where(DagRun.state.in_(states))
    if run_types:
        stmt = stmt.where(DagRun.run_type.in_(run_types))
    if dag_id:
        stmt = stmt.where(DagRun.dag_id == dag_id)
    if start is not None:
        stmt = stmt.where(DagRun.logical_date >= start)
    if end is not None:
        stmt = stmt.where(DagRun.logical_date <= end)
    if before is not None:
        stmt = stmt.where(DagRun.id < before)
    return list(session.scalars(stmt.order_by(DagRun.id.desc()).limit(_one_more(limit))))


def run_state_counts(session: Session) -> dict[str, dict[str, int]]:
    """dag id -> run state -> how many runs of the DAG are in it."""
    counts: dict[str, dict[str, int]] = {}
    for dag_id, state, n in session.execute(
            select(DagRun.dag_id, DagRun.state, func.count()).group_by(DagRun.dag_id, DagRun.state)):
        counts.setdefault(dag_id, {})[state] = n
    return counts


def last_run(session: Session, dag_id: str) -> DagRun | None:
    """The DAG's live run with the latest logical date."""
    return session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.state != RunState.OVERRIDDEN.value)
                          .order_by(DagRun.logical_date.desc(), DagRun.id.desc()).limit(1))


def backfill_runs_page(session: Session, backfill_id: int, *, offset: int, limit: int) -> tuple[int, list[DagRun]]:
    """(how many runs the backfill created, `limit` of them from `offset`, by logical date)."""
    where = DagRun.backfill_id == backfill_id
    total = session.scalar(select(func.count()).select_from(DagRun).where(where)) or 0
    rows = list(session.scalars(select(DagRun).where(where).order_by(DagRun.logical_date, DagRun.id)
                                .offset(offset).limit(limit)))
    return total, rows


def task_instance_tries(session: Session, run_id: int, task_id: str) -> list[tuple[TaskInstance, TaskTry | None]]:
    """A task's instances in a run (each map index) with each of their tries (None: an instance not tried yet), by
    map index then try number: the grid's detail panel, in one outer join."""
    return [(ti, t) for ti, t in session.execute(
        select(TaskInstance, TaskTry).outerjoin(TaskTry, TaskTry.task_instance_id == TaskInstance.id)
        .where(TaskInstance.run_id == run_id, TaskInstance.task_id == task_id)
        .order_by(TaskInstance.map_index, TaskTry.try_number))]


def live_runs_between(session: Session, dag_id: str, start: datetime, end: datetime) -> list[tuple[datetime, str, int]]:
    """(logical date, state, run id) of a DAG's live runs with a logical date in [start, end), by logical date,
    through the (dag_id, logical_date) index: the calendar's days."""
    return [(r.logical_date, r.state, r.id) for r in session.execute(
        select(DagRun.logical_date, DagRun.state, DagRun.id)
        .where(DagRun.dag_id == dag_id, DagRun.logical_date >= start, DagRun.logical_date < end,
               DagRun.state != RunState.OVERRIDDEN.value)
        .order_by(DagRun.logical_date, DagRun.id))]


def latest_try_spans(session: Session, run_ids: list[int]) -> list[tuple[int, str, str | None, Any, Any]]:
    """(run id, task id, state, started at, ended at) of the latest try of each task instance of these runs (a
    mapped task: one row per instance), one query: the task duration chart."""
    if not run_ids:
        return []
    return [tuple(r) for r in session.execute(
        select(TaskInstance.run_id, TaskInstance.task_id, TaskTry.state, TaskTry.started_at, TaskTry.ended_at)
        .join(TaskTry, and_(TaskTry.task_instance_id == TaskInstance.id,
                            TaskTry.try_number == TaskInstance.try_number))
        .where(TaskInstance.run_id.in_(run_ids)))]
