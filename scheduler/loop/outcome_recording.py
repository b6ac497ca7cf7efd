"""Recording what executors reported of tries: the facts read, the pure rule's decisions, the guarded writes.

ledger/core/outcomes.py decides what each report makes of its task instance; ledger/store/tasks.py reads what the
rule needs (current_tries) and writes what it decided (write_outcomes). This module puts the three together, and
records what follows in the job (scheduler/loop/job.py): its pictures of held runs, stop requests settled,
task-state signals, callbacks, what the tries' reports hold (values passed on, rendered templates, lineage,
outlets, remote logs), failure events and lines.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from ledger.core.mapping import NOT_MAPPED, label
from ledger.core.outcomes import Outcome, decide_all
from ledger.core.states import TaskState
from ledger.infra.logs import log_file
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.executors.base import NEVER_STARTED_PREFIX, TaskEvent
from ledger.scheduler.loop import dataset_runs, flow_events, remote_logs
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.runtime.try_outcome import retry_delay
from ledger.scheduler.runtime.try_report import TryReport
from ledger.store import dags as dag_store
from ledger.store import events, lineage, try_logs
from ledger.store import tasks as task_store
from ledger.store import xcom as xcom_store

if TYPE_CHECKING:
    from ledger.scheduler.loop.queueing import InFlight

Job = Any  # a DagRunJob (scheduler/loop/job.py), which imports this module: typed there; importing it here
# (even for types) would make a cycle


def record_outcomes(session: Session, outcomes: list[Outcome], known: Mapping[int, tuple[int, int, str]] | None = None,
                    *, max_lost_tries: int = 3, now: datetime | None = None) -> list[tuple[Outcome, TaskState]]:
    """Record `outcomes` in `session`; the states written, in order (an outcome of a try that is no longer the
    current one is left out). `known`: ti id -> (try number, max tries, state) as the caller knows the database
    holds them (see task_store.current_tries). StaleState when another process changed a row meanwhile."""
    if not outcomes:
        return []
    current = task_store.current_tries(session, outcomes, known)
    decided = decide_all(outcomes, current, max_lost_tries=max_lost_tries, now=now)
    task_store.write_outcomes(session, decided)
    return [(d.outcome, d.state) for d in decided]


def ended_how(o: Outcome, st: TaskState, settings: SchedulerSettings) -> str:
    """What a try's end means for its task instance, in words: the log's last line and the event's reason."""
    if o.state == TaskState.LOST:
        if st == TaskState.SCHEDULED:
            return f"lost: {o.reason}; it gets a new try (a lost try spends no retry)"
        if st == TaskState.FAILED:
            return (f"lost: {o.reason}; {settings.max_lost_tries} tries lost in a row (LEDGER_MAX_LOST_TRIES), "
                    "so the task fails")
        return f"lost: {o.reason}; its run has ended or it was asked to stop, so it gets no new try"
    return f"{o.reason}; it gets a new try" if st == TaskState.SCHEDULED else str(o.reason)


def fail_unsubmitted(job: Job, session: Session, now: datetime) -> None:
    """After a failed transaction whose COMMIT may have reached the database unseen: tries queued in this
    job's name that no worker was given end as never started (their task instances get a new try, see
    _record), so that nothing waits for them and nothing runs twice."""
    job._reconcile = False
    mine = set(job._inflight) | job.executor.in_flight()
    lost = [(ti, tn) for ti, tn in task_store.unfinished_in_job(session, job.job_id) if ti not in mine]
    if lost:
        record(job, session, [TaskEvent(ti, tn, "finished", time.time(), "failed",
                                         reason="never started: queued in a transaction a database fault "
                                                "interrupted") for ti, tn in lost], now)


