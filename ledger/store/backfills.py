"""Backfill rows: progress counts and the final state once every run has finished."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from ledger.core.backfill_cancel import CancelledRun, Fate, fate, restores
from ledger.core.backfill_state import FINISHED, agreed_state
from ledger.core.errors import NotFound
from ledger.core.states import ACTIVE_TASK_STATES, UNFINISHED_RUN_STATES, BackfillState, RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.models import Backfill, Dag, DagRun, Event, Job, Pool, TaskInstance, TaskTry
from ledger.store import events
from ledger.store.dags import chunks
from ledger.store.tasks import pool_room
from ledger.store.transitions import move_backfill


@dataclass(frozen=True)
class Progress:
    runs_total: int
    runs_done: int
    runs_failed: int
    tasks: dict[str, int]


def finishing(backfill_id: int, adopted: Collection[int] = ()) -> ColumnElement[bool]:
    """The runs a backfill finishes: those it created, and `adopted` (the ids of the unfinished runs of other,
    dead backfills that its plan adopted)."""
    own = DagRun.backfill_id == backfill_id
    return or_(own, DagRun.id.in_(sorted(adopted))) if adopted else own


def progress_of(session: Session, backfill_id: int, adopted: Collection[int] = ()) -> Progress:
    """Counts over the live runs the backfill finishes: its own and the `adopted` ones."""
    runs = dict(session.execute(select(DagRun.state, func.count()).where(finishing(backfill_id, adopted))
                                .group_by(DagRun.state)).tuples().all())
    tasks = dict(session.execute(
        select(TaskInstance.state, func.count()).join(DagRun, DagRun.id == TaskInstance.run_id)
        .where(finishing(backfill_id, adopted), DagRun.state != RunState.OVERRIDDEN.value)
        .group_by(TaskInstance.state)).tuples().all())
    live_total = sum(n for s, n in runs.items() if s != RunState.OVERRIDDEN.value)
    done = runs.get(RunState.SUCCESS.value, 0) + runs.get(RunState.FAILED.value, 0)
    return Progress(live_total, done, runs.get(RunState.FAILED.value, 0), tasks)


def count_unfinished(session: Session, backfill_id: int, adopted: Collection[int] = ()) -> int:
    """How many of the runs the backfill finishes are queued or running: one count over its runs, without the
    task instances that progress_of also counts."""
    return session.scalar(select(func.count()).select_from(DagRun).where(
        finishing(backfill_id, adopted), DagRun.state.in_(UNFINISHED_RUN_STATES))) or 0


def finish_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str,
                    adopted: Collection[int] = ()) -> str:
    """Set the backfill's final state once none of its runs (nor of the `adopted` runs it finishes) is
    unfinished (also for an interrupted backfill whose runs a scheduler or `backfill resume` finished)."""
    row = session.get(Backfill, backfill_id)
    assert row is not None
    if row.state == BackfillState.CANCELLED.value:
        restore_after_cancel(session, row, now=now, actor=actor)
    if row.state in FINISHED:  # a run of it ended again (cleared, marked): its state follows its runs' counts
        return _refinish(session, row, now=now, actor=actor, adopted=adopted)
    if row.state not in (BackfillState.RUNNING.value, BackfillState.INTERRUPTED.value):
        return row.state
    if count_unfinished(session, backfill_id, adopted):  # (asked as each run ends: the cheap count first)
        return row.state
    p = progress_of(session, backfill_id, adopted)
    if p.runs_done < p.runs_total:
        return row.state
    move_backfill(row, BackfillState.FAILED if p.runs_failed else BackfillState.SUCCESS, ended_at=now)
    events.record(session, "backfill_finished", at=now, actor=actor, dag_id=row.dag_id, backfill_id=backfill_id,
                  state=row.state, runs=p.runs_total, failed_runs=p.runs_failed)
    return row.state


def _refinish(session: Session, row: Backfill, *, now: datetime, actor: str, adopted: Collection[int]) -> str:
    """A finished backfill one of whose runs ended again: its stored state becomes the one its counts give
    (ledger.core.backfill_state), recorded as a `backfill_finished` event naming the state it had."""
    if count_unfinished(session, row.id, adopted):
        return row.state
    p = progress_of(session, row.id, adopted)
    state = agreed_state(row.state, unfinished=p.runs_total - p.runs_done, failed=p.runs_failed)
    if state != row.state:
        events.record(session, "backfill_finished", at=now, actor=actor, dag_id=row.dag_id, backfill_id=row.id,
                      state=state, state_before=row.state, runs=p.runs_total, failed_runs=p.runs_failed)
        row.state, row.ended_at = state, now
    return row.state


# what an operator does to a run that opens it again or sets its end (ledger.services.operations)
REOPENING = ("tasks_cleared", "tasks_marked", "run_marked")


def reopened_since(session: Session, cancels: dict[int, datetime]) -> set[int]:
    """Of these runs (each with the time its backfill was cancelled), those an operator cleared or marked since:
    the operator's, no longer the cancel's (decision 0356)."""
    if not cancels:
        return set()
    latest = session.execute(select(Event.run_id, func.max(Event.at)).where(
        Event.run_id.in_(list(cancels)), Event.kind.in_(REOPENING)).group_by(Event.run_id)).tuples().all()
    return {run_id for run_id, at in latest if run_id is not None and at is not None and at >= cancels[run_id]}


def under_cancel(session: Session, runs: Collection[DagRun]) -> set[int]:
    """Of these runs, those a cancel of their backfill still governs: the backfill is cancelled and no operator
    cleared or marked the run since (a run re-run by hand after the cancel runs as any run)."""
    backfills = {r.backfill_id for r in runs if r.backfill_id is not None}
    if not backfills:
        return set()
    cancelled = dict(session.execute(select(Backfill.id, Backfill.ended_at).where(
        Backfill.id.in_(backfills), Backfill.state == BackfillState.CANCELLED.value)).tuples().all())
    if not cancelled:
        return set()
    governed = {r.id: cancelled[r.backfill_id] for r in runs if r.backfill_id in cancelled}
    cancels = {run_id: at for run_id, at in governed.items() if at is not None}
    return set(governed) - reopened_since(session, cancels)


def restore_after_cancel(session: Session, row: Backfill, *, now: datetime, actor: str) -> list[int]:
    """Each run of the cancelled backfill that the cancel ended without success (failed since the cancel, its lock
    released, and no operator cleared or marked it since) gives its date back to the run it displaced, when
    ledger.core.backfill_cancel says so. Returns the runs restored."""
    from ledger.store import runs as run_store

    if row.ended_at is None:
        return []
    ended = list(session.scalars(select(DagRun).where(
        DagRun.backfill_id == row.id, DagRun.state == RunState.FAILED.value, DagRun.lock_holder.is_(None),
        DagRun.ended_at >= row.ended_at).order_by(DagRun.logical_date)))
    reopened = reopened_since(session, {r.id: row.ended_at for r in ended})
    ended = [r for r in ended if r.id not in reopened]
    displaced = run_store.displaced_by(session, [r.id for r in ended])
    ran = runs_that_ran(session, [r.id for r in ended])
    restored = []
    for run in ended:
        d = displaced.get(run.id)
        if d is None or restores(CancelledRun(run.id, run.logical_date, run.state, d, run.id in ran),
                                 run.state) is None:
            continue
        run_store.restore_displaced(session, run, d, now=now, actor=actor,
                                    reason=f"backfill {row.id} cancelled before run {run.id} finished")
        restored.append(d.run_id)
    return restored


def cancel_preview(session: Session, backfill_id: int) -> list[Fate]:
    """What a cancel of the backfill would do to each of its dates, by logical date (said before it acts)."""
    from ledger.store import runs as run_store

    runs = runs_of(session, backfill_id)
    displaced = run_store.displaced_by(session, [r.id for r in runs])
    ran = runs_that_ran(session, [r.id for r in runs])
    return [fate(CancelledRun(r.id, r.logical_date, r.state, displaced.get(r.id), r.id in ran)) for r in runs]


def runs_that_ran(session: Session, run_ids: list[int]) -> set[int]:
    """Of these runs, those a try of which has started (its code may have written the date's data)."""
    found: set[int] = set()
    for part in chunks(run_ids):
        found.update(session.scalars(select(TaskInstance.run_id).distinct().join(
            TaskTry, TaskTry.task_instance_id == TaskInstance.id).where(
            TaskInstance.run_id.in_(part), TaskTry.started_at.is_not(None))))
    return found


@dataclass(frozen=True)
class History:
    """What became of a backfill's runs: created (every run it made), later overridden, succeeded, failed,
    still unfinished."""

    created: int
    overridden: int
    succeeded: int
    failed: int
    unfinished: int


def history_of(session: Session, backfill_id: int) -> History:
    """Counts over every run the backfill created; a run overridden after it finished still counts as the
    success or failure it was: the state its `run_overridden` event says it had (a run a cancel stopped, whose
    date went back to the run it had replaced, ended failed), else what its task instances say."""
    runs = dict(session.execute(select(DagRun.state, func.count()).where(DagRun.backfill_id == backfill_id)
                                .group_by(DagRun.state)).tuples().all())
    ended_then_overridden = select(DagRun.id).where(DagRun.backfill_id == backfill_id,
                                                    DagRun.state == RunState.OVERRIDDEN.value,
                                                    DagRun.ended_at.is_not(None))
    was: dict[int, str | None] = {run_id: None for run_id in session.scalars(ended_then_overridden)}
    for run_id, details in session.execute(select(Event.run_id, Event.details).where(
            Event.kind == "run_overridden", Event.run_id.in_(ended_then_overridden)).order_by(Event.id)):
        was[run_id] = (details or {}).get("state_before")  # (the last override: a run restored and replaced again)
    unsaid = [run_id for run_id, state in was.items() if state not in (RunState.SUCCESS.value, RunState.FAILED.value)]
    failed_later = sum(1 for state in was.values() if state == RunState.FAILED.value) + (session.scalar(
        select(func.count(func.distinct(TaskInstance.run_id))).where(
            TaskInstance.run_id.in_(unsaid),
            TaskInstance.state.in_([TaskState.FAILED.value, TaskState.UPSTREAM_FAILED.value]))) or 0 if unsaid else 0)
    return History(sum(runs.values()), runs.get(RunState.OVERRIDDEN.value, 0),
                   runs.get(RunState.SUCCESS.value, 0) + len(was) - failed_later,
                   runs.get(RunState.FAILED.value, 0) + failed_later,
                   sum(runs.get(state, 0) for state in UNFINISHED_RUN_STATES))


def unfinished_by_state(session: Session, backfill_id: int) -> dict[str, int]:
    """How many of the backfill's runs are queued and how many running ({state: count})."""
    return dict(session.execute(select(DagRun.state, func.count()).where(
        DagRun.backfill_id == backfill_id, DagRun.state.in_([s.value for s in UNFINISHED_RUN_STATES]))
        .group_by(DagRun.state)).tuples().all())


def backfill_room(session: Session, backfill_ids: set[int]) -> dict[int, int]:
    """For each of these backfills given its own max_active_runs: how many more of its runs may be running (its
    limit less its runs running now, held by any job)."""
    if not backfill_ids:
        return {}
    running = (select(func.count()).where(DagRun.backfill_id == Backfill.id, DagRun.state == RunState.RUNNING.value)
               .scalar_subquery())
    rows = session.execute(select(Backfill.id, Backfill.max_active_runs - running).where(
        Backfill.id.in_(backfill_ids), Backfill.max_active_runs.is_not(None)))
    return {i: int(room) for i, room in rows}


def waiting_reasons(session: Session, backfill_id: int, job_id: int,
                    adopted: Collection[int] = ()) -> list[tuple[int, str, bool]]:
    """(run id, why it waits, blocked) for the backfill's unfinished runs (and the `adopted` ones) that this job
    cannot run now: held by another job, queued while max_active_runs runs of the DAG are running, held back by
    depends_on_past, or running with a task that needs a pool whose slots are all taken. `blocked`: only a
    person can unblock it (its previous run failed).

    A handful of statements whatever the number of runs (a backfill of 1,000 dates asks this while it waits):
    what is the same for every run of a DAG is read once, and per-run facts in one grouped query each."""
    return _reasons(session, list(session.execute(select(*_WAITING).where(finishing(backfill_id, adopted),
                                                                           DagRun.state.in_(UNFINISHED_RUN_STATES))
                                                  .order_by(DagRun.logical_date))), job_id)


# what _reasons reads of each run: its columns, not the run's ORM object (a backfill of 1,000 dates looks every half
# second it stands still, and loading its unfinished runs as objects was most of each look)
_WAITING = (DagRun.id, DagRun.dag_id, DagRun.state, DagRun.lock_holder, DagRun.backfill_id, DagRun.previous_run_id,
            DagRun.version_hash)


def left_waiting(session: Session) -> list[tuple[DagRun, str]]:
    """Every unfinished run with why it waits ("" when no reason is known: it may simply not be due to start
    yet), by DAG and logical date: what `ledger scheduler --exit-when-idle` leaves behind."""
    runs = list(session.scalars(select(DagRun).where(DagRun.state.in_(UNFINISHED_RUN_STATES))
                                .order_by(DagRun.dag_id, DagRun.logical_date)))
    why = {run_id: reason for run_id, reason, _blocked in _reasons(session, runs, 0)}
    return [(run, why.get(run.id, "")) for run in runs]


def _reasons(session: Session, runs: Sequence[Any], job_id: int) -> list[tuple[int, str, bool]]:
    """(run id, why it waits, blocked) of the runs given (DagRun objects, or rows with _WAITING's columns) that
    cannot run now."""
    from ledger.store import dags as dag_store

    out: list[tuple[int, str, bool]] = []
    if not runs:
        return out
    ids = [run.id for run in runs]
    tried = _runs_with(session, ids, TaskInstance.try_number > 0)  # runs with a task that has started
    active = _runs_with(session, ids, TaskInstance.state.in_(ACTIVE_TASK_STATES))
    holding: dict[str, bool] = {}
    running_of: dict[tuple[str, int], list[Any]] = {}
    room: dict[int, int] = {}  # backfill id -> how many more of its runs may run (its own max_active_runs)
    asked: set[int] = set()  # the backfills whose room was read
    stalled: list[int] = []
    specs = {run.id: dag_store.spec(session, run.dag_id, run.version_hash) for run in runs}
    # the previous runs, read only for the runs whose version has a depends_on_past task (no other reason reads them)
    before_ids = sorted({run.previous_run_id for run in runs if run.previous_run_id is not None
                         and any(t.depends_on_past for t in specs[run.id].tasks.values())})
    previous = {r.id: r for chunk in chunks(before_ids)
                for r in session.scalars(select(DagRun).where(DagRun.id.in_(chunk)))}
    for run in runs:
        said = len(out)
        spec = specs[run.id]
        if run.lock_holder is not None and run.lock_holder != job_id:
            holder = session.get(Job, run.lock_holder)
            what = f"{holder.job_type} {holder.id}" if holder is not None else f"job {run.lock_holder}"
            out.append((run.id, f"held by {what}", False))
        elif run.state == RunState.QUEUED.value and _holds_queued(session, holding, run.dag_id):
            out.append((run.id, f"DAG {run.dag_id} is paused with --stop-queued (ledger dags unpause "
                                f"{run.dag_id})", False))
        elif run.state == RunState.QUEUED.value:
            key = (run.dag_id, spec.max_active_runs)
            if key not in running_of:
                running_of[key] = list(session.execute(select(DagRun.id, DagRun.backfill_id).where(
                    DagRun.dag_id == run.dag_id, DagRun.state == RunState.RUNNING.value).order_by(DagRun.id)
                    .limit(spec.max_active_runs)))
            running = running_of[key]
            if len(running) >= spec.max_active_runs:
                first = running[0]
                whose = f" of backfill {first.backfill_id}" if first.backfill_id is not None else ""
                out.append((run.id, f"max_active_runs {spec.max_active_runs} reached by run {first.id}{whose}",
                            False))
            elif run.backfill_id is not None:
                if run.backfill_id not in asked:  # once per backfill: one without a limit of its own has no row
                    asked.add(run.backfill_id)
                    room.update(backfill_room(session, {run.backfill_id}))
                if room.get(run.backfill_id, 1) <= 0:
                    out.append((run.id, f"backfill {run.backfill_id}'s max_active_runs reached", False))
        elif run.previous_run_id is not None and any(t.depends_on_past for t in spec.tasks.values()):
            before = previous.get(run.previous_run_id)
            if before is not None and run.id not in active:
                past = [t for t, task in spec.tasks.items() if task.depends_on_past]
                if before.state == RunState.FAILED.value and (
                        run.id not in tried or _held_by_the_past(session, run.id, before.id, past)):
                    out.append((run.id, f"depends_on_past: its previous run {before.id} ({before.run_type}) "
                                        "failed", True))
                elif before.state in UNFINISHED_RUN_STATES and run.id not in tried:
                    out.append((run.id, f"depends_on_past: waits for run {before.id} ({before.run_type})",
                                False))
        if run.state == RunState.RUNNING.value and len(out) == said and run.id not in active:
            stalled.append(run.id)  # no other reason given, and nothing of it queued or running: a pool?
            out.append((run.id, "", False))
    full = full_pools(session, stalled)
    full.update((run_id, why) for run_id, why in task_limits_reached(
        session, {run_id: specs[run_id] for run_id in stalled if run_id not in full}).items())
    return [(run_id, why or full[run_id], blocked) for run_id, why, blocked in out
            if why or run_id in full]


def task_limits_reached(session: Session, specs: Mapping[int, DagSpec]) -> dict[int, str]:
    """Why each of these running runs (run id -> its version's spec), with nothing queued or running, waits on a
    task's max_active_tis_per_dag: a task instance of it that is scheduled belongs to a task whose instances
    queued or running in other runs are at that limit. A run left out is not so. Nothing is read for runs whose
    version declares no such limit."""
    from ledger.store.tasks import active_counts_by_task

    limited = {run_id: spec for run_id, spec in specs.items()
               if any(per_dag is not None for per_dag, _per_run in spec.task_limits.values())}
    if not limited:
        return {}
    waiting: dict[int, list[str]] = {}
    for chunk in chunks(sorted(limited)):
        for run_id, task_id in session.execute(select(TaskInstance.run_id, TaskInstance.task_id).where(
                TaskInstance.run_id.in_(chunk), TaskInstance.state == TaskState.SCHEDULED.value)
                .order_by(TaskInstance.task_id).distinct()):
            if limited[run_id].task_limits.get(task_id, (None, None))[0] is not None:
                waiting.setdefault(run_id, []).append(task_id)
    counts = active_counts_by_task(session, {(limited[r].dag_id, t) for r, tasks in waiting.items() for t in tasks})
    out: dict[int, str] = {}
    for run_id, tasks in waiting.items():
        spec = limited[run_id]
        for task_id in tasks:
            limit = spec.task_limits[task_id][0]
            if limit is not None and counts.get((spec.dag_id, task_id), 0) >= limit:
                out[run_id] = f"task {task_id}'s max_active_tis_per_dag {limit} reached"
                break
    return out


def _held_by_the_past(session: Session, run_id: int, previous_id: int, tasks: list[str]) -> bool:
    """Whether a task of `tasks` (its depends_on_past ones) waits in run `run_id` on the same task of the finished
    run `previous_id`, which neither succeeded nor was skipped there: it can never start (a run some of whose
    tasks started can be held so, part-way through)."""
    waiting = set(session.scalars(select(TaskInstance.task_id).where(
        TaskInstance.run_id == run_id, TaskInstance.task_id.in_(tasks),
        TaskInstance.state == TaskState.SCHEDULED.value)))
    if not waiting:
        return False
    return any(state not in (TaskState.SUCCESS.value, TaskState.SKIPPED.value) for state in session.scalars(
        select(TaskInstance.state).where(TaskInstance.run_id == previous_id, TaskInstance.task_id.in_(waiting))))


def _runs_with(session: Session, run_ids: list[int], where: ColumnElement[bool]) -> set[int]:
    """Those of the runs that have a task instance matching `where`."""
    found: set[int] = set()
    for chunk in chunks(run_ids):
        found.update(session.scalars(select(TaskInstance.run_id).where(TaskInstance.run_id.in_(chunk), where)
                                     .distinct()))
    return found


def _holds_queued(session: Session, seen: dict[str, bool], dag_id: str) -> bool:
    if dag_id not in seen:
        seen[dag_id] = bool(session.scalar(select(Dag.hold_queued).where(Dag.dag_id == dag_id)))
    return seen[dag_id]


def full_pools(session: Session, run_ids: Collection[int]) -> dict[int, str]:
    """Why each of these running runs, with nothing queued or running, waits on a pool: a task instance of it
    that is scheduled needs more of its pool's slots (its pool_slots) than are free (by whom they are taken,
    first), or than the pool has. A run left out is not so: what holds it is not a pool (upstream tasks, a retry
    delay, a signal). One query for the runs, one for the pools, one for the slots in use (pool_room), one per full
    pool."""
    wanted: dict[int, list[tuple[str, int, str]]] = {}
    for chunk in chunks(list(run_ids)):
        for run_id, pool, needs, task_id in session.execute(
                select(TaskInstance.run_id, TaskInstance.pool, TaskInstance.pool_slots, TaskInstance.task_id).where(
                    TaskInstance.run_id.in_(chunk), TaskInstance.state == TaskState.SCHEDULED.value).distinct()):
            wanted.setdefault(run_id, []).append((pool, needs, task_id))
    if not wanted:
        return {}
    names = {pool for needs in wanted.values() for pool, _n, _t in needs}
    slots = {p.name: p.slots for p in session.scalars(select(Pool).where(Pool.name.in_(names)))}
    if not slots:  # a pool that is not defined does not limit
        return {}
    free = pool_room(session, slots)
    first: dict[str, str] = {}

    def first_holder(name: str) -> str:
        if name not in first:
            holder = session.execute(select(TaskInstance.run_id, TaskInstance.task_id).where(
                TaskInstance.pool == name, TaskInstance.state.in_(ACTIVE_TASK_STATES)).order_by(TaskInstance.id)
                .limit(1)).first()  # (none when the last one ended since the slots were counted)
            first[name] = "" if holder is None else f" (first by run {holder[0]}, task {holder[1]})"
        return first[name]

    def why(name: str, needs: int, task_id: str) -> str | None:
        total = slots[name]
        if total == 0:
            return f"pool {name} has 0 slots (ledger pools set {name} N)"
        if needs > total:
            return f"task {task_id} needs {needs} slots of pool {name}, which has {total} (ledger pools set {name} N)"
        if free[name] >= needs:
            return None
        if needs == 1:
            return f"pool {name}: all {total} slot(s) in use{first_holder(name)}"
        return f"pool {name}: {max(free[name], 0)} of {total} slot(s) free, task {task_id} needs {needs}" \
               f"{first_holder(name)}"

    out: dict[int, str] = {}
    for run_id, needs in wanted.items():
        full = next((w for pool, n, task_id in sorted(needs) if pool in slots and (w := why(pool, n, task_id))),
                    None)
        if full is not None:
            out[run_id] = full
    return out


def planned_of(session: Session, backfill_id: int) -> int:
    """How many runs the backfill's plan said to create (new + override), from its `backfill_created` event."""
    from ledger.models import Event

    row = session.get(Backfill, backfill_id)
    if row is None:
        return 0
    for event in session.scalars(select(Event).where(Event.kind == "backfill_created", Event.dag_id == row.dag_id)):
        details = event.details or {}
        if details.get("backfill_id") == backfill_id:
            return int(details.get("new", 0)) + int(details.get("override", 0))
    return 0


def listing(session: Session) -> list[Backfill]:
    """Every backfill, newest first."""
    return list(session.scalars(select(Backfill).order_by(Backfill.id.desc())))


def add(session: Session, row: Backfill) -> Backfill:
    """Store a new backfill row (flushed: it has its id)."""
    session.add(row)
    session.flush()
    return row


def find(session: Session, backfill_id: int) -> Backfill | None:
    return session.get(Backfill, backfill_id)


def get(session: Session, backfill_id: int) -> Backfill:
    row = find(session, backfill_id)
    if row is None:
        raise NotFound(f"no backfill {backfill_id}; see `ledger backfill list`")
    return row


def runs_of(session: Session, backfill_id: int) -> list[DagRun]:
    """Every run a backfill created, overridden ones included, by logical date."""
    return list(session.scalars(select(DagRun).where(DagRun.backfill_id == backfill_id)
                                .order_by(DagRun.logical_date, DagRun.id)))


def finishing_runs(session: Session, backfill_id: int, adopted: Collection[int] = ()) -> list[DagRun]:
    """The live runs a backfill finishes (its own and the `adopted` ones), by logical date."""
    return list(session.scalars(select(DagRun).where(finishing(backfill_id, adopted),
                                                     DagRun.state != RunState.OVERRIDDEN.value)
                                .order_by(DagRun.logical_date, DagRun.id)))


def unfinished_among(session: Session, run_ids: Collection[int]) -> dict[int, int | None]:
    """Which of these runs are still queued or running: run id -> the backfill that created it."""
    if not run_ids:
        return {}
    return {r.id: r.backfill_id for r in session.scalars(select(DagRun).where(
        DagRun.id.in_(sorted(run_ids)), DagRun.state.in_(UNFINISHED_RUN_STATES)))}


def unfinished_runs(session: Session, backfill_id: int) -> list[DagRun]:
    """The backfill's queued and running runs."""
    return list(session.scalars(select(DagRun).where(DagRun.backfill_id == backfill_id,
                                                     DagRun.state.in_(UNFINISHED_RUN_STATES))))


def runs_in_range(session: Session, dag_id: str, start: datetime, end: datetime) -> list[Any]:
    """The DAG's live runs with a logical date in [start, end], each with its lock holder's state and latest
    heartbeat (`job_state`, `latest_heartbeat`; None when no job holds it) and whether its backfill was
    submit-only (`submit_only`; None for a run of no backfill), as plain rows."""
    stmt = (select(DagRun.id, DagRun.logical_date, DagRun.state, DagRun.run_type, DagRun.lock_holder,
                   DagRun.backfill_id, Job.state.label("job_state"), Job.latest_heartbeat, Backfill.submit_only)
            .outerjoin(Job, Job.id == DagRun.lock_holder)
            .outerjoin(Backfill, Backfill.id == DagRun.backfill_id)
            .where(DagRun.dag_id == dag_id, DagRun.state != RunState.OVERRIDDEN.value,
                   DagRun.logical_date >= start, DagRun.logical_date <= end))
    return list(session.execute(stmt))
