"""What a job's loop reads and writes about the runs it holds (scheduler/loop/job.py): the held runs, the
capacity they compete for, and a run's state changes with their event."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from ledger.core.states import UNFINISHED_RUN_STATES as UNFINISHED
from ledger.core.states import RunState
from ledger.models import Dag, DagRun, Event
from ledger.store import events
from ledger.store.hot import Hot
from ledger.store.transitions import guarded

# built once: the loop runs them every time, and building a statement costs more than running it on SQLite
_HELD = select(DagRun.id).where(DagRun.lock_holder == bindparam("job"), DagRun.state.in_(UNFINISHED)) \
    .limit(bindparam("limit"))
_HELD_OLDEST = _HELD.order_by(DagRun.logical_date, DagRun.id)
_HELD_NEWEST = _HELD.order_by(DagRun.logical_date.desc(), DagRun.id.desc())
_RUNS = select(DagRun).where(DagRun.id.in_(bindparam("ids", expanding=True)))
_NEWEST_EVENT = select(func.max(Event.id))
_RUNNING_BY_DAG = (select(DagRun.dag_id, func.count())
                   .where(DagRun.state == RunState.RUNNING.value,
                          DagRun.dag_id.in_(bindparam("dag_ids", expanding=True)))
                   .group_by(DagRun.dag_id))


def held_run_ids(session: Session, job_id: int, *, limit: int, newest_first: bool = False) -> list[int]:
    """The unfinished runs `job_id` holds, oldest first (newest first for backwards backfills)."""
    return list(session.scalars(_HELD_NEWEST if newest_first else _HELD_OLDEST, {"job": job_id, "limit": limit}))


def runs_by_id(session: Session, run_ids: Iterable[int]) -> dict[int, DagRun]:
    ids = list(run_ids)
    return {r.id: r for r in session.scalars(_RUNS, {"ids": ids})} if ids else {}


def running_runs_by_dag(session: Session, dag_ids: set[str]) -> dict[str, int]:
    """How many runs of each DAG are running now (held by any job)."""
    if not dag_ids:
        return {}
    return dict(session.execute(_RUNNING_BY_DAG, {"dag_ids": list(dag_ids)}).tuples().all())


def dags_holding_queued(session: Session, dag_ids: set[str] | None) -> set[str]:
    """The DAGs paused with --stop-queued (of `dag_ids`, or all): their queued runs do not start."""
    if dag_ids is not None and not dag_ids:
        return set()
    stmt = select(Dag.dag_id).where(Dag.hold_queued.is_(True))
    return set(session.scalars(stmt if dag_ids is None else stmt.where(Dag.dag_id.in_(dag_ids))))


def intervals(session: Session, run_ids: set[int]) -> dict[int, tuple[str, str]]:
    """Each run's data interval (ISO), for templates' prev_data_interval_*."""
    if not run_ids:
        return {}
    rows = session.execute(select(DagRun.id, DagRun.data_interval_start, DagRun.data_interval_end)
                           .where(DagRun.id.in_(run_ids)))
    return {i: (start.isoformat(), end.isoformat()) for i, start, end in rows}


def dates_and_dags(session: Session, run_ids: Iterable[int]) -> dict[int, tuple[float, str]]:
    """Each run's logical date (a timestamp) and DAG, for verify mode's check of what a job keeps of them."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = session.execute(select(DagRun.id, DagRun.logical_date, DagRun.dag_id).where(DagRun.id.in_(ids)))
    return {i: (date.timestamp(), dag_id) for i, date, dag_id in rows}


_SINCE = Hot(select(func.max(Event.id), func.count(case((Event.id.not_in(bindparam("mine", expanding=True)), 1))))
             .where(Event.id > bindparam("seen")))