def with_reports_kept(job: Job, drained: list[TaskEvent]) -> list[TaskEvent]:
    """The drained events, remote tries' logs put in the remote log store first (before the transaction: no
    network in it) when the job has one: their reports then carry no log text."""
    if job.remote_logs is None:
        return drained
    reports = {(ev.ti_id, ev.try_number): ev.report for ev in drained if ev.report is not None}
    names = {(ev.ti_id, ev.try_number): log_file("", i.dag_id, i.run_id, i.task_id, ev.try_number, i.map_index)
             for ev in drained if ev.kind == "finished" and (i := job._inflight.get(ev.ti_id)) is not None}
    kept = remote_logs.keep(job.remote_logs, reports, names, job.say)
    return [dataclasses.replace(ev, report=kept[(ev.ti_id, ev.try_number)]) if ev.report is not None else ev
            for ev in drained]


def record(job: Job, session: Session, drained: list[TaskEvent], now: datetime) -> int:
    """Record what the executor reported: the outcomes as the pure rule decides them (ledger/core/outcomes.py),
    through guarded writes, then what follows from them (pictures, stop requests settled, task-state signals,
    callbacks, what the tries' reports hold, failure events)."""
    where: dict[tuple[int, int], InFlight | None] = {}
    outcomes = _outcomes(job, drained, now, where)
    written = record_outcomes(session, outcomes, _known_tries(job, drained, where) if job._serial else None,
                              max_lost_tries=job.settings.max_lost_tries, now=now)
    for o, st in written:
        requeued_info = where.get((o.ti_id, o.try_number)) if o.requeue or o.state == TaskState.LOST else None
        if requeued_info is not None and requeued_info.log_path:  # written once this transaction has committed
            job.effects.note(requeued_info.log_path, o.at, f"outcome: {ended_how(o, st, job.settings)}")
    _picture_outcomes(job, drained, written, where)
    for o, st in written:
        if st != TaskState.RUNNING:
            job.metrics.finished.labels(TaskState.LOST.value if o.state == TaskState.LOST else st.value).inc()
    ended = [o.ti_id for o, st in written if st != TaskState.RUNNING]
    for rearmed in job.stops.settle(session, ended, serial=job._serial):
        job.forget(rearmed, "a signal request gave a new try")
    for o, st in written:
        info = where.get((o.ti_id, o.try_number))
        if info is not None:
            job.effects.task_states.add(info.dag_id, info.task_id, st.value,
                                 {"run_id": info.run_id, "try_number": o.try_number})
    job.callbacks.request_task(session, written, where)
    _record_reports(job, session, written, where, {(ev.ti_id, ev.try_number): ev.report for ev in drained
                                                   if ev.report is not None}, now)
    _record_failures(job, session, written, where, now)
    return len(written)


def _outcomes(job: Job, drained: list[TaskEvent], now: datetime,
              where: dict[tuple[int, int], InFlight | None]) -> list[Outcome]:
    """The outcomes to write for the drained events (`where` takes each try's in-flight record), and what the
    events change in the job: tries started (metrics), ended (no longer in flight), killed (stopped); the last two
    once the transaction has committed."""
    outcomes = []
    host = socket.gethostname()
    for ev in drained:
        info = job._inflight.get(ev.ti_id)
        where[(ev.ti_id, ev.try_number)] = info
        at = datetime.fromtimestamp(ev.at, UTC)
        state = TaskState.RUNNING if ev.kind == "started" else TaskState(ev.state or "failed")
        # a try that never started though nobody stopped it (it waited in a worker when the job stopped, or a
        # database fault kept it from a worker): recorded stopped, and its task instance gets a new try that
        # costs it no retry (task_store.record_outcomes: unless a stop is pending or its run has ended)
        unstarted = ev.kind == "finished" and (ev.reason or "").startswith(NEVER_STARTED_PREFIX)
        requeue = unstarted and ev.ti_id not in job.stops.killed and job.requeues_unstarted()
        if ev.kind == "finished" and ev.ti_id in job.stops.killed:
            why = job.stops.killed[ev.ti_id]
            job.effects.stops_told.append(ev.ti_id)  # (forgotten once recorded)
            if state in (TaskState.FAILED, TaskState.LOST):  # ended by the kill (it may have ended on its own)
                state = TaskState.STOPPED
                if info is not None and info.log_path:  # written once this transaction has committed
                    if unstarted:  # taken out while it waited in its worker
                        why = ev.reason or why
                    job.effects.note(info.log_path, at, f"outcome: {why}")
        delay = retry_delay(ev.reason, info.retry_delay if info else 0.0)  # (a retry policy may name its own)
        outcomes.append(Outcome(ev.ti_id, ev.try_number, state, at, ev.pid, ev.host or host, ev.reason, delay,
                                decided_at=now, requeue=requeue, armed=requeue and info is not None and info.armed,
                                **flow_events.sensor_outcome(state, ev.reason, ev.report)))
        if ev.kind == "started":
            if info is not None and not info.started:
                info.started = True
                job.metrics.started.inc()
                if info.queued_at:
                    job.metrics.lag.observe(max(0.0, ev.at - info.queued_at))
        elif info is None:
            job.forget(reason="an outcome of a try this job does not know")  # (another job's lost one)
        else:
            job.memory.settled.pop(info.run_id, None)
            job.memory.forget_past_of(info.run_id)
        if ev.kind == "finished":
            job.effects.ended.append(ev.ti_id)  # (no longer followed once recorded)
    return outcomes


