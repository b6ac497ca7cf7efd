"""The timeline's persistence: splicing runs into a DAG's chain and overriding live runs.

Each splice costs a constant number of indexed queries (the neighbours of one date), whatever the
length of the timeline. Timeline changes of one DAG are serialised by locking its dag row (SQLite
transactions are already serialised by BEGIN IMMEDIATE).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, type_coerce, update
from sqlalchemy.orm import Session
from sqlalchemy.types import NullType

from ledger.core.audit import created_details
from ledger.core.backfill_cancel import Displaced
from ledger.core.errors import RunNotFound, TimelineConflict
from ledger.core.mapping import NOT_MAPPED, source_text
from ledger.core.schedule import DataInterval
from ledger.core.states import RUN_TRANSITIONS, RunState, RunType, StaleState, TaskState
from ledger.core.timeline import ChainLink, Link, Neighbours, plan_batch, plan_splice
from ledger.core.versions import DagSpec, TaskSpec
from ledger.models import Dag, DagRun, Event, TaskInstance, TaskTry, UtcDateTime
from ledger.store import events
from ledger.store.hot import Hot
from ledger.store.run_reads import run_key
from ledger.store.transitions import guarded, move_run, move_task, restore_run

_RUNS_TABLE: Any = DagRun.__table__
_OVERRIDE = Hot(update(_RUNS_TABLE).where(_RUNS_TABLE.c.id == bindparam("run"), _RUNS_TABLE.c.state == bindparam("was"))
                .values(state=RunState.OVERRIDDEN.value,
                        overridden_at=bindparam("at", type_=_RUNS_TABLE.c.overridden_at.type)))

LIVE = DagRun.state != RunState.OVERRIDDEN.value
SCHEDULING_TYPES = [RunType.SCHEDULED.value, RunType.BACKFILL.value]  # the runs a schedule resumes after


TIMELINE_LOCKED = "ledger.timeline_locked"  # session.info: this transaction locked a DAG's timeline


def lock_timeline(session: Session, dag_id: str) -> None:
    """Serialise timeline changes of one DAG across processes (a row lock on PostgreSQL). Every change to a timeline
    (a run made, displaced or restored) takes it first, so the transaction is marked as one that may have changed
    runs' resume points (`timeline_locked`)."""
    session.info[TIMELINE_LOCKED] = True
    session.execute(select(Dag.dag_id).where(Dag.dag_id == dag_id).with_for_update())


def newest_run_id(session: Session, dag_id: str) -> int:
    """The id of the DAG's newest run (0: it has none): what a form that creates runs was shown against."""
    return session.scalar(select(func.max(DagRun.id)).where(DagRun.dag_id == dag_id)) or 0


def created_by_since(session: Session, dag_id: str, actor: str, after_run_id: int) -> int | None:
    """The newest run of the DAG `actor` created after run `after_run_id` (its `run_created` event), or None."""
    return session.scalar(select(func.max(Event.run_id)).where(
        Event.dag_id == dag_id, Event.kind == "run_created", Event.actor == actor, Event.run_id > after_run_id))


def timeline_locked(session: Session) -> bool:
    """Whether this session's transaction locked a DAG's timeline so far (it may have changed its runs)."""
    return bool(session.info.get(TIMELINE_LOCKED))


def _link(row: Any) -> Link | None:
    return None if row is None else Link(row.id, row.logical_date)


def neighbours(session: Session, dag_id: str, at: datetime) -> Neighbours:
    base = select(DagRun.id, DagRun.logical_date).where(DagRun.dag_id == dag_id, LIVE)
    before = session.execute(base.where(DagRun.logical_date < at).order_by(DagRun.logical_date.desc())
                             .limit(1)).first()
    same = session.execute(base.where(DagRun.logical_date == at)).first()
    after = session.execute(base.where(DagRun.logical_date > at).order_by(DagRun.logical_date).limit(1)).first()
    return Neighbours(_link(before), _link(same), _link(after))


@dataclass(frozen=True, slots=True)
class NewRun:
    interval: DataInterval
    run_type: RunType
    conf: dict[str, Any] | None = None
    backfill_id: int | None = None
    state: RunState = RunState.QUEUED
    lock_holder: int | None = None  # a job that creates runs to execute them itself holds them from the start