def events_since(session: Session, seen: int, mine: Collection[int]) -> tuple[int, bool]:
    """(the newest event id, whether an event newer than `seen` is not one of `mine`): `seen` is the newest id the
    caller's last transaction read at its start, `mine` the ids of the events that transaction appended. An
    event another process committed while the caller's transaction ran is newer than `seen` and not the
    caller's, whatever its id is next to the caller's own."""
    ((newest, others),) = _SINCE.rows(session, {"seen": seen, "mine": list(mine)})
    return (seen if newest is None else int(newest)), bool(others)


_DATA_VERSION = Hot(text("PRAGMA data_version"))


def data_version(session: Session) -> int:
    """SQLite only: PRAGMA data_version on the session's connection. It changes when another connection commits,
    and only then: this connection's own commits leave it as it was."""
    return int(_DATA_VERSION.rows(session)[0][0])


def newest_event_id_on(conn: Connection) -> int:
    """The newest event's id, on a bare connection (the sleeping scheduler's wake-up check)."""
    return int(conn.execute(_NEWEST_EVENT).scalar() or 0)


def dag_fileloc(session: Session, dag_id: str) -> str:
    return session.scalar(select(Dag.fileloc).where(Dag.dag_id == dag_id)) or ""


_STATE_UPDATES: dict[tuple[RunState, bool], Hot] = {}
_RUNS_TABLE: Any = DagRun.__table__


def _state_update(state: RunState, release: bool) -> Hot:
    """The Core UPDATE for moving a run to `state` (built once per state and lock release)."""
    found = _STATE_UPDATES.get((state, release))
    if found is None:
        t = _RUNS_TABLE
        values: dict[str, Any] = {"state": state.value}
        if state == RunState.RUNNING:
            values["started_at"] = bindparam("at", type_=t.c.started_at.type)
        if state in (RunState.SUCCESS, RunState.FAILED):
            values["ended_at"] = bindparam("at", type_=t.c.ended_at.type)
        if release:
            values["lock_holder"] = None
        found = _STATE_UPDATES[(state, release)] = Hot(
            update(t).where(t.c.id == bindparam("run"), t.c.state == bindparam("was")).values(**values))
    return found


_DEADLINE_MISSED = update(_RUNS_TABLE).where(_RUNS_TABLE.c.id == bindparam("run")).values(
    deadline_missed_at=bindparam("at", type_=_RUNS_TABLE.c.deadline_missed_at.type))


def set_deadline_missed(session: Session, run: DagRun, *, now: datetime) -> None:
    """Note on `run` that its deadline passed (once: the event and callbacks are the caller's)."""
    session.connection().execute(_DEADLINE_MISSED, {"run": run.id, "at": now})
    set_committed_value(run, "deadline_missed_at", now)


def set_run_state(session: Session, run: DagRun, state: RunState, *, now: datetime, actor: str,
                  release: bool = False, reason: str | None = None) -> str:
    """Move `run` to `state` (stamping started_at / ended_at; `release`: drop its lock) and record the
    `run_state_changed` event. Returns the state it had. Guarded on that state (the object's): StaleState, and
    nothing written, when another process changed the run since it was read."""
    before = run.state
    stamped = state in (RunState.RUNNING, RunState.SUCCESS, RunState.FAILED)
    guarded(session, _state_update(state, release),
            [{"run": run.id, "was": before, **({"at": now} if stamped else {})}], [(f"run {run.id}", before, state)],
            f"moving run {run.id} from {before} to {state.value}: it changed meanwhile")
    # the object says what the row now holds, without the ORM writing it a second time: the job may keep it
    # (detached) as its picture of the run
    set_committed_value(run, "state", state.value)
    if state == RunState.RUNNING:
        set_committed_value(run, "started_at", now)
    if state in (RunState.SUCCESS, RunState.FAILED):
        set_committed_value(run, "ended_at", now)
    if release:
        set_committed_value(run, "lock_holder", None)
    events.record(session, "run_state_changed", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": before, "to": state.value, "logical_date": run.logical_date.isoformat()},
                  **({"reason": reason} if reason else {}))
    return before
