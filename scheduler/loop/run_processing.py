"""The held runs of a job: claimed (a job that stopped heart-beating loses its runs, and its tries are lost or
adopted), read into pictures, decided by the pure planner (scheduler/loop/planner.py) and written through guarded
transitions: runs started and finished, task instances marked by trigger rules, mapped tasks expanded, deadlines
missed, dagrun_timeouts; then the ready task instances are queued (scheduler/loop/queueing.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.dependencies import PreviousRun
from ledger.core.mapping import expand_task, label, source_text
from ledger.core.outcomes import Outcome
from ledger.core.states import JobState, RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.models import DagRun
from ledger.scheduler.executors.base import TaskEvent, WorkItem
from ledger.scheduler.loop import adoption, flow_events, outcome_recording, queueing
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.loop.planner import HeldRun, plan_runs
from ledger.scheduler.loop.queueing import InFlight
from ledger.sdk.xcom import pull_view
from ledger.services.operations import stop_tasks
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import jobs as job_store
from ledger.store import loop as loop_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from ledger.store.backfills import backfill_room, under_cancel

Job = Any  # a DagRunJob (scheduler/loop/job.py), which imports this module: typed there; importing it here
# (even for types) would make a cycle



def read_everything_again(job: Job, session: Session) -> None:
    """Another process wrote (CLI, backfill, another job; every change comes with an event), or a poll
    interval passed: every held run is read and decided again."""
    job.forget(reason="another process wrote, or a poll interval passed")
    job.claims.soon()  # it may have made runs to claim (a trigger, a backfill, a lock released)
    job.others_wrote(session)


def decide_runs(job: Job, session: Session, now: datetime, report: LoopReport) -> list[WorkItem]:
    """Stop what was asked to stop, create due runs, claim runs, decide the held runs: the tries to queue."""
    ended = job.effects.ended  # (tries whose end this transaction recorded: followed until it commits)
    job.stops.carry_out(session, job.job_id, job.executor, job._inflight.keys() - ended if ended else job._inflight)
    report.created = job.create_runs(session, now)
    if report.created:
        job.claims.soon()
        job.forget(reason="runs created")  # a new run may be a held run's previous one (relinked)
    if job.claims.due():
        report.looked_for_runs = True
        reap_dead_holders(job, session, now)
        report.claimed = collect_runs(job, session, now)
    return process_runs(job, session, now, report)


def reap_dead_holders(job: Job, session: Session, now: datetime) -> None:
    """Jobs on this host whose process is gone lose their locks at once, without waiting for
    lock_timeout (a scheduler killed with kill -9 and restarted resumes straight away)."""
    for job_id in job_store.dead_local_holders(session, job.job_id):
        held = job_store.held_runs(session, job_id)
        job_store.end_job(session, job_id, now=now, state=JobState.FAILED)
        # one event per run it held, naming the run and its DAG, so that `ledger events --dag/--run` finds it
        events.record_many(session, [
            dict(at=now, kind="job_died", actor=job.actor, dag_id=dag_id, run_id=run_id,
                 details={"job_id": job_id, "reason": "its process is gone (same host)"})
            for run_id, dag_id in held])


def collect_runs(job: Job, session: Session, now: datetime) -> int:
    """Claim runs for this job; the tries of a job that stopped heart-beating (or whose process is gone) are
    lost, and each gets a new try."""
    claimed = job.claims.claim(session, job.job_id, now, job.actor, job.claim_filter())
    if not claimed:
        return 0
    ids = [run_id for run_id, _ in claimed]
    job.facts.let_go(ids)  # another job may have held them meanwhile: their values are read again
    for run_id, holder in claimed:
        if holder is not None:
            job.say(f"took over run {run_id} from job {holder}, which stopped heart-beating")
    orphans = task_store.orphaned(session, ids, job_id=job.job_id)
    if orphans:  # tries that may run on without their job are offered to the executor (scheduler/loop/adoption.py)
        offers, orphans = adoption.offer(session, orphans, logs=str(job.logs_folder))
        job.effects.offered.extend(offers)
    lose(job, session, orphans, now)
    return len(claimed)


def lose(job: Job, session: Session, orphans: list[tuple[int, int, int]], now: datetime) -> int:
    """Record a dead job's tries lost (ti id, try number, run id): each gets a new try that spends no retry."""
    if not orphans:
        return 0
    return outcome_recording.record(job, session, [TaskEvent(ti, tn, "finished", time.time(), "lost",
                                                             reason="its job stopped heart-beating")
                                                   for ti, tn, _run in orphans], now)