def splice(session: Session, spec: DagSpec, new: NewRun, *, now: datetime, actor: str,
           replace: bool = False, lock: bool = True) -> DagRun:
    """Create a run at its logical date, splice it into the chain, override the live run there if
    `replace`; create its task instances from `spec` (the version it runs); append the events."""
    if lock:
        lock_timeline(session, spec.dag_id)
    at = new.interval.logical_date
    around = neighbours(session, spec.dag_id, at)
    plan = plan_splice(around, replace=replace, where=f"DAG {spec.dag_id!r}")
    displaced: DagRun | None = None
    if plan.displaced is not None:
        displaced = session.get(DagRun, plan.displaced)
        assert displaced is not None
        if displaced.lock_holder is not None:
            raise TimelineConflict(f"run {displaced.id} at {at.isoformat()} is in flight (locked by job "
                                   f"{displaced.lock_holder}); wait for it to finish")
        displaced_state = displaced.state
        move_run(displaced, RunState.OVERRIDDEN, overridden_at=now)
        session.flush()  # the displaced run leaves the live index before the new one enters it
    run = DagRun(
        dag_id=spec.dag_id, logical_date=at, data_interval_start=new.interval.start,
        data_interval_end=new.interval.end, run_type=new.run_type.value, state=new.state.value,
        previous_run_id=plan.previous, version_hash=spec.version_hash, schedule=spec.schedule.summary(),
        backfill_id=new.backfill_id, conf=new.conf, created_at=now, lock_holder=new.lock_holder,
    )
    session.add(run)
    session.flush()
    if plan.relink is not None:
        session.execute(update(DagRun).where(DagRun.id == plan.relink).values(previous_run_id=run.id))
    create_task_instances(session, run, spec)
    rows = [dict(at=now, kind="run_created", actor=actor, dag_id=spec.dag_id, run_id=run.id, details=created_details(
        at, new.interval.start, new.interval.end, run.run_type, spec.version_hash, plan.previous, new.backfill_id,
        new.conf)),
        *expanded_at_creation(spec.tasks.values(), spec.dag_id, run.id, now=now, actor=actor)]
    if plan.relink is not None:
        rows.append(dict(at=now, kind="run_spliced", actor=actor, dag_id=spec.dag_id, run_id=plan.relink,
                         details={"previous_run_id": str(run.id), "was": _str(plan.previous)}))
    if displaced is not None:
        displaced.overridden_by = run.id
        rows.append(dict(at=now, kind="run_overridden", actor=actor, dag_id=spec.dag_id, run_id=displaced.id,
                         details={"overridden_by": str(run.id), "state_before": displaced_state,
                                  "logical_date": at.isoformat()}))
    events.record_many(session, rows)
    return run


def displaced_by(session: Session, run_ids: Collection[int]) -> dict[int, Displaced]:
    """For each of these runs that overrode a run still overridden by it: that run, with the state it had then
    (from the `run_overridden` event that recorded the override)."""
    if not run_ids:
        return {}
    held = dict(session.execute(select(DagRun.id, DagRun.overridden_by).where(
        DagRun.overridden_by.in_(list(run_ids)), DagRun.state == RunState.OVERRIDDEN.value)).tuples().all())
    before: dict[int, str | None] = {}
    for run_id, details in session.execute(select(Event.run_id, Event.details).where(
            Event.kind == "run_overridden", Event.run_id.in_(list(held))).order_by(Event.id)):
        if (details or {}).get("overridden_by") == str(held[run_id]):
            before[run_id] = details.get("state_before")
    return {by: Displaced(old, before.get(old)) for old, by in held.items() if by is not None}


