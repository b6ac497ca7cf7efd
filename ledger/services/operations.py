"""Operator controls, shared by the CLI and the web view (pages and write API): trigger a run, cancel a run, mark a
run or task instances success / failed / skipped, clear task instances, pause and unpause a DAG, plan, submit,
cancel and resume a backfill, set and delete pools, variables and connections. Each runs in
the caller's transaction, records an event naming who did it (a trigger's is the splice's), and refuses (a
LedgerError, nothing changed) what would make the record untrue: changing an overridden run, cancelling a
finished one, marking tasks whose tries are still running.

No I/O here beyond the session; the job that runs a try carries out a stop request (scheduler/loop/job.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pendulum
from pendulum import DateTime
from sqlalchemy.orm import Session

from ledger.core import strict_json
from ledger.core.backfill_plan import Action, PlanItem, Reprocess
from ledger.core.backfill_state import CANCELLABLE, resumable
from ledger.core.dataset_rules import leaf_keys, manual_partition
from ledger.core.dates import check_within_dag, iso, parse_user_date
from ledger.core.dependencies import TiState, decide
from ledger.core.errors import InvalidInput, NotFound, TimelineConflict
from ledger.core.flow import teardowns_left_to_run, with_setups_and_teardowns
from ledger.core.mapping import NOT_MAPPED, label, source_tasks, split_label
from ledger.core.schedule import NoSchedule
from ledger.core.states import ACTIVE_TASK_STATES as ACTIVE
from ledger.core.states import FINISHED_TASK_STATES, UNFINISHED_RUN_STATES, BackfillState, RunState, RunType, TaskState
from ledger.core.versions import DagSpec, reachable
from ledger.infra.fernet import encrypt
from ledger.models import Connection, DagRun, TaskInstance
from ledger.sdk.connections import ConnectionInfo
from ledger.sdk.params import check_conf, from_description
from ledger.services.backfill_create import BackfillRequest, Created, create_confirmed, make_plan
from ledger.store import backfills as backfill_store
from ledger.store import dags as dag_store
from ledger.store import datasets as dataset_store
from ledger.store import events, run_reads
from ledger.store import jobs as job_store
from ledger.store import pools as pool_store
from ledger.store import runs as run_store
from ledger.store import secrets as secret_store
from ledger.store import tasks as task_store
from ledger.store.backfills import finish_backfill
from ledger.store.loop import set_run_state
from ledger.store.transitions import move_backfill, move_run, move_task

MARKABLE = (TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED)


@dataclass
class Outcome:
    run_state_before: str
    run_state: str
    changed: list[str] = field(default_factory=list)  # task ids whose state was set
    stopping: list[str] = field(default_factory=list)  # task ids whose running try is being stopped
    teardowns: list[str] = field(default_factory=list)  # teardown task ids a marked run leaves to run


def _not_overridden(run: DagRun) -> None:
    if run.state == RunState.OVERRIDDEN.value:
        raise TimelineConflict(f"run {run.id} is overridden (by run {run.overridden_by}); it is history and "
                               "is not changed")


def _busy(tis: list[TaskInstance], task_ids: set[str] | None = None) -> list[str]:
    return [label(ti.task_id, ti.map_index) for ti in tis
            if ti.state in ACTIVE and (task_ids is None or ti.task_id in task_ids)]


def _finish(run: DagRun, state: RunState, now: datetime) -> None:
    move_run(run, state, ended_at=now, lock_holder=None)


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
            stopping.append(label(ti.task_id, ti.map_index))
        elif ti.state not in FINISHED_TASK_STATES:
            move_task(ti, TaskState.SKIPPED, ended_at=now, next_try_at=None)
            skipped.append(label(ti.task_id, ti.map_index))
    return stopping, skipped


def cancelled_state(session: Session, run: DagRun, stopped: list[str], skipped: list[str], *,
                    now: datetime) -> RunState:
    """How a cancelled run ends: failed when the cancel stopped or skipped any of its tasks; else (every task had
    finished already) as its own rules say, so that a run whose tasks all succeeded keeps `success`."""
    if stopped or skipped:
        return RunState.FAILED
    tis = run_store.task_instances(session, run.id)
    decision = decide(dag_store.spec(session, run.dag_id, run.version_hash),
                      {label(ti.task_id, ti.map_index): TiState(TaskState(ti.state), ti.next_try_at) for ti in tis},
                      None, now=now)
    return decision.run_state or RunState.FAILED


def cancel_run(session: Session, run: DagRun, *, now: datetime, actor: str, reason: str | None = None) -> Outcome:
    """Stop a queued or running run: its running tries are stopped (by the job that runs them; they end
    `stopped`), the task instances that have not started are skipped, and the run ends `failed` (or as its rules
    say when every task had finished already: cancelled_state). `reason`: the operator's words, kept in the
    event."""
    _not_overridden(run)
    if run.state not in UNFINISHED_RUN_STATES:
        raise TimelineConflict(f"run {run.id} is {run.state}: only a queued or running run can be cancelled")
    before = run.state
    stopping, skipped = stop_tasks(session, run, now=now)
    out = Outcome(before, cancelled_state(session, run, stopping, skipped, now=now).value, skipped, stopping)
    _finish(run, RunState(out.run_state), now)
    events.record(session, "run_cancelled", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": out.run_state_before, "skipped": out.changed, "stopping": out.stopping,
                     "reason": reason})
    _backfill_follows(session, run, now=now, actor=actor)
    return out


def mark_run(session: Session, run: DagRun, state: RunState, *, now: datetime, actor: str,
             reason: str | None = None) -> Outcome:
    """Set a run's outcome by hand: its unfinished task instances take the same state (success or failed), but
    for teardown tasks, which are left to run as in Airflow when the marked work tasks give the run the marked
    state (`teardowns_left_to_run`): then the run stays unfinished (queued again if it had ended) and ends by its
    rules once they have run (decision 177)."""
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
    left = teardowns_left_to_run(dag_store.spec(session, run.dag_id, run.version_hash),
                                 {label(ti.task_id, ti.map_index): TaskState(ti.state) for ti in tis},
                                 TaskState(state.value))
    for ti in tis:
        if ti.state not in FINISHED_TASK_STATES and ti.task_id not in left:
            move_task(ti, TaskState(state.value), ended_at=now, next_try_at=None)
            out.changed.append(label(ti.task_id, ti.map_index))
    if not left:
        _finish(run, state, now)
    elif run.state not in UNFINISHED_RUN_STATES:
        move_run(run, RunState.QUEUED, ended_at=None)  # a scheduler runs the teardowns
    out.run_state = run.state
    out.teardowns = sorted(left)
    events.record(session, "run_marked", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  **{"from": out.run_state_before, "to": state.value, "tasks": out.changed, "reason": reason},
                  **({"teardowns_to_run": out.teardowns} if left else {}))
    _backfill_follows(session, run, now=now, actor=actor)
    return out


def mark_targets(spec: DagSpec, tis: list[TaskInstance], picked: list[str], state: TaskState, *,
                 downstream: bool, upstream: bool = False) -> tuple[set[str], list[TaskInstance]]:
    """What marking `picked` `state` covers: (the task ids chosen, the task instances it sets). `picked`: task
    ids, or labels `task[i]` for one mapped instance; with `downstream` / `upstream`, every instance of the tasks
    downstream / upstream of them too (as Airflow's "Mark success" options). Left out: instances already in
    `state`, and mapped instances past the end of their list (`removed`). Pure: nothing is changed."""
    if state not in MARKABLE:
        raise InvalidInput(f"--state must be success, failed or skipped, not {state.value}")
    whole, single = set(), set()
    for p in picked:
        task_id, index = split_label(p)
        if task_id not in spec.tasks:
            raise InvalidInput(f"task {task_id!r} is not in version {spec.version_hash[:12]} of {spec.dag_id}")
        if index == NOT_MAPPED:
            whole.add(task_id)
        else:
            single.add((task_id, index))
    named = whole | {t for t, _ in single}
    around = set()
    if downstream:
        around |= spec.and_downstream(named)
    if upstream:
        around |= reachable({tid: t.upstream for tid, t in spec.tasks.items()}, named)
    whole |= around
    chosen = whole | named
    if single and not any(ti.task_id == t and ti.map_index == i for t, i in single for ti in tis):
        raise InvalidInput(f"no task instance {label(*sorted(single)[0])} in this run")
    targets = [ti for ti in tis
               if (ti.task_id in whole or (ti.task_id, ti.map_index) in single) and ti.state != state.value
               and not (ti.map_index >= 0 and ti.state == TaskState.REMOVED)]
    return chosen, targets


def mark_plan(session: Session, run: DagRun, spec: DagSpec, task_ids: list[str], state: TaskState, *,
              downstream: bool, upstream: bool = False) -> tuple[list[TaskInstance], list[TaskInstance]]:
    """What mark_tasks would set, refused as it refuses (an overridden run, a chosen task with a try running,
    nothing to mark): (the run's task instances, those it sets). Changes nothing: the web view's confirm page
    and the API's dry run show it."""
    _not_overridden(run)
    tis = run_store.task_instances(session, run.id)
    chosen, targets = mark_targets(spec, tis, task_ids, state, downstream=downstream, upstream=upstream)
    busy = _busy(tis, chosen)
    if busy:
        raise TimelineConflict(f"task {busy[0]!r} of run {run.id} has a try running; wait for it, or "
                               f"`ledger runs cancel {run.id}`")
    if not targets:
        raise InvalidInput(f"nothing to mark: the chosen tasks of run {run.id} are already {state.value}")
    return tis, targets


def mark_tasks(session: Session, run: DagRun, spec: DagSpec, task_ids: list[str], state: TaskState, *,
               downstream: bool, now: datetime, actor: str, reason: str | None = None,
               upstream: bool = False) -> Outcome:
    """Set task instances' state by hand (`task_ids`: task ids or `task[i]` labels; with `downstream` /
    `upstream`, the tasks downstream / upstream of them too: mark_targets). The run's state then follows the
    rules: finished (success or failed) when every task instance has finished, else queued again for a scheduler
    to carry on."""
    tis, targets = mark_plan(session, run, spec, task_ids, state, downstream=downstream, upstream=upstream)
    out = Outcome(run.state, run.state)
    for ti in targets:
        move_task(ti, state, ended_at=now, next_try_at=None)
        out.changed.append(label(ti.task_id, ti.map_index))
    decision = decide(spec, {label(ti.task_id, ti.map_index): TiState(TaskState(ti.state), ti.next_try_at)
                             for ti in tis}, None, now=now)
    # the run ends here only when every task instance has: what trigger rules decide for the others (a task
    # downstream of one marked skipped is skipped too) is the job's to write, with the run's end
    if decision.run_state is not None and not decision.mark:
        if run.state != decision.run_state.value:
            _finish(run, decision.run_state, now)
    elif run.state in (RunState.SUCCESS.value, RunState.FAILED.value):
        move_run(run, RunState.QUEUED, ended_at=None)  # tasks can run again: a scheduler carries on
    out.run_state = run.state
    events.record(session, "tasks_marked", at=now, actor=actor, dag_id=run.dag_id, run_id=run.id,
                  tasks=sorted(out.changed), state=state.value, run_state_before=out.run_state_before,
                  run_state=run.state, reason=reason)
    _backfill_follows(session, run, now=now, actor=actor)
    return out


def _check_conf(spec: DagSpec, conf: dict[str, Any] | None) -> None:
    """A run's conf as every run of the DAG gets it checked (a trigger's, a backfill's): JSON, and what the DAG's
    params accept; InvalidInput, in one line, otherwise."""
    if conf is not None:
        strict_json.check(conf, "conf")
    try:
        check_conf(from_description(spec.params), conf, dag_id=spec.dag_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def trigger(session: Session, spec: DagSpec, at: DateTime, conf: dict[str, Any] | None, *, replace: bool,
            now: datetime, actor: str) -> tuple[DagRun, DagRun | None]:
    """Create a manual run (queued) of the interval containing `at` and splice it into the timeline; with
    `replace`, it overrides the live run at that date. Returns (the new run, the run it overrode or None). A DAG
    scheduled on partitioned datasets alone gets the run of the partition holding `at` (its logical date and
    interval), which consumes that partition's newest events, as the scheduler's run of it does."""
    _check_conf(spec, conf)
    cond = spec.datasets["condition"] if spec.datasets is not None and isinstance(spec.schedule, NoSchedule) else None
    part = manual_partition(cond, at) if cond is not None else None
    interval = part[1] if part is not None else spec.schedule.interval_for(at)
    existing = run_store.live_at(session, spec.dag_id, interval.logical_date)
    run = run_store.splice(session, spec, run_store.NewRun(interval, RunType.MANUAL, conf), now=now, actor=actor,
                           replace=replace)
    if cond is not None and part is not None:  # it reads the partition as the scheduler's run of it: newest events
        inputs = [k.split(":", 1)[1] for k in leaf_keys(cond) if k.startswith("dataset:")]
        dataset_store.record_consumed(session, [
            {"run_id": run.id, "dag_id": spec.dag_id, "event_id": e.id, "cause": False}
            for e in dataset_store.newest_of_partition(session, inputs, part[0])])
    return run, existing


def trigger_dag(session: Session, dag_id: str, logical_date: str | None, conf: dict[str, Any] | None, *,
                replace: bool, now: DateTime, actor: str) -> tuple[DagRun, DagRun | None]:
    """`ledger trigger DAG [--logical-date D] [--conf C] [--replace]`: the date read in the DAG's timezone (now
    when None) and checked to be within the DAG's dates, then trigger()."""
    spec = dag_store.current_spec(session, dag_id)
    at = parse_user_date(logical_date, timezone=spec.timezone, what="--logical-date") \
        if logical_date is not None else now
    check_within_dag(spec, at, what="--logical-date")
    return trigger(session, spec, at, conf, replace=replace, now=now, actor=actor)


@dataclass
class Cleared:
    cleared: list[str]  # task ids given fresh tries
    moved: tuple[str, str, list[str], list[str]] | None  # (from version, to version, tasks added, tasks removed)
    # other DAGs' runs cleared through ExternalTaskMarkers: (dag id, run id, task ids)
    external: list[tuple[str, int, list[str]]] = field(default_factory=list)
    version: str = ""  # the DAG version the cleared task instances' tries run


def _refuse_dropped_code(session: Session, run: DagRun) -> None:
    """A version whose code a forced downgrade dropped is not re-run under its name: its tries would run the DAG
    file as it is today and claim that version's code. --on-latest-version parses the file first and re-runs the
    run on what it holds today (the same version when the file has not changed since)."""
    dropped = run_reads.code_dropped_by(session, dag_store.version(session, run.dag_id, run.version_hash))
    if dropped is not None:
        raise InvalidInput(f"the code of version {run.version_hash[:12]}, the version run {run.id} runs, was dropped "
                           f"by a forced database downgrade ({dropped.actor}, {iso(dropped.at)}): its tries would "
                           "run today's DAG file under that version's name; --on-latest-version re-runs the run on "
                           "the version the DAG file is today")


def _latest_spec(session: Session, run: DagRun) -> DagSpec:
    """The DAG's current version, refused while its DAG file fails to import (it would be the last one that
    imported, not what the file holds)."""
    dag = dag_store.get(session, run.dag_id)
    broken = dag_store.import_error_of(session, dag.fileloc)
    if broken is not None:
        first = next((line for line in broken.splitlines() if line.strip()), "")
        raise InvalidInput(f"{run.dag_id}'s DAG file {dag.fileloc} fails to import ({first.strip()[:160]}), "
                           "so the latest version is unknown; fix it (ledger dags errors), or clear "
                           f"without --on-latest-version to re-run version {run.version_hash[:12]}")
    assert dag.current_version is not None
    return dag_store.spec(session, run.dag_id, dag.current_version)


# the states a clear gives fresh tries: finished, or waiting for a retry or a reschedule
CLEARABLE = frozenset({*FINISHED_TASK_STATES, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE})


@dataclass
class ClearPlan:
    """What a clear re-runs, worked out without writing: the structure it follows, the tasks chosen (with their
    downstream, setups and teardowns), whether it covers the whole run, and the version the tries run."""

    own: DagSpec  # the run's version
    latest: DagSpec  # the version the cleared tries run (the run's own unless on the latest version)
    spec: DagSpec  # the structure the cleared tasks follow: the run's, unless the whole run moves to the latest
    chosen: set[str]
    whole: bool

    def would_clear(self, tis: list[TaskInstance]) -> list[TaskInstance]:
        """The task instances the clear gives fresh tries (finished or waiting for a retry or reschedule)."""
        return [ti for ti in tis if ti.task_id in self.chosen and ti.state in CLEARABLE
                and not (ti.map_index >= 0 and ti.state == TaskState.REMOVED)]


def clear_plan(session: Session, run: DagRun, task_ids: list[str] | None, *, downstream: bool,
               on_latest_version: bool) -> ClearPlan:
    """What `clear_tasks` would re-run (reads only; InvalidInput for a task it cannot clear)."""
    dag_id = run.dag_id
    if run.state == RunState.OVERRIDDEN:
        raise TimelineConflict(f"run {run.id} is overridden (by run {run.overridden_by}); it is history and is "
                               "not re-run; backfill the date or clear the run that replaced it")
    own = dag_store.spec(session, dag_id, run.version_hash)
    if on_latest_version:
        latest = _latest_spec(session, run)
        where = f"the current version {latest.version_hash[:12]} of {dag_id}"
    else:
        _refuse_dropped_code(session, run)
        latest = own
        where = f"version {run.version_hash[:12]}, the version run {run.id} runs"
    chosen = set(task_ids or latest.tasks)
    unknown = chosen - set(latest.tasks)
    if unknown:
        hint = "" if on_latest_version else "; --on-latest-version moves the run to the current version"
        raise InvalidInput(f"task {sorted(unknown)[0]!r} is not in {where}{hint}")
    unknown = chosen - set(own.tasks)
    if unknown and task_ids is not None:  # new in the latest version: only a clear of the whole run moves to it
        raise InvalidInput(f"task {sorted(unknown)[0]!r} is not in version {run.version_hash[:12]}, the version run "
                           f"{run.id} runs; clear the whole run with --on-latest-version to move it to {where}")
    whole = task_ids is None or with_setups_and_teardowns(
        own, own.and_downstream(chosen) if downstream else chosen) >= set(own.tasks)
    spec = latest if whole else own  # the structure the cleared tasks follow: the run's, unless the run moves
    if downstream:
        chosen = spec.and_downstream(chosen)
    chosen = with_setups_and_teardowns(spec, chosen)  # a task's setups and their teardowns run again with it
    if not whole:  # (the run's downstream and setups of the chosen tasks must be in the latest version too)
        missing = sorted(chosen - set(latest.tasks))
        if missing:
            raise InvalidInput(f"task {missing[0]!r}, which clearing the chosen tasks re-runs, is not in {where}; "
                               "clear the whole run with --on-latest-version to move it there")
    return ClearPlan(own, latest, spec, chosen, whole)


def clear_tasks(session: Session, run: DagRun, task_ids: list[str] | None, *, downstream: bool,
                on_latest_version: bool, now: datetime, actor: str, depth: int | None = None) -> Cleared:
    """Re-run chosen finished task instances of a run (every task when `task_ids` is None; with `downstream`,
    their downstream ones too): each gets fresh tries and the run is queued again. The tries run the code of the
    run's own version unless `on_latest_version`: a clear of the whole run then first moves the run to the DAG's
    current version (recorded as an event); a partial clear leaves the run on its version and gives only the
    cleared task instances the current one (decision 0271: the run's recorded version never changes for a part of
    it; each try records the version it ran)."""
    dag_id = run.dag_id
    plan = clear_plan(session, run, task_ids, downstream=downstream, on_latest_version=on_latest_version)
    latest, spec, chosen, whole = plan.latest, plan.spec, plan.chosen, plan.whole
    version = latest.version_hash
    tis = run_store.task_instances(session, run.id)
    busy_all = [ti for ti in tis if ti.state in ACTIVE]
    moving = on_latest_version and whole
    busy = [label(ti.task_id, ti.map_index) for ti in busy_all if ti.task_id in chosen or moving]
    if busy:
        raise TimelineConflict(f"task {busy[0]!r} of run {run.id} is {TaskState.RUNNING.value} or queued; "
                               "wait for it to finish")
    out = Cleared([], None, version=version)
    if moving and spec.version_hash != run.version_hash:
        before = run.version_hash
        added, removed = run_store.move_to_version(session, run, spec, now=now, actor=actor,
                                                   reason="ledger tasks clear --on-latest-version")
        out.moved = (before, spec.version_hash, added, removed)
        tis = run_store.task_instances(session, run.id)
    own_version = None if version == run.version_hash else version  # what the cleared task instances record
    again = _expanded_again(spec, chosen)
    for ti in tis:
        if ti.task_id not in chosen:
            continue
        if ti.task_id in again and ti.map_index > 0:  # its list is made again: expanded again (see below)
            if ti.state != TaskState.REMOVED:
                move_task(ti, TaskState.REMOVED, next_try_at=None)
            continue
        if ti.map_index >= 0 and ti.state == TaskState.REMOVED:  # past the end of its task's list: stays out
            continue
        if ti.state in CLEARABLE:
            task = latest.tasks[ti.task_id]
            task_store.rearm(ti, task.retries, arm=False)
            ti.dag_version = own_version
            ti.pool, ti.pool_slots = task.pool, task.pool_slots  # (the version its next try runs says them)
            if ti.task_id in again:
                ti.map_index = NOT_MAPPED
            out.cleared.append(label(ti.task_id, ti.map_index))
    if not out.cleared and out.moved is None:
        raise InvalidInput(f"nothing to clear in run {run.id}: the chosen tasks have not finished")
    before_state = run.state
    if run.state in (RunState.SUCCESS, RunState.FAILED):
        move_run(run, RunState.QUEUED, ended_at=None)
    events.record(session, "tasks_cleared", at=now, actor=actor, dag_id=dag_id, run_id=run.id,
                  tasks=sorted(out.cleared), run_state_before=before_state, run_state=run.state,
                  version=version, **({"run_version": run.version_hash} if own_version else {}),
                  **({"expanded_again": sorted(again)} if again else {}))
    for tid in sorted(chosen):
        marker = spec.tasks[tid].marker
        if marker is not None and tid in out.cleared:
            out.external += _clear_marked(session, run, marker, now=now, actor=actor,
                                          depth=int(marker.get("recursion_depth") or 10) if depth is None else depth)
    return out


def _clear_marked(session: Session, run: DagRun, marker: Mapping[str, Any], *, now: datetime, actor: str,
                  depth: int) -> list[tuple[str, int, list[str]]]:
    """An ExternalTaskMarker was cleared: clear its external task and that task's downstream tasks in the external
    DAG's live run at the marker's date (this run's, by default), following markers there up to `depth` deep."""
    if depth <= 0:
        return []
    at = pendulum.parse(marker["execution_date"]) if marker.get("execution_date") else run.logical_date
    other = run_store.live_at(session, str(marker["external_dag_id"]), at)  # type: ignore[arg-type]
    if other is None:
        return []
    try:
        done = clear_tasks(session, other, [str(marker["external_task_id"])], downstream=True,
                           on_latest_version=False, now=now, actor=actor, depth=depth - 1)
    except InvalidInput:  # the external task is not in that run's version, or has not finished: nothing to do
        return []
    return [(other.dag_id, other.id, sorted(done.cleared)), *done.external]


def _expanded_again(spec: DagSpec, chosen: set[str]) -> set[str]:
    """The chosen tasks mapped over the value of another chosen task: that value is made again, so they wait to be
    expanded again over it (instance 0 becomes the waiting row, map_index -1; the others are `removed`, kept
    with their tries, until the new list says how many come back)."""
    return {tid for tid in chosen if any(source_tasks(src) & chosen for _arg, src in spec.tasks[tid].expand)}


def cancel_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str, stale_after: float,
                    held_by: int | None = None) -> list[int]:
    """Mark the backfill cancelled and end its unfinished runs that no live job (other than `held_by`) is
    executing: their task instances that have not started are skipped (reason "run cancelled"), tries left by a
    job that died are lost, and the run fails (or keeps `success` when every task had succeeded:
    cancelled_state). Finished runs stay as they are. A date whose run so ended without success gets back the run
    it displaced (ledger.core.backfill_cancel, decision 0210). Returns the ids of the runs ended."""
    row = backfill_store.get(session, backfill_id)
    if row.state in CANCELLABLE:
        move_backfill(row, BackfillState.CANCELLED, ended_at=now)
        events.record(session, "backfill_cancelled", at=now, actor=actor, dag_id=row.dag_id,
                      backfill_id=backfill_id)
    failed = []
    for run in backfill_store.unfinished_runs(session, backfill_id):
        if run.lock_holder is not None and run.lock_holder != held_by and job_store.job_alive(
                session, run.lock_holder, now=now, stale_after=stale_after):
            continue  # its job sees the cancellation and fails it itself
        lost = task_store.end_lost_tries(session, run.id, now=now)
        stopping, skipped = stop_tasks(session, run, now=now)
        state = cancelled_state(session, run, lost + stopping, skipped, now=now)
        what = [f"skipped {', '.join(skipped)} (run cancelled)"] if skipped else []
        what += [f"lost {', '.join(lost)} (their job is gone)"] if lost else []
        set_run_state(session, run, state, now=now, actor=actor, release=True,
                      reason="; ".join([f"backfill {backfill_id} cancelled", *what]))
        failed.append(run.id)
    backfill_store.restore_after_cancel(session, row, now=now, actor=actor)  # decision 0210
    return failed


def set_pool(session: Session, name: str, slots: int, description: str, *, now: datetime, actor: str) -> None:
    """Create a pool or change its slots."""
    pool_store.set_pool(session, name, slots, description)
    events.record(session, "pool_set", at=now, actor=actor, pool=name, slots=slots)


def delete_pool(session: Session, name: str, *, now: datetime, actor: str) -> None:
    if not pool_store.delete_pool(session, name):
        raise NotFound(f"no pool named {name!r}; see `ledger pools list`")
    events.record(session, "pool_deleted", at=now, actor=actor, pool=name)


def set_paused(session: Session, dag_id: str, paused: bool, *, now: datetime, actor: str,
               stop_queued: bool = False) -> bool:
    """Pause a DAG (no new runs; with `stop_queued`, its queued runs do not start either) or unpause it. Returns
    whether anything changed (an event is recorded only then)."""
    dag = dag_store.get(session, dag_id)
    if dag.is_paused == paused and dag.hold_queued == stop_queued:
        return False
    dag.is_paused, dag.hold_queued = paused, stop_queued
    events.record(session, "dag_paused" if paused else "dag_unpaused", at=now, actor=actor, dag_id=dag_id,
                  **({"stop_queued": True} if stop_queued else {}))
    return True


def stop_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str,
                  stale_after: float) -> tuple[list[int], int]:
    """`ledger backfill cancel`: refused unless the backfill is running or interrupted; then cancel_backfill.
    Returns (the runs ended, how many runs in flight their jobs are stopping)."""
    row = backfill_store.get(session, backfill_id)
    if row.state not in CANCELLABLE:
        raise InvalidInput(f"backfill {backfill_id} is already {row.state}")
    failed = cancel_backfill(session, backfill_id, now=now, actor=actor, stale_after=stale_after)
    return failed, backfill_store.history_of(session, backfill_id).unfinished


def resume_backfill(session: Session, backfill_id: int, *, now: datetime, actor: str, job_id: int | None) -> str:
    """Take an interrupted (or running) backfill up again: `job_id`, the backfill job that will run its runs
    (`ledger backfill resume`), or None to leave them to the scheduler (the web view), which then requires the
    backfill to be interrupted. Returns its DAG id."""
    row = backfill_store.get(session, backfill_id)
    if not resumable(row.state, by_job=job_id is not None):
        raise InvalidInput(f"backfill {backfill_id} is {row.state}: there is nothing to resume")
    move_backfill(row, BackfillState.RUNNING)
    events.record(session, "backfill_resumed", at=now, actor=actor, dag_id=row.dag_id, backfill_id=backfill_id,
                  job_id=job_id)
    return row.dag_id


def backfill_request(spec: DagSpec, start: str, end: str, *, reprocess: str = "none", backwards: bool = False,
                     conf: dict[str, Any] | None = None, max_active_runs: int | None = None, submit: bool = False,
                     requested_by: str, downstream: bool = False) -> BackfillRequest:
    """A backfill request from what a user typed: dates read in the DAG's timezone (the end as the end of its
    day), the policy checked, the conf checked against the DAG's params; bad input is InvalidInput."""
    if reprocess not in {r.value for r in Reprocess}:
        raise InvalidInput(f"--reprocess must be none, failed or completed, not {reprocess!r}")
    first = parse_user_date(start, timezone=spec.timezone, what="--start")
    last = parse_user_date(end, timezone=spec.timezone, what="--end", end_of_day=True)
    if last < first:
        raise InvalidInput(f"the range is backwards: --end {end} is before --start {start}")
    if max_active_runs is not None and max_active_runs < 1:
        raise InvalidInput(f"--max-active-runs must be 1 or more, not {max_active_runs}")
    _check_conf(spec, conf)
    return BackfillRequest(dag_id=spec.dag_id, start=first, end=last, reprocess=Reprocess(reprocess),
                           backwards=backwards, conf=conf, max_active_runs=max_active_runs, submit=submit,
                           requested_by=requested_by, downstream=downstream)


def plan_backfill(session: Session, request: BackfillRequest, *, now: datetime,
                  stale_after: float) -> tuple[DagSpec, list[PlanItem]]:
    """The plan of `ledger backfill --dry-run`: what each date of the range would get. Changes nothing."""
    spec = dag_store.current_spec(session, request.dag_id)
    return spec, make_plan(session, spec, request, now=now, stale_after=stale_after)


def submit_backfill(session: Session, request: BackfillRequest, shown: list[PlanItem], *, now: datetime,
                    actor: str, stale_after: float) -> Created:
    """Create the backfill the user confirmed (`shown`: the plan they saw) and leave its runs to the scheduler,
    as `ledger backfill --submit` does."""
    if not request.submit:
        raise InvalidInput("a backfill created here is submitted to the scheduler")
    spec = dag_store.current_spec(session, request.dag_id)
    if not any(i.action != Action.SKIP or i.adopts_backfill is not None for i in shown):
        raise InvalidInput("nothing to do: every date is skipped")
    return create_confirmed(session, spec, request, shown, now=now, actor=actor, job_id=None,
                            stale_after=stale_after)


# --- variables and connections (admins): `ledger variables ...`, `ledger connections ...` and the admin pages ---

def secret_name(value: str, what: str) -> str:
    """A variable's or connection's name, checked: InvalidInput unless letters, digits, '_', '-', '.'."""
    if not value or not all(c.isalnum() or c in "_-." for c in value) or len(value) > 250:
        raise InvalidInput(f"{what} {value!r}: use letters, digits, '_', '-' and '.' (at most 250)")
    return value


def set_variable(session: Session, key: str, value: str, description: str, *, now: datetime, actor: str) -> bool:
    """Create or change a variable, its value stored encrypted. True when it was new."""
    new = secret_store.set_variable(session, secret_name(key, "variable"), encrypt(value), description, now)
    events.record(session, "variable_set", at=now, actor=actor, key=key, new=new)
    return new


def set_connection(session: Session, conn_id: str, uri: str, description: str, *, now: datetime,
                   actor: str) -> bool:
    """Create or change a connection from a URI, its password and extra stored encrypted. True when it was new."""
    info = ConnectionInfo.from_uri(secret_name(conn_id, "connection"), uri)
    values = {"conn_id": conn_id, "conn_type": info.conn_type, "host": info.host, "port": info.port,
              "login": info.login, "schema": info.schema,
              "password_encrypted": encrypt(info.password) if info.password else None,
              "extra_encrypted": encrypt(info.extra) if info.extra else None, "description": description}
    new = secret_store.set_connection(session, values, now)
    events.record(session, "connection_set", at=now, actor=actor, conn_id=conn_id, new=new)
    return new


def delete_secret(session: Session, kind: str, name: str, *, now: datetime, actor: str) -> None:
    """Delete a variable or a connection (`kind`), with an event naming who did it."""
    row = secret_store.variable(session, name) if kind == "variable" else secret_store.connection(session, name)
    if row is None:
        raise NotFound(f"no {kind} named {name!r}; see `ledger {kind}s list`")
    secret_store.delete(session, row)
    events.record(session, f"{kind}_deleted", at=now, actor=actor, name=name)


def connection_json(c: Connection) -> dict[str, Any]:
    """A connection as it is shown: its password and extra as *** (never in clear)."""
    return {"conn_id": c.conn_id, "conn_type": c.conn_type, "host": c.host, "port": c.port, "login": c.login,
            "schema": c.schema, "password": "***" if c.password_encrypted else None,
            "extra": "***" if c.extra_encrypted else None, "description": c.description,
            "updated_at": iso(c.updated_at)}
