"""Task instance state in the database: loading it by run, queueing tries, recording outcomes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, text, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from ledger.core.mapping import NOT_MAPPED, label
from ledger.core.outcomes import Current, Decision, Outcome
from ledger.core.states import ACTIVE_TASK_STATES as ACTIVE
from ledger.core.states import UNFINISHED_RUN_STATES as UNFINISHED
from ledger.core.states import StaleState, TaskState
from ledger.models import DagRun, Pool, TaskInstance, TaskTry, tables
from ledger.store.hot import Hot
from ledger.store.transitions import guarded, move_task

DEFAULT_POOL = "default_pool"
TI_TABLE = tables.task_instance
TRY_TABLE = tables.task_try


@dataclass(frozen=True, slots=True)
class TiRow:
    id: int
    run_id: int
    task_id: str
    state: TaskState
    try_number: int
    max_tries: int
    next_try_at: datetime | None
    priority_weight: int
    pool: str
    job_id: int | None
    armed: bool = False
    signal_id: int | None = None  # the signal that armed it (a signal-driven task)
    map_index: int = NOT_MAPPED  # a mapped task's instance number (ledger/core/mapping.py)
    version: str | None = None  # the DAG version its tries run when not its run's (decision 0271)
    pool_slots: int = 1  # the slots of its pool it takes while queued or running

    @property
    def label(self) -> str:
        """The task id, or `task[i]` for a mapped instance: the key of the run's task instances."""
        return label(self.task_id, self.map_index)

    def with_state(self, state: TaskState) -> TiRow:
        """This row in another state (positional: dataclasses.replace costs several times more in the loop)."""
        return TiRow(self.id, self.run_id, self.task_id, state, self.try_number, self.max_tries, self.next_try_at,
                     self.priority_weight, self.pool, self.job_id, self.armed, self.signal_id, self.map_index,
                     self.version, self.pool_slots)

    def queued(self, try_number: int, job_id: int) -> TiRow:
        """This row as `queue` writes it: queued for try `try_number` by job `job_id`, its START used up."""
        return TiRow(self.id, self.run_id, self.task_id, TaskState.QUEUED, try_number, self.max_tries, None,
                     self.priority_weight, self.pool, job_id, False, self.signal_id, self.map_index, self.version,
                     self.pool_slots)


def row_of(ti: TaskInstance) -> TiRow:
    return TiRow(ti.id, ti.run_id, ti.task_id, TaskState(ti.state), ti.try_number, ti.max_tries, ti.next_try_at,
                 ti.priority_weight, ti.pool, ti.job_id, bool(ti.signal_armed), ti.signal_id, ti.map_index,
                 ti.dag_version, ti.pool_slots)


_TI_ROWS = select(TaskInstance.id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.state,
                  TaskInstance.try_number, TaskInstance.max_tries, TaskInstance.next_try_at,
                  TaskInstance.priority_weight, TaskInstance.pool, TaskInstance.job_id,
                  TaskInstance.signal_armed, TaskInstance.signal_id, TaskInstance.map_index,
                  TaskInstance.dag_version, TaskInstance.pool_slots).where(
    TaskInstance.run_id.in_(bindparam("run_ids", expanding=True)))
# Statements the loop runs every time are built once: building and keying a statement costs more than
# executing it on SQLite (see docs/decisions/, 40).


def rows_for_runs(session: Session, run_ids: list[int]) -> dict[int, dict[str, TiRow]]:
    """run id -> label (task id, or `task[i]` for a mapped instance) -> its task instance."""
    out: dict[int, dict[str, TiRow]] = defaultdict(dict)
    if not run_ids:
        return out
    states = _STATES
    for (ti_id, run_id, task_id, state, try_number, max_tries, next_try_at, priority_weight, pool, job_id, armed,
         signal_id, map_index, version, pool_slots) in _TI_ROWS_HOT.rows(session, {"run_ids": list(run_ids)}):
        if isinstance(next_try_at, str):  # (SQLite's text, on the driver's cursor: as SQLAlchemy would read it)
            next_try_at = _read_utc(next_try_at)
        out[run_id][label(task_id, map_index)] = TiRow(
            ti_id, run_id, task_id, states.get(state) or TaskState(state), try_number, max_tries, next_try_at,
            priority_weight, pool, job_id, bool(armed), signal_id, map_index, version, pool_slots)
    return out