def restore_displaced(session: Session, cancelled: DagRun, displaced: Displaced, *, now: datetime, actor: str,
                      reason: str) -> None:
    """The run `cancelled` displaced is live again in the state it had, in the chain where `cancelled` was;
    `cancelled` leaves the chain as history (overridden by it), keeping its task instances and its previous
    (decision 0210). Guarded: StaleState when either run changed meanwhile."""
    assert displaced.state_before is not None
    lock_timeline(session, cancelled.dag_id)
    old = session.get(DagRun, displaced.run_id)
    assert old is not None and old.overridden_by == cancelled.id
    after = session.scalars(select(DagRun).where(DagRun.dag_id == cancelled.dag_id, LIVE,
                                                 DagRun.logical_date > cancelled.logical_date)
                            .order_by(DagRun.logical_date).limit(1)).first()
    ended_as = cancelled.state
    move_run(cancelled, RunState.OVERRIDDEN, overridden_at=now, overridden_by=old.id)
    session.flush()  # the cancelled run leaves the live index before the restored one enters it
    restore_run(old, displaced.state_before, previous_run_id=cancelled.previous_run_id, overridden_by=None,
                overridden_at=None)
    date = cancelled.logical_date.isoformat()
    rows = [dict(at=now, kind="run_overridden", actor=actor, dag_id=old.dag_id, run_id=cancelled.id,
                 details={"overridden_by": str(old.id), "state_before": ended_as, "logical_date": date,
                          "reason": reason}),
            dict(at=now, kind="run_restored", actor=actor, dag_id=old.dag_id, run_id=old.id,
                 details={"state": old.state, "replaces": str(cancelled.id), "logical_date": date,
                          "previous_run_id": _str(old.previous_run_id), "reason": reason})]
    if after is not None and after.previous_run_id == cancelled.id:
        session.execute(update(DagRun).where(DagRun.id == after.id, DagRun.previous_run_id == cancelled.id)
                        .values(previous_run_id=old.id))
        rows.append(dict(at=now, kind="run_spliced", actor=actor, dag_id=old.dag_id, run_id=after.id,
                         details={"previous_run_id": str(old.id), "was": str(cancelled.id)}))
    events.record_many(session, rows)


