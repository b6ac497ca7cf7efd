"""Creating due runs: fast-forward along each DAG's current schedule from its timeline.

The next interval is derived from the timeline itself (the latest live scheduled or backfill run),
never from a separately stored "next run" field, so rewriting history cannot leave it stale.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from ledger.models import Dag, DagRun
from ledger.schedule import DataInterval, next_scheduled
from ledger.states import RunState, RunType
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.versions import DagSpec

SCHEDULING_TYPES = [RunType.SCHEDULED.value, RunType.BACKFILL.value]
MAX_NEW_RUNS_PER_DAG = 256  # per loop; catch-up continues on the next loop


def resume_points(session: Session, dag_ids: list[str] | None = None) -> dict[str, datetime]:
    """Per DAG, the data-interval end of the latest live scheduled or backfill run (one query)."""
    live = DagRun.state != RunState.OVERRIDDEN.value
    latest = (select(DagRun.dag_id, func.max(DagRun.logical_date).label("at"))
              .where(live, DagRun.run_type.in_(SCHEDULING_TYPES)).group_by(DagRun.dag_id))
    if dag_ids is not None:
        latest = latest.where(DagRun.dag_id.in_(dag_ids))
    sub = latest.subquery()
    stmt = select(DagRun.dag_id, DagRun.data_interval_end).join(
        sub, and_(sub.c.dag_id == DagRun.dag_id, sub.c.at == DagRun.logical_date)).where(live)
    return {dag_id: end for dag_id, end in session.execute(stmt).tuples()}


def due_for(spec: DagSpec, after: datetime | None, now: datetime,
            held: Collection[datetime] = ()) -> list[DataInterval]:
    """The intervals to create now: the first of `next_scheduled` that have ended (the same rule that
    `ledger dags next-runs` prints)."""
    upcoming = next_scheduled(spec.schedule, start_date=spec.start_date, end_date=spec.end_date,
                              after=after, now=now, catchup=spec.catchup, held=held,  # type: ignore[arg-type]
                              n=MAX_NEW_RUNS_PER_DAG)
    return list(itertools.takewhile(lambda i: i.end <= now, upcoming))


def create_due_runs(session: Session, *, now: datetime, actor: str, dag_ids: list[str] | None = None) -> list[DagRun]:
    """Create (and splice) every due run of every active, unpaused DAG; dates already held by a live
    run (for example a manual one) are skipped, not created twice."""
    stmt = select(Dag.dag_id, Dag.current_version).where(Dag.is_active.is_(True), Dag.is_paused.is_(False),
                                                         Dag.current_version.is_not(None))
    if dag_ids is not None:
        stmt = stmt.where(Dag.dag_id.in_(dag_ids))
    dags = list(session.execute(stmt).tuples())
    resume = resume_points(session, [d for d, _ in dags])
    created: list[DagRun] = []
    for dag_id, version in dags:
        assert version is not None
        spec = dag_store.spec(session, dag_id, version)
        if not due_for(spec, resume.get(dag_id), now):
            continue
        # something is due: lock the timeline, then read it again (a backfill may have just spliced)
        run_store.lock_timeline(session, dag_id)
        intervals = due_for(spec, resume_points(session, [dag_id]).get(dag_id), now)
        if not intervals:
            continue
        held = set(session.scalars(select(DagRun.logical_date).where(
            DagRun.dag_id == dag_id, DagRun.state != RunState.OVERRIDDEN.value,
            DagRun.logical_date >= intervals[0].start, DagRun.logical_date <= intervals[-1].start)))
        todo = [i for i in intervals if i.logical_date not in held]
        ids = run_store.splice_many(session, spec, [run_store.NewRun(i, RunType.SCHEDULED) for i in todo],
                                    now=now, actor=actor, lock=False)
        if ids:
            created.extend(session.scalars(select(DagRun).where(DagRun.id.in_(ids)).order_by(DagRun.logical_date)))
    return created
