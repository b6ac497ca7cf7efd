"""Operator controls, shared by the CLI (and later the web API): cancel a run, mark a run or task instances
success / failed / skipped. Each runs in the caller's transaction, records an event naming who did it, and
refuses (a LedgerError, nothing changed) what would make the record untrue: changing an overridden run,
cancelling a finished one, marking tasks whose tries are still running.

No I/O here beyond the session; the job that runs a try carries out a stop request (scheduler/job.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from ledger.dependencies import TiState, decide
from ledger.errors import InvalidInput, TimelineConflict
from ledger.models import DagRun, TaskInstance
from ledger.states import FINISHED_TASK_STATES, RunState, TaskState
from ledger.store import events
from ledger.store import runs as run_store
from ledger.store.backfills import finish_backfill
from ledger.versions import DagSpec

ACTIVE = (TaskState.QUEUED.value, TaskState.RUNNING.value)
MARKABLE = (TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED)


@dataclass
class Outcome:
    run_state_before: str
    run_state: str
    changed: list[str] = field(default_factory=list)  # task ids whose state was set
    stopping: list[str] = field(default_factory=list)  # task ids whose running try is being stopped


def _not_overridden(run: DagRun) -> None:
    if run.state == RunState.OVERRIDDEN.value:
        raise TimelineConflict(f"run {run.id} is overridden (by run {run.overridden_by}); it is history and "
                               "is not changed")


def _busy(tis: list[TaskInstance], task_ids: set[str] | None = None) -> list[str]:
    return [ti.task_id for ti in tis if ti.state in ACTIVE and (task_ids is None or ti.task_id in task_ids)]


def _finish(run: DagRun, state: RunState, now: datetime) -> None:
    run.state, run.ended_at, run.lock_holder = state.value, now, None


def _backfill_follows(session: Session, run: DagRun, *, now: datetime, actor: str) -> None:
    """A backfill ends when its last run does, whoever ends it: a job finishing it, or an operator here (no job
    would have a run of it left to finish it otherwise)."""
    if run.backfill_id is not None and run.state in (RunState.SUCCESS.value, RunState.FAILED.value):
        session.flush()
        finish_backfill(session, run.backfill_id, now=now, actor=actor)


def stop_tasks(session: Session, run: DagRun, *, now: datetime) -> tuple[list[str], list[str]]:
    """Ask the jobs running the run's tries to stop them (they end `stopped`) and skip the task instances that
    have not started: (task ids being stopped, task ids skipped)."""
    stopping, skipped = [], []
    for ti in run_store.task_instances(session, run.id):
        if ti.state in ACTIVE:
            ti.signal_request = "stop"
            stopping.append(ti.task_id)
        elif ti.state not in {s.value for s in FINISHED_TASK_STATES}:
            ti.state, ti.ended_at, ti.next_try_at = TaskState.SKIPPED.value, now, None
            skipped.append(ti.task_id)
    return stopping, skipped


def cancel_run(session: Session, run: DagRun, *, now: datetime, actor: str, reason: str | None = None) -> Outcome:
    """Stop a queued or running run: its running tries are stopped (by the job that runs them; they end
    `stopped`), the task instances that have not started are skipped, and the run ends `failed`. `reason`:
    the operator's words, kept in the event."""
    _not_overridden(run)
    if run.state not in (RunState.QUEUED.value, RunState.RUNNING.value):
        raise TimelineConflict(f"run {run.id} is {run.state}: only a queued or running run can be cancelled")
    out = Outcome(run.state, RunState.FAILED.value)
    out.stopping, out.changed = stop_tasks(session, run, now=now)
    _finish(run, RunState.FAILED, now)
    events.record(session, "run_cancelled", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": out.run_state_before, "skipped": out.changed, "stopping": out.stopping,
                     "reason": reason})
    _backfill_follows(session, run, now=now, actor=actor)
    return out


def mark_run(session: Session, run: DagRun, state: RunState, *, now: datetime, actor: str,
             reason: str | None = None) -> Outcome:
    """Set a run's outcome by hand: its unfinished task instances take the same state (success or failed)."""
    _not_overridden(run)
    if state not in (RunState.SUCCESS, RunState.FAILED):
        raise InvalidInput(f"a run can be marked success or failed, not {state.value}")
    tis = run_store.task_instances(session, run.id)
    busy = _busy(tis)
    if busy:
        raise TimelineConflict(f"task {busy[0]!r} of run {run.id} has a try running; `ledger runs cancel {run.id}` "
                               "stops it, or wait for it")
    if run.state == state.value:
        raise InvalidInput(f"run {run.id} is already {state.value}")
    out = Outcome(run.state, state.value)
    for ti in tis:
        if ti.state not in {s.value for s in FINISHED_TASK_STATES}:
            ti.state, ti.ended_at, ti.next_try_at = state.value, now, None
            out.changed.append(ti.task_id)
    _finish(run, state, now)
    events.record(session, "run_marked", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": out.run_state_before, "to": state.value, "tasks": out.changed, "reason": reason})
    _backfill_follows(session, run, now=now, actor=actor)
    return out


def mark_tasks(session: Session, run: DagRun, spec: DagSpec, task_ids: list[str], state: TaskState, *,
               downstream: bool, now: datetime, actor: str, reason: str | None = None) -> Outcome:
    """Set task instances' state by hand (with `downstream`, their downstream ones too). The run's state then
    follows the rules: finished (success or failed) when every task instance has finished, else queued again
    for a scheduler to carry on."""
    _not_overridden(run)
    if state not in MARKABLE:
        raise InvalidInput(f"--state must be success, failed or skipped, not {state.value}")
    unknown = [t for t in task_ids if t not in spec.tasks]
    if unknown:
        raise InvalidInput(f"task {unknown[0]!r} is not in version {run.version_hash[:12]} of {run.dag_id}")
    chosen = spec.and_downstream(task_ids) if downstream else set(task_ids)
    tis = run_store.task_instances(session, run.id)
    busy = _busy(tis, chosen)
    if busy:
        raise TimelineConflict(f"task {busy[0]!r} of run {run.id} has a try running; wait for it, or "
                               f"`ledger runs cancel {run.id}`")
    out = Outcome(run.state, run.state)
    for ti in tis:
        if ti.task_id in chosen and ti.state != state.value:
            ti.state, ti.ended_at, ti.next_try_at = state.value, now, None
            out.changed.append(ti.task_id)
    if not out.changed:
        raise InvalidInput(f"nothing to mark: the chosen tasks of run {run.id} are already {state.value}")
    decision = decide(spec, {ti.task_id: TiState(TaskState(ti.state), ti.next_try_at) for ti in tis}, None, now=now)
    if decision.run_state is not None:
        if run.state != decision.run_state.value:
            _finish(run, decision.run_state, now)
    elif run.state in (RunState.SUCCESS.value, RunState.FAILED.value):
        run.state, run.ended_at = RunState.QUEUED.value, None  # tasks can run again: a scheduler carries on
    out.run_state = run.state
    events.record(session, "tasks_marked", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  tasks=sorted(out.changed), state=state.value, run_state_before=out.run_state_before,
                  run_state=run.state, reason=reason)
    _backfill_follows(session, run, now=now, actor=actor)
    return out