def splice_many(session: Session, spec: DagSpec, new: list[NewRun], *, now: datetime, actor: str,
                replace: list[bool] | None = None, lock: bool = True) -> list[int]:
    """Splice many runs (distinct dates) at once with a constant number of statements: the window of
    the chain they fall in is read once, planned in memory (timeline.plan_batch), and written back
    with bulk inserts and updates. Returns the new run ids in the order of `new`."""
    if not new:
        return []
    replace = replace or [False] * len(new)
    if lock:
        lock_timeline(session, spec.dag_id)
    dates = [n.interval.logical_date for n in new]
    lo, hi = min(dates), max(dates)
    cols = select(DagRun.id, DagRun.logical_date, DagRun.previous_run_id).where(DagRun.dag_id == spec.dag_id, LIVE)
    rows = list(session.execute(cols.where(DagRun.logical_date >= lo, DagRun.logical_date <= hi)))
    before = session.execute(cols.where(DagRun.logical_date < lo).order_by(DagRun.logical_date.desc()).limit(1)).first()
    after = session.execute(cols.where(DagRun.logical_date > hi).order_by(DagRun.logical_date).limit(1)).first()
    window = sorted((ChainLink(r.id, r.logical_date, r.previous_run_id) for r in [before, *rows, after] if r),
                    key=lambda link: link.logical_date)
    plan = plan_batch(window, dates, replace, where=f"DAG {spec.dag_id!r}")
    lock_state = dict(session.execute(select(DagRun.id, DagRun.lock_holder).where(
        DagRun.id.in_(list(plan.displaced.values())))).tuples().all()) if plan.displaced else {}
    for i, old in plan.displaced.items():
        if lock_state.get(old) is not None:
            raise TimelineConflict(f"run {old} at {dates[i].isoformat()} is in flight (locked by job "
                                   f"{lock_state[old]}); wait for it to finish")
    states_before = dict(session.execute(select(DagRun.id, DagRun.state).where(
        DagRun.id.in_(list(plan.displaced.values())))).tuples().all()) if plan.displaced else {}
    if plan.displaced:
        stale = f"a run of {spec.dag_id} that this backfill overrides changed meanwhile; try again"
        if any(states_before.get(old) not in RUN_TRANSITIONS[RunState.OVERRIDDEN] for old in plan.displaced.values()):
            raise StaleState(stale)
        guarded(session, _OVERRIDE, [{"run": old, "was": states_before.get(old, ""), "at": now}
                                     for old in plan.displaced.values()],
                [(f"run {old}", states_before.get(old, ""), RunState.OVERRIDDEN) for old in plan.displaced.values()],
                stale)
    summary = spec.schedule.summary()
    ids = list(session.scalars(insert(DagRun).returning(DagRun.id, sort_by_parameter_order=True), [
        {"dag_id": spec.dag_id, "logical_date": n.interval.logical_date, "data_interval_start": n.interval.start,
         "data_interval_end": n.interval.end, "run_type": n.run_type.value, "state": n.state.value,
         "previous_run_id": None, "version_hash": spec.version_hash, "schedule": summary,
         "backfill_id": n.backfill_id, "conf": n.conf, "created_at": now, "lock_holder": n.lock_holder}
        for n in new]))

    def resolve(ref: tuple[str, int] | None) -> int | None:
        return None if ref is None else (ids[ref[1]] if ref[0] == "new" else ref[1])

    links = [{"rid": ids[i], "prev": resolve(ref)} for i, ref in plan.new_previous.items() if ref is not None]
    links += [{"rid": old, "prev": resolve(ref)} for old, ref in plan.relink.items()]
    t: Any = DagRun.__table__
    conn = session.connection()
    if links:
        conn.execute(update(t).where(t.c.id == bindparam("rid")).values(previous_run_id=bindparam("prev")), links)
    if plan.displaced:
        conn.execute(update(t).where(t.c.id == bindparam("rid")).values(overridden_by=bindparam("by")),
                     [{"rid": old, "by": ids[i]} for i, old in plan.displaced.items()])
    if spec.tasks:
        session.execute(insert(TaskInstance), [
            row for rid in ids for row in instance_rows(rid, spec.dag_id, spec.tasks.values())])
    log = [dict(at=now, kind="run_created", actor=actor, dag_id=spec.dag_id, run_id=ids[i], details=created_details(
        dates[i], new[i].interval.start, new[i].interval.end, new[i].run_type.value, spec.version_hash,
        resolve(plan.new_previous.get(i)), new[i].backfill_id, new[i].conf)) for i in range(len(new))]
    log += [e for rid in ids for e in expanded_at_creation(spec.tasks.values(), spec.dag_id, rid, now=now,
                                                          actor=actor)]
    current = {link.run_id: link.previous for link in window}
    log += [dict(at=now, kind="run_spliced", actor=actor, dag_id=spec.dag_id, run_id=old,
                 details={"previous_run_id": _str(resolve(ref)), "was": _str(current.get(old))})
            for old, ref in plan.relink.items()]
    log += [dict(at=now, kind="run_overridden", actor=actor, dag_id=spec.dag_id, run_id=old,
                 details={"overridden_by": str(ids[i]), "state_before": states_before.get(old),
                          "logical_date": dates[i].isoformat()}) for i, old in plan.displaced.items()]
    events.record_many(session, log)
    return ids


def _str(value: int | None) -> str | None:
    return None if value is None else str(value)


def instance_rows(run_id: int, dag_id: str, tasks: Iterable[TaskSpec]) -> list[dict[str, Any]]:
    """The task instance rows a run gets for `tasks`: one per task, or for a task mapped over literal lists one
    per value (map_index 0..N-1); a task mapped over another task's value waits as one row, map_index -1, until
    the scheduler expands it (ledger/core/mapping.py)."""
    return [{"run_id": run_id, "dag_id": dag_id, "task_id": t.task_id, "map_index": i,
             "state": TaskState.SCHEDULED.value, "try_number": 0, "max_tries": t.retries + 1,
             "priority_weight": t.priority_weight, "pool": t.pool, "pool_slots": t.pool_slots}
            for t in tasks for i in (range(t.literal_count) if t.literal_count else [NOT_MAPPED])]


def expanded_at_creation(tasks: Iterable[TaskSpec], dag_id: str, run_id: int, *, now: datetime,
                         actor: str) -> list[dict[str, Any]]:
    """The `task_expanded` events of the tasks mapped over literal lists that a new run expanded."""
    return [dict(at=now, kind="task_expanded", actor=actor, dag_id=dag_id, run_id=run_id,
                 details={"task_id": t.task_id, "count": t.literal_count, "source": source_text(t.expand)})
            for t in tasks if t.literal_count]