_TI_ROWS_HOT = Hot(_TI_ROWS)  # a claim reads its runs' task instances: on SQLite, without SQLAlchemy's rows
_STATES = {state.value: state for state in TaskState}
_read_utc: Any = TI_TABLE.c.next_try_at.type.dialect_impl(sqlite.dialect()).result_processor(sqlite.dialect(), None)


_PREVIOUS_STATES = select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                          TaskInstance.state).where(TaskInstance.run_id.in_(bindparam("run_ids", expanding=True)))


def previous_states(session: Session, previous_ids: list[int]) -> dict[int, dict[str, TaskState]]:
    """run id -> label -> state, of the runs given (the previous runs of held runs, for depends_on_past)."""
    out: dict[int, dict[str, TaskState]] = defaultdict(dict)
    if previous_ids:
        session.flush()
        for r in session.connection().execute(_PREVIOUS_STATES, {"run_ids": list(previous_ids)}):
            out[r.run_id][label(r.task_id, r.map_index)] = TaskState(r.state)
    return out


_ACTIVE_BY_DAG = Hot(select(TaskInstance.dag_id, func.count())
                     .where(TaskInstance.state.in_(ACTIVE),
                            TaskInstance.dag_id.in_(bindparam("dag_ids", expanding=True)))
                     .group_by(TaskInstance.dag_id))


def active_counts_by_dag(session: Session, dag_ids: list[str], *, lock: bool = False) -> dict[str, int]:
    """DAG id -> its task instances queued or running now (max_active_tasks), of the DAGs given. `lock`: a job about
    to queue takes each DAG's lock first on PostgreSQL (take_limit_locks)."""
    if not dag_ids:
        return {}
    if lock:
        take_limit_locks(session, DAG_LIMIT_LOCKS, dag_ids)
    return dict(_ACTIVE_BY_DAG.rows(session, {"dag_ids": list(dag_ids)}))


_ACTIVE_BY_TASK = Hot(select(TaskInstance.dag_id, TaskInstance.task_id, func.count())
                      .where(TaskInstance.state.in_(ACTIVE),
                             TaskInstance.dag_id.in_(bindparam("dag_ids", expanding=True)),
                             TaskInstance.task_id.in_(bindparam("task_ids", expanding=True)))
                      .group_by(TaskInstance.dag_id, TaskInstance.task_id))
_ACTIVE_IN_RUNS = Hot(select(TaskInstance.run_id, TaskInstance.task_id, func.count())
                      .where(TaskInstance.state.in_(ACTIVE),
                             TaskInstance.run_id.in_(bindparam("run_ids", expanding=True)),
                             TaskInstance.task_id.in_(bindparam("task_ids", expanding=True)))
                      .group_by(TaskInstance.run_id, TaskInstance.task_id))


# PostgreSQL transaction-level advisory locks (class, hashtext(key)) a job takes before it counts what a limit allows
# (decision 0363). Every job takes them in this order, DAGs, then tasks, then pools, each class's locks in the order of
# their hashes, so two jobs cannot deadlock on them.
DAG_LIMIT_LOCKS = 7341  # key: the DAG id (its max_active_tasks)
TASK_LIMIT_LOCKS = 7343  # key: "DAG.task" (the task's max_active_tis_per_dag)
POOL_LOCKS = 7345  # key: the pool's name (its slots)
# one statement per class, in the order of the keys' hashes (what is locked): two keys whose hashes collide are one
# lock, and an order of the keys themselves could then differ from the locks' order between two jobs
_LOCKS = {c: text(f"SELECT pg_advisory_xact_lock({c}, h) FROM (SELECT DISTINCT hashtext(k) AS h "
                  f"FROM unnest(CAST(:keys AS text[])) AS k ORDER BY h) AS ordered")
          for c in (DAG_LIMIT_LOCKS, TASK_LIMIT_LOCKS, POOL_LOCKS)}


def take_limit_locks(session: Session, lock_class: int, keys: Iterable[str]) -> None:
    """On PostgreSQL, the locks of `lock_class` on `keys` (in the order of their hashes), held until the transaction
    ends: two jobs counting the same DAG, task or pool take turns, and the second counts what the first queued (its
    read at READ COMMITTED comes after the first's commit). SQLite needs none: its transactions begin with BEGIN
    IMMEDIATE, so they take turns from their first statement."""
    wanted = sorted(set(keys))
    if not wanted or session.get_bind().dialect.name != "postgresql":
        return
    session.flush()
    session.execute(_LOCKS[lock_class], {"keys": wanted})