def settle_offers(job: Job, session: Session, looked: adoption.Looked, now: datetime) -> int:
    """The dead jobs' tries offered to the executor by an earlier transaction, now that it has looked for them
    (scheduler/loop/adoption.py): the found ones adopted and followed once this transaction commits, the others
    lost. How many outcomes it recorded."""
    if not looked.offers:
        return 0
    settled = adoption.settle(session, looked, job_id=job.job_id, actor=job.actor, now=now)
    for ti_id, fields in settled.adopted.items():
        job.effects.queued[ti_id] = InFlight(**fields)
        job.forget(fields["run_id"], "tries adopted")
    job.effects.follow.update(settled.follow)
    return lose(job, session, settled.lost, now)


def process_runs(job: Job, session: Session, now: datetime, report: LoopReport) -> list[WorkItem]:
    held_ids = job.claims.held(session, job.job_id)
    if not held_ids:
        job.forget(reason="no runs held")
        return []
    job.memory.keep_only(set(held_ids))
    todo = [i for i in held_ids if i not in job.memory.settled]
    cached = [c for i in held_ids if i in job.memory.settled for c in job.memory.settled[i]]
    if not todo:
        return queueing.queue_tries(job, session, cached, now, report)
    held = [job.memory.pictures[i] for i in todo if i in job.memory.pictures]
    held += _read_held(job, session, [i for i in todo if i not in job.memory.pictures])
    queued = {h.run.dag_id for h in held if h.run.state == RunState.QUEUED.value}
    running = loop_store.running_runs_by_dag(session, {h.run.dag_id for h in held}) if queued else {}
    backfills = {h.run.backfill_id for h in held
                 if h.run.state == RunState.QUEUED.value and h.run.backfill_id is not None}
    plan = plan_runs(held, running, now=now, newest_first=job.newest_first,
                     values=lambda run_id: job.facts.passed_values(session, {run_id})[run_id],
                     backfill_room=backfill_room(session, backfills))
    job.memory.remember(held)
    specs = {h.run.id: h.spec for h in held}
    for run in plan.start:
        set_run_state(job, session, run, RunState.RUNNING, now)
    job.memory.successor.update(plan.successors)
    for ti, st, run in plan.mark:
        job.effects.task_states.add(run.dag_id, ti.task_id, st.value, {"run_id": run.id})
    task_store.mark(session, [(ti.id, ti.state, st) for ti, st, _run in plan.mark], now=now)
    if plan.why:  # skips a branch or short-circuit chose: an event each, with the reason
        flow_events.record_skips(session, plan, now=now, actor=job.actor, say=job.say)
    for ti, st, run in plan.mark:
        picture = job.memory.pictures.get(run.id)  # (None: forgotten by the mark of its previous run, just above)
        if picture is not None:
            job.memory.wrote(picture.run.id, ti.with_state(st))
        job.memory.forget_past_of(run.id)
    for run_id in plan.waiting_on_past:  # its previous run's states are read again each loop, as they change
        job.memory.pictures.pop(run_id, None)
    _expand(job, session, plan.expand, now)
    job.memory.settled.update(plan.settled)
    report.retry_at = plan.retry_at
    report.marked = len(plan.mark) + len(plan.expand)
    report.runs_changed += len(plan.start) + len(plan.finish)
    for run in plan.deadline_missed:
        _deadline_missed(job, session, run, specs[run.id], now)
    for run in plan.timed_out:
        job.forget(run.id, "dagrun_timeout")
        stopping, skipped = stop_tasks(session, run, now=now)
        job.stops.read_again()  # its stop requests: carried out below, and settled when the tries end
        limit = f"dagrun_timeout of {specs[run.id].dagrun_timeout:g} s"
        for instance in run_store.task_instances(session, run.id) if stopping else []:
            if label(instance.task_id, instance.map_index) in stopping:  # its log and outcome say why
                job.effects.stop_reasons[instance.id] = f"stopped by the run's {limit}"
        plan.finish.append((run, RunState.FAILED, f"{limit} passed; stopping {stopping or 'no tries'}, skipped "
                                                  f"{skipped or 'nothing'}"))
    for run, state, reason in plan.finish:
        job.facts.let_go([run.id])
        job.forget(run.id, "run finished")
        job.claims.released(run.id)  # its lock is released here
        set_run_state(job, session, run, state, now, release=True, reason=reason)
    if plan.finish:
        job.claims.some_released()
    for backfill_id in {run.backfill_id for run, _, _ in plan.finish if run.backfill_id is not None}:
        job.settle_backfill(session, backfill_id, now)
    return queueing.queue_tries(job, session, plan.ready + cached, now, report)