def create_task_instances(session: Session, run: DagRun, spec: DagSpec) -> None:
    if spec.tasks:
        session.execute(insert(TaskInstance), instance_rows(run.id, run.dag_id, spec.tasks.values()))


def move_to_version(session: Session, run: DagRun, spec: DagSpec, *, now: datetime, actor: str,
                    reason: str) -> tuple[list[str], list[str]]:
    """Move a run to another version of its DAG (its next tries run that version's code), recorded as a
    `run_version_changed` event. Tasks new in `spec` get task instances, and a `removed` task instance whose
    task is in `spec` again is scheduled again (as Airflow's verify_integrity restores it); task instances of
    tasks it lacks become `removed` (kept, with their tries). Kept task instances take `spec`'s pool, pool
    slots and priority weight, and its retries when they have not run yet. Returns (tasks added, tasks removed)."""
    before = run.version_hash
    tis = task_instances(session, run.id)
    have = {ti.task_id for ti in tis}
    returning = sorted(ti.task_id for ti in tis if ti.task_id in spec.tasks and ti.state == TaskState.REMOVED)
    added = sorted([*(set(spec.tasks) - have), *returning])
    removed = sorted(ti.task_id for ti in tis if ti.task_id not in spec.tasks and ti.state != TaskState.REMOVED)
    for ti in tis:
        if ti.task_id in removed:
            move_task(ti, TaskState.REMOVED, next_try_at=None)
            continue
        task = spec.tasks.get(ti.task_id)
        if task is None:
            continue
        ti.pool, ti.pool_slots, ti.priority_weight = task.pool, task.pool_slots, task.priority_weight
        if ti.dag_version == spec.version_hash:  # cleared on this version before: now its run's own
            ti.dag_version = None
        if ti.task_id in returning:
            move_task(ti, TaskState.SCHEDULED, next_try_at=None, ended_at=None,
                      max_tries=ti.try_number + task.retries + 1)
        elif ti.try_number == 0:
            ti.max_tries = task.retries + 1
    if set(added) - have:
        session.execute(insert(TaskInstance), instance_rows(
            run.id, run.dag_id, [spec.tasks[tid] for tid in added if tid not in have]))
    run.version_hash = spec.version_hash
    run.schedule = spec.schedule.summary()
    events.record(session, "run_version_changed", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": before, "to": spec.version_hash, "reason": reason, "tasks_added": added,
                     "tasks_removed": removed, "logical_date": run.logical_date.isoformat()})
    return added, removed


def try_state(session: Session, ti_id: int, try_number: int) -> str | None:
    """The state of one try (None: no such try)."""
    return session.scalar(select(TaskTry.state).where(TaskTry.task_instance_id == ti_id,
                                                      TaskTry.try_number == try_number))


def latest_scheduling_run(session: Session, dag_id: str) -> DagRun | None:
    """The live scheduled or backfill run with the greatest logical date: where the schedule resumes."""
    return session.scalar(
        select(DagRun).where(DagRun.dag_id == dag_id, LIVE, DagRun.run_type.in_(SCHEDULING_TYPES))
        .order_by(DagRun.logical_date.desc()).limit(1))


def live_dates_from(session: Session, dag_id: str, after: datetime | None, *,
                    until: datetime | None = None) -> set[datetime]:
    """Logical dates of the DAG's live runs from `after` on (every live run when None), up to `until`
    included when given."""
    stmt = select(DagRun.logical_date).where(DagRun.dag_id == dag_id, LIVE)
    if after is not None:
        stmt = stmt.where(DagRun.logical_date >= after)
    if until is not None:
        stmt = stmt.where(DagRun.logical_date <= until)
    return set(session.scalars(stmt))


def resume_points(session: Session, dag_ids: list[str] | None = None) -> dict[str, DataInterval]:
    """Per DAG, the data interval of the latest live scheduled or backfill run (one query): its schedule resumes
    at its end (a timetable may read its start too)."""
    latest = (select(DagRun.dag_id, func.max(DagRun.logical_date).label("at"))
              .where(LIVE, DagRun.run_type.in_(SCHEDULING_TYPES)).group_by(DagRun.dag_id))
    if dag_ids is not None:
        latest = latest.where(DagRun.dag_id.in_(dag_ids))
    sub = latest.subquery()
    stmt = select(DagRun.dag_id, DagRun.data_interval_start, DagRun.data_interval_end).join(
        sub, and_(sub.c.dag_id == DagRun.dag_id, sub.c.at == DagRun.logical_date)).where(LIVE)
    return {dag_id: DataInterval(start, end)  # type: ignore[arg-type]  # aware UTC datetimes
            for dag_id, start, end in session.execute(stmt).tuples()}