def active_counts_by_task(session: Session, tasks: Iterable[tuple[str, str]], *,
                          lock: bool = False) -> dict[tuple[str, str], int]:
    """(dag id, task id) -> its task instances queued or running now, over all runs, of the tasks given. `lock`: a job
    about to queue takes each task's lock first on PostgreSQL (take_limit_locks)."""
    wanted = set(tasks)
    if not wanted:
        return {}
    session.flush()
    if lock:
        take_limit_locks(session, TASK_LIMIT_LOCKS, (f"{dag_id}.{task_id}" for dag_id, task_id in wanted))
    rows = _ACTIVE_BY_TASK.rows(session, {"dag_ids": sorted({d for d, _ in wanted}),
                                          "task_ids": sorted({t for _, t in wanted})})
    return {(d, t): n for d, t, n in rows if (d, t) in wanted}


def active_counts_in_runs(session: Session, tasks: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(run id, task id) -> the task's instances queued or running now in that run, of the pairs given."""
    wanted = set(tasks)
    if not wanted:
        return {}
    session.flush()
    rows = _ACTIVE_IN_RUNS.rows(session, {"run_ids": sorted({r for r, _ in wanted}),
                                          "task_ids": sorted({t for _, t in wanted})})
    return {(r, t): n for r, t, n in rows if (r, t) in wanted}


_POOL_SLOTS = select(Pool.name, Pool.slots)
_POOL_USE = (select(TaskInstance.pool, func.sum(TaskInstance.pool_slots))
             .where(TaskInstance.state.in_(ACTIVE), TaskInstance.pool.in_(bindparam("pools", expanding=True)))
             .group_by(TaskInstance.pool))


def pool_slots(session: Session) -> dict[str, int]:
    """Each pool's slots (pools absent from the table are unlimited, except default_pool if defined)."""
    return dict(session.connection().execute(_POOL_SLOTS).tuples().all())


def pool_room(session: Session, slots: Mapping[str, int], *, lock: bool = False) -> dict[str, int]:
    """Free slots per pool, of the pools given with their slots (pool_slots): slots less those the task instances
    queued or running in it take (each its pool_slots). `lock`: a job about to queue takes each pool's lock first
    (take_limit_locks)."""
    if not slots:
        return {}
    session.flush()
    if lock:
        take_limit_locks(session, POOL_LOCKS, slots)
    used = dict(session.connection().execute(_POOL_USE, {"pools": list(slots)}).tuples().all())
    return {name: n - used.get(name, 0) for name, n in slots.items()}


_MARK = Hot(update(TI_TABLE).where(TI_TABLE.c.id == bindparam("ti"), TI_TABLE.c.state == bindparam("was")).values(
    state=bindparam("st"), ended_at=bindparam("at", type_=TI_TABLE.c.ended_at.type)))


def mark(session: Session, changes: list[tuple[int, TaskState, TaskState]], *, now: datetime) -> None:
    """Set states decided by the loop's rules (skipped / upstream_failed by trigger rules, a mapped task's
    failure or empty list): (ti id, the state it had when read, the new state), each guarded on the state it
    replaces (StaleState when one changed meanwhile)."""
    if changes:
        guarded(session, _MARK, [{"ti": ti, "was": was.value, "st": st.value, "at": now} for ti, was, st in changes],
                [(f"task instance {ti}", was.value, st) for ti, was, st in changes], "marking task instances")


_QUEUE = Hot(update(TI_TABLE).where(and_(TI_TABLE.c.id == bindparam("ti"),
                                         TI_TABLE.c.try_number == bindparam("was"),
                                         TI_TABLE.c.state == bindparam("was_state")))
             .values(state=TaskState.QUEUED.value, try_number=bindparam("now_try"),
                     queued_at=bindparam("at", type_=TI_TABLE.c.queued_at.type), job_id=bindparam("job"),
                     next_try_at=None, started_at=None, ended_at=None, signal_armed=False))
_INSERT_TRY = Hot(TRY_TABLE.insert())


def queue(session: Session, tis: list[TiRow], *, job_id: int, now: datetime,
          versions: Mapping[int, str] | None = None) -> dict[int, int]:
    """Take the next try number of each task instance for this job; returns ti id -> try number.
    `versions`: ti id -> the DAG version whose code the try runs (recorded on the try).

    The (task instance, try number) unique key of task_try makes it impossible to start a try twice. A
    signal's START that armed a task instance is used up by the try queued here (signal_armed is cleared).
    Guarded on the state and try number each row had when read: StaleState (nothing queued) when one changed.
    """
    if not tis:
        return {}
    tries = {ti.id: ti.try_number + 1 for ti in tis}
    guarded(session, _QUEUE, [{"ti": ti.id, "was": ti.try_number, "was_state": ti.state.value,
                               "now_try": tries[ti.id], "at": now, "job": job_id} for ti in tis],
            [(f"task instance {ti.id}", ti.state.value, TaskState.QUEUED) for ti in tis], "queueing task instances")
    _INSERT_TRY.run(session, [
        {"task_instance_id": ti.id, "try_number": tries[ti.id], "state": TaskState.QUEUED.value, "job_id": job_id,
         "dag_version": (versions or {}).get(ti.id)}
        for ti in tis])
    return tries


_CURRENT_TRIES = select(TaskInstance.id, TaskInstance.try_number, TaskInstance.max_tries, TaskInstance.state) \
    .where(TaskInstance.id.in_(bindparam("ids", expanding=True)))
_OUTCOME_TI = Hot(update(TI_TABLE).where(TI_TABLE.c.id == bindparam("ti"), TI_TABLE.c.state == bindparam("was"),
                                         TI_TABLE.c.try_number == bindparam("tn")).values(
    state=bindparam("st"),
    started_at=func.coalesce(bindparam("started", type_=TI_TABLE.c.started_at.type), TI_TABLE.c.started_at),
    ended_at=bindparam("ended", type_=TI_TABLE.c.ended_at.type),
    next_try_at=bindparam("nxt", type_=TI_TABLE.c.next_try_at.type),
    pid=func.coalesce(bindparam("pid"), TI_TABLE.c.pid),
    hostname=func.coalesce(bindparam("host"), TI_TABLE.c.hostname)))
_OUTCOME_TRY = Hot(update(TRY_TABLE).where(and_(TRY_TABLE.c.task_instance_id == bindparam("ti"),
                                                TRY_TABLE.c.try_number == bindparam("tn"))).values(
    state=bindparam("st"),
    started_at=func.coalesce(bindparam("started", type_=TRY_TABLE.c.started_at.type), TRY_TABLE.c.started_at),
    ended_at=bindparam("ended", type_=TRY_TABLE.c.ended_at.type), pid=func.coalesce(bindparam("pid"), TRY_TABLE.c.pid),
    hostname=func.coalesce(bindparam("host"), TRY_TABLE.c.hostname)))


_ONE_MORE_TRY = update(TI_TABLE).where(TI_TABLE.c.id == bindparam("ti")).values(
    max_tries=TI_TABLE.c.max_tries + 1, signal_armed=or_(TI_TABLE.c.signal_armed, bindparam("armed")))
_MAY_REQUEUE = select(TaskInstance.id).join(DagRun, DagRun.id == TaskInstance.run_id).where(
    TaskInstance.id.in_(bindparam("ids", expanding=True)), TaskInstance.signal_request.is_(None),
    DagRun.state.in_(UNFINISHED))


def current_tries(session: Session, outcomes: list[Outcome],
                  known: Mapping[int, tuple[int, int, str]] | None = None) -> dict[int, Current]:
    """What the database holds of the outcomes' task instances, as ledger.core.outcomes.decide needs it. `known`:
    ti id -> (try number, max tries, state) as the caller knows the database holds them in this transaction (a
    job, of the runs it holds); the others are read."""
    if not outcomes:
        return {}
    session.flush()
    found = dict(known or {})
    missing = list({o.ti_id for o in outcomes if o.ti_id not in found})
    if missing:
        found.update((r.id, (r.try_number, r.max_tries, r.state))
                     for r in session.connection().execute(_CURRENT_TRIES, {"ids": missing}))
    # (rare: a job that stopped with tries waiting in workers, or tries lost to a crash)
    asked = [o.ti_id for o in outcomes if o.requeue or o.state == TaskState.LOST]
    may_requeue = set(session.connection().execute(_MAY_REQUEUE, {"ids": asked}).scalars()) if asked else set()
    lost_before = _lost_in_a_row(session, [o.ti_id for o in outcomes if o.state == TaskState.LOST])
    return {ti: Current(tn, most, _STATES.get(st) or TaskState(st), ti in may_requeue, lost_before.get(ti, 0))
            for ti, (tn, most, st) in found.items()}


def write_outcomes(session: Session, decided: list[Decision]) -> None:
    """Write what ledger.core.outcomes.decide said of each outcome: the task instance's and its try's states (with
    their times, pid and host), when it may be tried next, one more try where the try spent no retry. Each write
    is guarded on the state and try number it replaces: StaleState when another process changed one meanwhile
    (the state the caller knew was stale)."""
    if not decided:
        return
    ti_rows: list[dict[str, Any]] = []
    try_rows: list[dict[str, Any]] = []
    for d in decided:
        o, running = d.outcome, d.state == TaskState.RUNNING
        ti_rows.append({"ti": o.ti_id, "was": d.was.value, "tn": o.try_number, "st": d.state.value,
                        "started": o.at if running else None,
                        "ended": None if running or d.state == TaskState.SCHEDULED else o.at, "nxt": d.next_try_at,
                        "pid": o.pid, "host": o.hostname})
        try_rows.append({"ti": o.ti_id, "tn": o.try_number, "st": d.try_state.value,
                         "started": o.at if running else None, "ended": None if running else o.at, "pid": o.pid,
                         "host": o.hostname})
    guarded(session, _OUTCOME_TI, ti_rows, [], "recording outcomes")  # (the moves: checked by decide)
    _OUTCOME_TRY.run(session, try_rows)
    again = [{"ti": d.outcome.ti_id, "armed": d.outcome.armed} for d in decided if d.one_more_try]
    if again:
        session.connection().execute(_ONE_MORE_TRY, again)


_TRY_STATES = select(TaskTry.task_instance_id, TaskTry.state).where(
    TaskTry.task_instance_id.in_(bindparam("ids", expanding=True))).order_by(
    TaskTry.task_instance_id, TaskTry.try_number.desc())


def _lost_in_a_row(session: Session, ti_ids: list[int]) -> dict[int, int]:
    """ti id -> how many of its latest ended tries were lost, in a row (its current try, still active, left out)."""
    if not ti_ids:
        return {}
    out: dict[int, int] = {}
    done: set[int] = set()
    for ti, state in session.connection().execute(_TRY_STATES, {"ids": ti_ids}):
        if ti in done or state in ACTIVE:
            continue
        if state == TaskState.LOST.value:
            out[ti] = out.get(ti, 0) + 1
        else:
            done.add(ti)
    return out


def orphaned(session: Session, run_ids: list[int], *, job_id: int) -> list[tuple[int, int, int]]:
    """Queued or running task instances of these runs that belong to another job (its tries are lost):
    (ti id, try number, run id)."""
    if not run_ids:
        return []
    return [(ti, tn, run) for ti, tn, run in _ORPHANED.rows(session, {"run_ids": list(run_ids), "job": job_id})]


_ORPHANED = Hot(select(TaskInstance.id, TaskInstance.try_number, TaskInstance.run_id).where(
    TaskInstance.run_id.in_(bindparam("run_ids", expanding=True)), TaskInstance.state.in_(ACTIVE),
    (TaskInstance.job_id.is_(None)) | (TaskInstance.job_id != bindparam("job"))))


def unfinished_in_job(session: Session, job_id: int) -> list[tuple[int, int]]:
    stmt = select(TaskInstance.id, TaskInstance.try_number).where(TaskInstance.job_id == job_id,
                                                                  TaskInstance.state.in_(ACTIVE))
    return [(r.id, r.try_number) for r in session.execute(stmt)]


def end_lost_tries(session: Session, run_id: int, *, now: datetime) -> list[str]:
    """End the queued or running tries of a run that no live job holds (its job died), because the run is ending
    (cancelled): each try is recorded lost, its task instance `stopped`. Returns their labels."""
    ended = []
    for ti in session.scalars(select(TaskInstance).where(TaskInstance.run_id == run_id,
                                                         TaskInstance.state.in_(ACTIVE))):
        session.execute(update(TaskTry).where(TaskTry.task_instance_id == ti.id,
                                              TaskTry.try_number == ti.try_number,
                                              TaskTry.state.in_(ACTIVE)).values(state=TaskState.LOST.value,
                                                                                 ended_at=now))
        move_task(ti, TaskState.STOPPED, ended_at=now, signal_request=None, next_try_at=None)
        ended.append(label(ti.task_id, ti.map_index))
    return ended


def subjects(session: Session, ti_ids: list[int]) -> dict[int, tuple[str, int, str, int]]:
    """ti id -> (dag id, run id, task id, map index): what an event about these task instances concerns."""
    if not ti_ids:
        return {}
    rows = session.execute(select(TaskInstance.id, TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                                  TaskInstance.map_index).where(TaskInstance.id.in_(ti_ids)))
    return {r.id: (r.dag_id, r.run_id, r.task_id, r.map_index) for r in rows}


def try_facts(session: Session, ti_id: int, try_number: int) -> dict[str, Any]:
    """What a callback hears of one try (as JSON): its map index, when it started and ended (ISO, None when it
    did not), its host, and the tries its task instance may have in all (empty: no such try)."""
    session.flush()
    row = session.execute(select(TaskInstance.map_index, TaskInstance.max_tries, TaskTry.started_at,
                                 TaskTry.ended_at, TaskTry.hostname)
                          .join(TaskTry, TaskTry.task_instance_id == TaskInstance.id)
                          .where(TaskInstance.id == ti_id, TaskTry.try_number == try_number)).first()
    if row is None:
        return {}
    return {"map_index": row.map_index, "max_tries": row.max_tries,
            "start_date": row.started_at.isoformat() if row.started_at is not None else None,
            "end_date": row.ended_at.isoformat() if row.ended_at is not None else None, "hostname": row.hostname}


def instance(session: Session, run_id: int, task_id: str, map_index: int = NOT_MAPPED) -> TaskInstance | None:
    """The task instance of `task_id` (instance `map_index` of a mapped task) in run `run_id` (None: the run's
    version has no such task, or it has no such instance)."""
    return session.scalar(select(TaskInstance).where(TaskInstance.run_id == run_id, TaskInstance.task_id == task_id,
                                                     TaskInstance.map_index == map_index))


def instances(session: Session, run_id: int, task_id: str) -> list[TaskInstance]:
    """Every task instance of `task_id` in run `run_id`, by map index (one, map_index -1, when it is not mapped
    or not expanded yet; none when the run's version has no such task)."""
    return list(session.scalars(select(TaskInstance).where(TaskInstance.run_id == run_id,
                                                           TaskInstance.task_id == task_id)
                                .order_by(TaskInstance.map_index)))


def expand(session: Session, ti: TiRow, dag_id: str, count: int) -> None:
    """A mapped task's unexpanded instance (map_index -1) becomes instance 0 of `count`; instances 1..count-1
    are made like it (scheduled, no try yet), or, for a task expanded again after a clear, its `removed`
    instances below `count` come back (scheduled, with fresh tries); those at or past `count` stay removed.
    No row is deleted: nothing an instance recorded is lost. Each instance takes the waiting row's pool, pool slots
    and the version its tries run (a clear onto the latest version gave it them: decision 0271)."""
    session.execute(update(TaskInstance).where(TaskInstance.id == ti.id, TaskInstance.map_index == NOT_MAPPED)
                    .values(map_index=0))
    retries = ti.max_tries - ti.try_number - 1  # what the waiting row was given, by its run or by a clear
    have = {r.map_index: r for r in session.scalars(select(TaskInstance).where(
        TaskInstance.run_id == ti.run_id, TaskInstance.task_id == ti.task_id, TaskInstance.map_index > 0))}
    for i, row in have.items():
        if i < count and row.state == TaskState.REMOVED.value:
            rearm(row, retries, arm=False)
            row.pool, row.pool_slots, row.dag_version = ti.pool, ti.pool_slots, ti.version
    missing = [i for i in range(1, count) if i not in have]
    if missing:
        session.execute(insert(TaskInstance), [
            {"run_id": ti.run_id, "dag_id": dag_id, "task_id": ti.task_id, "map_index": i,
             "state": TaskState.SCHEDULED.value, "try_number": 0, "max_tries": retries + 1,
             "priority_weight": ti.priority_weight, "pool": ti.pool, "pool_slots": ti.pool_slots,
             "dag_version": ti.version}
            for i in missing])


def in_unfinished_runs(session: Session, dag_id: str, task_id: str) -> list[tuple[DagRun, TaskInstance | None]]:
    """The DAG's queued and running runs, by logical date, each with its task instance of `task_id` (None when
    the run's version has no such task): one statement."""
    return list(session.execute(
        select(DagRun, TaskInstance).outerjoin(TaskInstance, and_(TaskInstance.run_id == DagRun.id,
                                                                  TaskInstance.task_id == task_id))
        .where(DagRun.dag_id == dag_id, DagRun.state.in_(UNFINISHED))
        .order_by(DagRun.logical_date)).tuples())


_REQUESTS = select(TaskInstance.id, TaskInstance.signal_request, TaskInstance.signal_id).where(
    TaskInstance.signal_request.is_not(None), TaskInstance.job_id == bindparam("job"),
    TaskInstance.state.in_(ACTIVE))  # built once: the loop asks every time
_PENDING_REQUESTS = select(TaskInstance, DagRun).join(DagRun, DagRun.id == TaskInstance.run_id).where(
    TaskInstance.id.in_(bindparam("ids", expanding=True)), TaskInstance.signal_request.is_not(None))


def signal_requests(session: Session, job_id: int) -> list[tuple[int, str, int | None]]:
    """(ti id, 'stop' | 'restart' | 'start', signal id) of queued or running tries this job runs."""
    return [(r.id, r.signal_request, r.signal_id) for r in session.execute(_REQUESTS, {"job": job_id})]


def with_pending_requests(session: Session, ti_ids: list[int]) -> list[tuple[TaskInstance, DagRun]]:
    """Those of these task instances that have a signal request pending, each with its run."""
    return list(session.execute(_PENDING_REQUESTS, {"ids": list(ti_ids)}).tuples())


def rearm(ti: TaskInstance, retries: int, *, arm: bool) -> None:
    """A finished task instance gets a new try (and its retries again), waiting to be queued. `arm`: a signal's
    START made it ready (signal_armed is set); otherwise signal_armed is left as it was (`ledger tasks clear`)."""
    move_task(ti, TaskState.SCHEDULED, max_tries=ti.try_number + 1 + retries, next_try_at=None, ended_at=None,
              **({"signal_armed": True} if arm else {}))


@dataclass(frozen=True, slots=True)
class AdoptedTry:
    """A queued or running try another job held, as the job that adopts it needs it (ledger/store: adopt)."""

    ti_id: int
    try_number: int
    run_id: int
    dag_id: str
    task_id: str
    map_index: int
    state: TaskState
    version_hash: str
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    run_type: str
    priority_weight: int


def adoptable(session: Session, ti_ids: list[int]) -> list[AdoptedTry]:
    """The queued or running tries of these task instances, with what a job needs to follow them."""
    if not ti_ids:
        return []
    rows = session.execute(select(
        TaskInstance.id, TaskInstance.try_number, TaskInstance.run_id, TaskInstance.dag_id, TaskInstance.task_id,
        TaskInstance.map_index, TaskInstance.state, func.coalesce(TaskInstance.dag_version, DagRun.version_hash),
        DagRun.logical_date,
        DagRun.data_interval_start, DagRun.data_interval_end, DagRun.run_type, TaskInstance.priority_weight,
    ).join(DagRun, DagRun.id == TaskInstance.run_id).where(TaskInstance.id.in_(ti_ids),
                                                           TaskInstance.state.in_(ACTIVE)))
    return [AdoptedTry(r[0], r[1], r[2], r[3], r[4], r[5], TaskState(r[6]), r[7], r[8], r[9], r[10], r[11], r[12])
            for r in rows]


def adopt(session: Session, tries: list[tuple[int, int]], *, job_id: int) -> None:
    """Make this job the holder of tries that still run (or wait) on remote workers after their job died: (ti id,
    try number), each guarded on being queued or running with that try number (StaleState when one changed)."""
    if not tries:
        return
    written = 0  # (not a state write: the holder of an active try changes, guarded on it being active)
    for ti_id, try_number in tries:
        written += session.execute(update(TaskInstance).where(
            TaskInstance.id == ti_id, TaskInstance.try_number == try_number, TaskInstance.state.in_(ACTIVE),
        ).values(job_id=job_id)).rowcount  # type: ignore[attr-defined]
        session.execute(update(TaskTry).where(TaskTry.task_instance_id == ti_id, TaskTry.try_number == try_number)
                        .values(job_id=job_id))
    if written != len(tries):
        raise StaleState(f"adopting tries: {len(tries) - written} of {len(tries)} changed meanwhile")
