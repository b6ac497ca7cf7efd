"""Turning a backfill plan into a backfill row and runs spliced into the timeline (one transaction)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pendulum import DateTime
from sqlalchemy.orm import Session

from ledger.core.backfill_plan import (
    Action,
    LiveRun,
    PastRun,
    PlanItem,
    Reprocess,
    backfill_intervals,
    blocking_run,
    local,
    plan_backfill,
    reconcile,
)
from ledger.core.errors import InvalidInput
from ledger.core.states import BackfillState, JobState, RunType
from ledger.core.versions import DagSpec
from ledger.models import Backfill
from ledger.store import backfills as backfill_store
from ledger.store import events
from ledger.store import jobs as job_store
from ledger.store import runs as run_store
from ledger.store.transitions import move_backfill


@dataclass(frozen=True)
class BackfillRequest:
    dag_id: str
    start: DateTime
    end: DateTime
    reprocess: Reprocess = Reprocess.NONE
    backwards: bool = False
    conf: dict[str, Any] | None = None
    max_active_runs: int | None = None
    submit: bool = False
    requested_by: str = "cli"
    downstream: bool = False  # its rewrites re-run the consumer runs that read them (backfill/downstream.py)


def live_runs(session: Session, dag_id: str, start: datetime, end: datetime, *, now: datetime,
              stale_after: float) -> dict[datetime, LiveRun]:
    stale = now - timedelta(seconds=stale_after)
    dead = set(job_store.dead_local_holders(session, 0))  # on this host, a job whose process is gone is dead now
    out = {}
    for r in backfill_store.runs_in_range(session, dag_id, start, end):
        alive = r.lock_holder is not None and r.job_state == JobState.RUNNING.value and r.latest_heartbeat >= stale \
            and r.lock_holder not in dead
        out[r.logical_date] = LiveRun(r.id, r.state, r.run_type, r.lock_holder, alive, r.backfill_id,
                                      bool(r.submit_only))
    return out


def make_plan(session: Session, spec: DagSpec, request: BackfillRequest, *, now: datetime,
              stale_after: float) -> list[PlanItem]:
    intervals = backfill_intervals(spec, request.start, request.end, now=now, backwards=request.backwards)
    live = live_runs(session, spec.dag_id, intervals[0].start, intervals[-1].start, now=now,
                     stale_after=stale_after)
    plan = plan_backfill(intervals, live, request.reprocess, backwards=request.backwards)
    found = run_store.live_before(session, spec.dag_id, intervals[0].start)
    before = None if found is None else PastRun(found[0].id, found[0].logical_date, found[0].run_type,
                                                found[0].state, found[1])
    blocked = blocking_run(plan, before, [t.task_id for t in spec.tasks.values() if t.depends_on_past])
    if blocked is not None:
        run, tasks = blocked
        first = min(i.logical_date for i in plan if i.action != Action.SKIP)
        overrides = sum(1 for i in plan if i.action == Action.OVERRIDE)
        raise InvalidInput(
            f"the backfill would replace {overrides} finished run(s) with runs that could never start: task(s) "
            f"{', '.join(tasks)} depend on the past and did not succeed in {run.run_type} run {run.run_id} "
            f"({local(run.logical_date, spec)}, failed), the live run before {local(first, spec)}; "
            f"start the range at {local(run.logical_date, spec)} with --reprocess failed, or re-run that date "
            "first")
    return plan


def create_backfill(session: Session, spec: DagSpec, request: BackfillRequest, plan: list[PlanItem], *,
                    now: datetime, actor: str, job_id: int | None) -> Backfill:
    """Write the backfill row and splice its runs; runs are held by `job_id` when it will execute them."""
    row = Backfill(dag_id=spec.dag_id, range_start=request.start, range_end=request.end,
                   reprocess=request.reprocess.value, state=BackfillState.RUNNING.value,
                   requested_by=request.requested_by, backwards=request.backwards, submit_only=request.submit,
                   max_active_runs=request.max_active_runs, conf=request.conf, created_at=now,
                   downstream=request.downstream)
    backfill_store.add(session, row)
    todo = [i for i in plan if i.action != Action.SKIP]
    run_store.splice_many(session, spec, [run_store.NewRun(i.interval, RunType.BACKFILL, request.conf, row.id,
                                                           lock_holder=job_id) for i in todo],
                          now=now, actor=actor, replace=[i.action == Action.OVERRIDE for i in todo])
    counts = {a.value: sum(1 for i in plan if i.action == a) for a in Action}
    events.record(session, "backfill_created", at=now, actor=actor, dag_id=spec.dag_id, backfill_id=row.id,
                  start=request.start.isoformat(), end=request.end.isoformat(), reprocess=request.reprocess.value,
                  version=spec.version_hash, submit=request.submit, **counts,
                  **({"downstream": True} if request.downstream else {}))
    if not any(i.action != Action.SKIP or i.adopts_backfill is not None for i in plan):
        move_backfill(row, BackfillState.SUCCESS, ended_at=now)  # nothing to create, nothing to finish
    return row


@dataclass(frozen=True)
class Created:
    """What create_confirmed() did: the backfill, the plan it carried out, what it took over from dead ones."""

    backfill_id: int
    plan: list[PlanItem]
    adopted: list[int]  # earlier backfills whose unfinished runs this one finishes
    adopted_runs: list[int]


def create_confirmed(session: Session, spec: DagSpec, request: BackfillRequest, shown: list[PlanItem], *,
                     now: datetime, actor: str, job_id: int | None, stale_after: float) -> Created:
    """The backfill the user confirmed, in one transaction: lock the DAG's timeline, plan again, keep of the
    plan shown only what still holds (ledger.core.backfill_plan.reconcile), write the backfill and its runs (held by
    `job_id` when this process executes them), and record which dead backfills it adopts."""
    run_store.lock_timeline(session, spec.dag_id)
    fresh = make_plan(session, spec, request, now=now, stale_after=stale_after)
    plan = reconcile(shown, fresh)
    row = create_backfill(session, spec, request, plan, now=now, actor=actor, job_id=job_id)
    adopted = sorted({i.adopts_backfill for i in plan if i.adopts_backfill is not None})
    for other in adopted:
        events.record(session, "backfill_adopted", at=now, actor=actor, dag_id=spec.dag_id, backfill_id=other,
                      by_backfill_id=row.id)
    return Created(row.id, plan, adopted, sorted(i.adopts_run_id for i in plan if i.adopts_run_id is not None))


def plan_json(plan: list[PlanItem]) -> list[dict[str, Any]]:
    return [{"logical_date": i.logical_date.isoformat(), "data_interval_start": i.interval.start.isoformat(),
             "data_interval_end": i.interval.end.isoformat(), "action": i.action.value, "reason": i.reason,
             "replaces_run_id": None if i.replaces_run_id is None else str(i.replaces_run_id),
             "adopts_backfill": None if i.adopts_backfill is None else str(i.adopts_backfill)} for i in plan]