def _record_reports(job: Job, session: Session, written: list[tuple[Outcome, TaskState]],
                    where: dict[tuple[int, int], InFlight | None],
                    reports: Mapping[tuple[int, int], TryReport], now: datetime) -> None:
    """What the ended tries' reports hold: values pushed, rendered templates, lineage writes, outlets, logs."""
    checked: list[dict[str, Any]] = []
    logs: list[tuple[int, int, str | None, str]] = []
    for o, st in written:
        info = where.get((o.ti_id, o.try_number))
        if info is None or not info.log_path or st == TaskState.RUNNING:
            continue
        left = reports.get((o.ti_id, o.try_number))
        if left is None:  # (no report came back: an end its executor or the job decided, a lost try)
            continue
        pushed = list(left.pushed)
        if pushed:  # a sensor's checks: an event
            checked += flow_events.sensor_checked(info.dag_id, info.run_id, info.label, o, st, pushed,
                                                  now=now, actor=job.actor)
            xcom_store.record(session, pushed, run_id=info.run_id, task_id=info.task_id,
                              try_number=o.try_number, now=now, map_index=info.map_index)
            job.facts.pushed(info.run_id, info.label, pushed)
        if left.rendered is not None:
            xcom_store.set_rendered(session, o.ti_id, o.try_number, left.rendered)
        lineage.record(session, list(left.writes), run_id=info.run_id,
                       dag_id=info.dag_id, task_id=info.task_id, try_number=o.try_number,
                       dag_version=info.dag_version, try_state=st.value, now=now)
        if left.log is not None:  # a remote try's log: kept where every host can read it
            logs.append((o.ti_id, o.try_number, o.hostname, left.log))
        if st == TaskState.SUCCESS and dataset_runs.record_outlets(
                session, dag_store.spec(session, info.dag_id, info.dag_version), run_id=info.run_id,
                task_id=info.task_id, try_number=o.try_number, writes=list(left.writes),
                outlet_events=list(left.outlets), now=now):
            job.datasets_changed()
    try_logs.keep(session, logs)
    events.record_many(session, checked)