def _expand(job: Job, session: Session, candidates: list[tuple[task_store.TiRow, DagRun, DagSpec]],
            now: datetime) -> None:
    """Expand mapped tasks whose upstream is done (ledger/core/mapping.py), from their run's version and the values
    its tasks passed on: the instances are made, or the task is skipped (empty list) or fails (not a list,
    too long, no value), each recorded as an event with the reason."""
    if not candidates:
        return
    for _ti, run, _spec in candidates:
        job.forget(run.id, "mapped task expanded")  # its task instances change in ways read again
    passed = job.facts.passed_values(session, {run.id for _ti, run, _spec in candidates})
    limit = job.settings.max_map_length
    for ti, run, spec in candidates:
        sources = spec.tasks[ti.task_id].expand
        source = source_text(sources)
        found = expand_task(sources, pull_view(passed[run.id]), max_length=limit)
        where = f"{run.dag_id} run {run.id} task {ti.task_id}"
        if found.state is None:
            task_store.expand(session, ti, run.dag_id, found.count)
            events.record(session, "task_expanded", at=now, actor=job.actor, dag_id=run.dag_id, run_id=run.id,
                          task_id=ti.task_id, count=found.count, source=source)
            job.say(f"{where}: expanded into {found.count} instance(s) over {source}")
            continue
        state = TaskState(found.state)
        task_store.mark(session, [(ti.id, ti.state, state)], now=now)
        job.effects.task_states.add(run.dag_id, ti.task_id, state.value, {"run_id": run.id})
        kind = "task_expanded" if state == TaskState.SKIPPED else "task_failed"
        events.record(session, kind, at=now, actor=job.actor, dag_id=run.dag_id, run_id=run.id,
                      task_id=ti.task_id, ti_id=ti.id, try_number=0, count=0, source=source, state=state.value,
                      reason=found.reason)
        if state == TaskState.FAILED:  # its on_failure_callback, as for a failed try (this one had none: 0)
            job.callbacks.request_task(session, [(Outcome(
                ti.id, 0, state, now, reason=found.reason, decided_at=now), state)], {})
        job.say(f"{where}: {state.value} ({found.reason})")


def _read_held(job: Job, session: Session, run_ids: list[int]) -> list[HeldRun]:
    """The held runs from the database, as the planner sees them."""
    if not run_ids:
        return []
    runs = loop_store.runs_by_id(session, run_ids)
    cancelled = under_cancel(session, list(runs.values()))
    tis = task_store.rows_for_runs(session, list(runs))
    specs = {r.id: dag_store.spec(session, r.dag_id, r.version_hash) for r in runs.values()}
    previous = task_store.previous_states(
        session, [r.previous_run_id for r in runs.values() if r.previous_run_id is not None
                  and any(t.depends_on_past for t in specs[r.id].tasks.values())])
    holding = job.facts.dags_holding(session, {r.dag_id for r in runs.values()
                                                if r.state == RunState.QUEUED.value})
    job.facts.passed_values(session, set(runs))  # with one statement for all of them, before tries are queued
    job.facts.remember_intervals(runs.values())  # the next runs' prev_data_interval_*
    return [HeldRun(run, specs[run.id], tis.get(run.id, {}),  # (each run's own dict, which _picture_task updates)
                    PreviousRun(previous.get(run.previous_run_id, {})) if run.previous_run_id is not None
                    else None, backfill_cancelled=run.id in cancelled, held_queued=run.dag_id in holding)
            for run in runs.values()]


def _deadline_missed(job: Job, session: Session, run: DagRun, spec: DagSpec, now: datetime) -> None:
    """Once per run: the event, and the DAG's on_deadline_missed callbacks."""
    assert spec.deadline is not None
    due = run.data_interval_end + timedelta(seconds=spec.deadline)
    loop_store.set_deadline_missed(session, run, now=now)
    events.record(session, "deadline_missed", at=now, actor=job.actor, dag_id=run.dag_id, run_id=run.id,
                  deadline=due.isoformat(), seconds_after_interval=spec.deadline, state=run.state)
    job.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id}: deadline {due.isoformat()} missed")
    picture = job.memory.pictures.get(run.id)  # the task states then (sla_miss_callback's blocking tasks)
    states = {key: TaskState(ti.state).value for key, ti in picture.tis.items()} if picture is not None else {}
    job.callbacks.request_run(session, run, "deadline_missed", now, deadline=due.isoformat(), state=run.state,
                               task_states=states)


def set_run_state(job: Job, session: Session, run: DagRun, state: RunState, now: datetime,
                   release: bool = False, reason: str | None = None) -> None:
    before = loop_store.set_run_state(session, run, state, now=now, actor=job.actor, release=release,
                                      reason=reason)
    if state == RunState.SUCCESS:
        job.facts.succeeded(run)  # the prior success of the later runs it holds (prev_*_success)
    if state in (RunState.SUCCESS, RunState.FAILED):
        job.callbacks.request_run(session, run, "run_success" if state == RunState.SUCCESS else "run_failure",
                                    now, state=state.value, reason=reason)
    job.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id} ({run.run_type}): {before} → {state.value}")