def live_at(session: Session, dag_id: str, at: datetime) -> DagRun | None:
    return session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, LIVE, DagRun.logical_date == at))


def live_before(session: Session, dag_id: str, at: datetime) -> tuple[DagRun, dict[str, str]] | None:
    """The live run with the greatest logical date before `at`, with its task instances' states."""
    run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, LIVE, DagRun.logical_date < at)
                         .order_by(DagRun.logical_date.desc()).limit(1))
    if run is None:
        return None
    states: dict[str, str] = {}
    for task_id, state in session.execute(select(TaskInstance.task_id, TaskInstance.state)
                                          .where(TaskInstance.run_id == run.id)).tuples():
        if states.get(task_id) in (None, TaskState.SUCCESS.value):  # a mapped task: an instance that did not
            states[task_id] = str(state)                            # succeed speaks for the task
    return run, states


def get(session: Session, run_id: int | str) -> DagRun:
    run = find(session, run_key(run_id))
    if run is None:
        raise RunNotFound(str(run_id))
    return run


def find(session: Session, run_id: int) -> DagRun | None:
    return session.get(DagRun, run_id)


def task_instances(session: Session, run_id: int) -> list[TaskInstance]:
    return list(session.scalars(select(TaskInstance).where(TaskInstance.run_id == run_id)
                                .order_by(TaskInstance.id)))



_PASSTHROUGH = NullType()

TIMELINE_COLUMNS = (DagRun.id, DagRun.logical_date, DagRun.data_interval_start, DagRun.data_interval_end,
                    DagRun.run_type, DagRun.state, DagRun.previous_run_id, DagRun.version_hash,
                    DagRun.overridden_by, DagRun.backfill_id, DagRun.schedule, DagRun.created_at,
                    DagRun.started_at, DagRun.ended_at, DagRun.overridden_at, DagRun.lock_holder)


def _raw(column: Any) -> Any:
    """The column as the driver returns it, without the UtcDateTime conversion (see dates.iso_raw)."""
    return type_coerce(column, _PASSTHROUGH).label(column.key) if isinstance(column.type, UtcDateTime) else column


def timeline_rows(session: Session, dag_id: str, *, start: datetime | None = None,
                  end: datetime | None = None, limit: int | None = None) -> list[Any]:
    """Every run of a DAG, live and overridden, by logical date then creation (as plain rows).

    Timestamps come back raw (SQLite text or PostgreSQL datetimes): format them with dates.iso_raw.
    Skipping the per-value conversion matters for timelines of 100,000 runs.
    """
    stmt = select(*(_raw(c) for c in TIMELINE_COLUMNS)).where(DagRun.dag_id == dag_id)
    if start is not None:
        stmt = stmt.where(DagRun.logical_date >= start)
    if end is not None:
        stmt = stmt.where(DagRun.logical_date <= end)
    stmt = stmt.order_by(DagRun.logical_date, DagRun.created_at, DagRun.id)
    if limit is not None:  # a page: from `start` on (the web view pages by logical date)
        stmt = stmt.limit(limit)
    # Core execution on the session's connection: no ORM row loading for plain columns
    return list(session.connection().execute(stmt))


def states_at(session: Session, dag_id: str, at: datetime) -> tuple[str, dict[str, list[str]]] | None:
    """The live run of `dag_id` at logical date `at`: its state and its task instances' states by task id (every
    instance of a mapped task); None when there is no such run (ExternalTaskSensor)."""
    run = live_at(session, dag_id, at)
    if run is None:
        return None
    states: dict[str, list[str]] = {}
    for task_id, state in session.execute(select(TaskInstance.task_id, TaskInstance.state)
                                          .where(TaskInstance.run_id == run.id)).tuples():
        states.setdefault(task_id, []).append(state)
    return run.state, states