def _record_failures(job: Job, session: Session, written: list[tuple[Outcome, TaskState]],
                     where: dict[tuple[int, int], InFlight | None], now: datetime) -> None:
    """One event per try that failed, was lost or never started, and a line saying so."""
    failed = [(o, st) for o, st in written if st in (TaskState.FAILED, TaskState.UP_FOR_RETRY, TaskState.SCHEDULED)
              or o.state == TaskState.LOST]
    unknown = [o.ti_id for o, _ in failed if where.get((o.ti_id, o.try_number)) is None]  # lost tries of other jobs
    found = task_store.subjects(session, unknown)
    failures = []
    for o, st in failed:
        info = where.get((o.ti_id, o.try_number))
        dag_id, run_id, task_id, index = (info.dag_id, info.run_id, info.task_id, info.map_index) \
            if info is not None else found.get(o.ti_id, (None, None, None, NOT_MAPPED))
        if info is None and o.state == TaskState.LOST and dag_id and run_id and task_id:
            # another job's try: its log says what became of it, as this job's own tries' logs do
            path = log_file(str(job.logs_folder), dag_id, run_id, task_id, o.try_number, index)
            job.effects.note(path, o.at, f"outcome: {ended_how(o, st, job.settings)}")
        lost = o.state == TaskState.LOST
        kind = "try_lost" if lost else "try_not_started" if st == TaskState.SCHEDULED else "task_failed"
        failures.append(dict(
            at=now, kind=kind, actor=job.actor, dag_id=dag_id, run_id=run_id,
            details={"task_id": task_id, "ti_id": o.ti_id, "try_number": o.try_number,
                     "reason": ended_how(o, st, job.settings) if lost else o.reason,
                     "state": st.value, **({"map_index": index} if index >= 0 else {})}))
        job.say(f"{dag_id} run {run_id} task {label(task_id or '?', index)} try {o.try_number}: "
                 f"{'lost' if lost else st.value} ({ended_how(o, st, job.settings)})")
    events.record_many(session, failures)


def _known_tries(job: Job, drained: list[TaskEvent], where: dict[tuple[int, int], InFlight | None]
                 ) -> dict[int, tuple[int, int, str]]:
    """ti id -> (try number, max tries, state) of the drained tries' task instances, from the held runs'
    pictures (which hold what the database holds: see forget); those not pictured are read."""
    known = {}
    for ev in drained:
        info = where.get((ev.ti_id, ev.try_number))
        picture = job.memory.pictures.get(info.run_id) if info is not None else None
        row = picture.tis.get(info.label) if picture is not None and info is not None else None
        if row is not None and row.id == ev.ti_id:
            known[row.id] = (row.try_number, row.max_tries, row.state.value)
    return known


def _picture_outcomes(job: Job, drained: list[TaskEvent], written: list[tuple[Outcome, TaskState]],
                      where: dict[tuple[int, int], InFlight | None]) -> None:
    """The held runs' pictures take the states just written: a try that started or succeeded changes only its
    task instance's state. Anything else (a failure, a retry, a stop, an outcome the database ignored) is
    read again from the database, which decided it."""
    states = {(o.ti_id, o.try_number): st for o, st in written}  # the last one written (a start, then its end)
    kept = {key for key, st in states.items() if st in (TaskState.RUNNING, TaskState.SUCCESS)}
    for ev in drained:
        info = where.get((ev.ti_id, ev.try_number))
        if info is None or info.run_id not in job.memory.pictures:
            continue
        picture = job.memory.pictures[info.run_id]
        row = picture.tis.get(info.label)
        if (ev.ti_id, ev.try_number) not in kept or row is None or row.id != ev.ti_id \
                or row.try_number != ev.try_number:
            job.forget(info.run_id, "an outcome the database decided (failure, retry, stop)")
            continue
        job.memory.wrote(picture.run.id, row.with_state(states[(ev.ti_id, ev.try_number)]))


def hold_starts(job: Job, drained: list[TaskEvent], report: LoopReport) -> bool:
    """Whether this loop can leave out its transaction: it would only write that tries started, while every
    worker is busy (nothing could be queued). Those starts are written, with the times they happened, by
    the next transaction (mostly the one that records how the tries ended), at most
    `started_write_delay` seconds later: one transaction per try instead of two."""
    delay = job.settings.started_write_delay
    if delay <= 0 or not drained or any(ev.kind != "started" for ev in drained) or job.callbacks.results \
            or job._reconcile or job.stopping or job.executor.open_slots() > 0 \
            or job.heartbeat.due():
        return False  # (a due heartbeat is written: holding starts never makes the job look silent)
    now = time.monotonic()
    if job._held_since is None:
        job._held_since = now
    if now - job._held_since >= delay:
        return False
    report.write_by = job._held_since + delay
    return True
