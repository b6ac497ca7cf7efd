"""What the scheduler does with signals: it reads new signals (a cursor in the database, so none is
missed while it was down and two schedulers never act on one twice), finds the tasks that listen to
each key, asks their rules for an action, and writes that action into the task instances of the DAG's
active runs. Every action taken is an event (`signal_action`) naming the signal.

The job that runs a try carries out STOP and RESTART (it alone can kill the try): this module only
marks the task instance (`signal_request`), in the same transaction as the cursor moves, and the owning
job kills the try on its next loop. START needs no executor: the task instance is made ready (armed,
or given a new try) and the owning job queues it like any ready task.

With no active run, START or RESTART creates a manual run at the current time (the way a DAG with
schedule None is driven by signals alone); STOP and NONE need no run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pendulum
from sqlalchemy.orm import Session

from ledger.core.dependencies import TiState, ready_alone
from ledger.core.signal_rules import STARTING, SignalAction, evaluate, key_matches, matching_rules
from ledger.core.signals import Signal
from ledger.core.states import ACTIVE_TASK_STATES, FINISHED_TASK_STATES, RunState, RunType, TaskState
from ledger.core.versions import DagSpec
from ledger.models import DagRun, TaskInstance
from ledger.scheduler.loop.code_cache import CodeCache
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import runs as run_store
from ledger.store import signals as signal_store
from ledger.store import tasks as task_store
from ledger.store.transitions import move_task

LISTENER = "ledger.scheduler"
CURSOR_KEY = "*"  # the scheduler reads every signal in id order; its cursor holds the last id it handled
BATCH = 500
FUNCTION_TIMEOUT = 30.0  # seconds for the DAG-file process that evaluates function rules


@dataclass(frozen=True, slots=True)
class Listening:
    dag_id: str
    task_id: str
    fileloc: str
    rule: Mapping[str, Any]
    root: str | None = None  # the code root of the version's snapshot (None: the live DAG file)


@dataclass
class SignalReport:
    actions: int = 0
    runs: set[int] = field(default_factory=set)  # runs whose task instances changed
    created: list[DagRun] = field(default_factory=list)
    ready: dict[int, tuple[task_store.TiRow, DagRun, DagSpec]] = field(default_factory=dict)  # by ti id
    signals: dict[int, Signal] = field(default_factory=dict)  # the signals that armed `ready`, by id


CodeRef = tuple[str, str | None]  # (the DAG file, its code root)
Index = dict[str, list[tuple[str, str, CodeRef, Mapping[str, Mapping[str, Any]]]]]


def listeners(session: Session, code: CodeCache | None = None) -> Index:
    """Per key pattern of active, unpaused DAGs' current versions: (dag_id, task_id, code, rules). With a
    code cache, function rules run from the version's code snapshot; without, from the live DAG file."""
    out: Index = defaultdict(list)
    for dag_id, version, fileloc in dag_store.schedulable(session):
        spec = dag_store.spec(session, dag_id, version)
        if not any(task.signals for task in spec.tasks.values()):
            continue
        where = code.locate(session, dag_id, version) if code is not None else None
        ref: CodeRef = (where.fileloc, where.root) if where is not None else (fileloc, None)
        for task in spec.tasks.values():
            for pattern in task.signals:
                out[pattern].append((dag_id, task.task_id, ref, task.signals))
    return out


def _who_listens(index: Index, key: str) -> list[Listening]:
    seen: dict[tuple[str, str], Listening] = {}
    for pattern, tasks in index.items():
        if not key_matches(pattern, key):
            continue
        for dag_id, task_id, (fileloc, root), rules in tasks:
            if (dag_id, task_id) in seen:
                continue
            for rule in matching_rules(rules, key):
                seen[(dag_id, task_id)] = Listening(dag_id, task_id, fileloc, rule, root)
                break
    return list(seen.values())


def evaluate_functions(calls: list[tuple[Listening, Signal]]) -> list[tuple[SignalAction, str | None]]:
    """Evaluate function rules by importing their DAG files in a short-lived process (never in the
    scheduler): one process for the batch. (action, error) per call; an error gives NONE."""
    if not calls:
        return []
    payload = [{"fileloc": ls.fileloc, "root": ls.root, "dag_id": ls.dag_id, "task_id": ls.task_id,
                "signal": sig.as_json()} for ls, sig in calls]
    try:
        proc = subprocess.run([sys.executable, "-m", "ledger.scheduler.signals.signal_functions"],
                              input=json.dumps(payload), capture_output=True, text=True, timeout=FUNCTION_TIMEOUT)
        answers = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
        if not isinstance(answers, list) or len(answers) != len(calls):
            tail = (proc.stderr or "").strip().splitlines()
            raise RuntimeError(tail[-1] if tail else f"exit code {proc.returncode}")
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as exc:
        message = f"timed out after {FUNCTION_TIMEOUT:.0f} s" if isinstance(exc, subprocess.TimeoutExpired) \
            else str(exc)
        return [(SignalAction.NONE, f"signal rule failed: {message}")] * len(calls)
    return [(SignalAction(a["action"]), a.get("error")) if a.get("action") in SignalAction.__members__
            else (SignalAction.NONE, a.get("error") or "signal rule returned no action") for a in answers]


def process_signals(session: Session, *, now: datetime, actor: str, index: Index | None = None,
                    holder: int | None = None) -> SignalReport:
    """Handle the signals after the scheduler's cursor (at most BATCH), in this transaction.

    Only signals whose key some task listens to are read (`index`, from `listeners`); the others are
    passed over. With no listener at all nothing is read: the cursor moves to the newest signal."""
    report = SignalReport()
    index = listeners(session) if index is None else index
    after = signal_store.cursor(session, LISTENER, CURSOR_KEY, lock=True)
    if not index:
        newest = signal_store.newest_id(session)
        if newest > after:
            signal_store.advance(session, LISTENER, CURSOR_KEY, newest, now)
        return report
    exact = [p for p in index if not p.endswith("*")]
    prefixes = [p[:-1] for p in index if p.endswith("*")]
    batch = signal_store.after_id(session, after, exact, limit=BATCH, prefixes=prefixes)
    if not batch:
        return report
    decided: list[tuple[Listening, Signal, SignalAction, str | None]] = []
    functions: list[tuple[Listening, Signal]] = []
    for sig in batch:
        for ls in _who_listens(index, sig.key):
            action = evaluate(ls.rule, sig.value)
            if action is None:
                functions.append((ls, sig))
            else:
                decided.append((ls, sig, action, None))
    for (ls, sig), (action, error) in zip(functions, evaluate_functions(functions), strict=True):
        decided.append((ls, sig, action, error))
    decided.sort(key=lambda d: d[1].id)  # in the order the signals were sent
    for ls, sig, action, error in decided:
        if error is not None:
            events.record(session, "signal_rule_failed", at=now, actor=actor, dag_id=ls.dag_id,
                          signal_id=sig.id, key=sig.key, version=sig.version, task_id=ls.task_id, error=error)
        if action != SignalAction.NONE:
            apply_action(session, ls, sig, action, now=now, actor=actor, report=report, holder=holder)
    signal_store.advance(session, LISTENER, CURSOR_KEY, batch[-1].id, now)
    session.flush()  # the task instances' changes, before anything writes them with Core statements
    return report


def apply_action(session: Session, ls: Listening, sig: Signal, action: SignalAction, *, now: datetime,
                 actor: str, report: SignalReport, holder: int | None = None) -> None:
    """Write `action` into the task instances of the DAG's active runs (one statement reads the runs with
    their task instance). A START that leaves a task instance ready alone (ledger.core.dependencies.ready_alone)
    in a running run that job `holder` holds goes into `report.ready`, for that job to queue at once."""
    pairs = task_store.in_unfinished_runs(session, ls.dag_id, ls.task_id)
    base: dict[str, Any] = {"signal_id": sig.id, "key": sig.key, "version": sig.version, "task_id": ls.task_id,
            "action": action.value}
    if not pairs:
        if action not in STARTING:
            events.record(session, "signal_action", at=now, actor=actor, dag_id=ls.dag_id, **base,
                          outcome="no active run")
            return
        run = _new_run(session, ls.dag_id, sig, now=now, actor=actor)
        if run is None:
            events.record(session, "signal_action", at=now, actor=actor, dag_id=ls.dag_id, **base,
                          outcome="no active run, and the current date is held by a finished run")
            return
        report.created.append(run)
        pairs = [(run, task_store.instance(session, run.id, ls.task_id))]
    for run, ti in pairs:
        spec = dag_store.spec(session, run.dag_id, run.version_hash)
        task = spec.tasks.get(ls.task_id)
        if ti is None or task is None:  # the run's version has no such task
            continue
        outcome = _apply_to(ti, action, sig, now, retries=task.retries)
        report.actions += 1
        report.runs.add(run.id)
        events.record(session, "signal_action", at=now, actor=actor, dag_id=ls.dag_id, run_id=run.id, **base,
                      outcome=outcome)
        row = task_store.row_of(ti)
        if holder is not None and run.lock_holder == holder and run.state == RunState.RUNNING.value \
                and ready_alone(spec, ti.task_id, TiState(row.state, row.next_try_at, row.armed)):
            report.ready[ti.id] = (row, run, spec)
            report.signals[sig.id] = sig


def _new_run(session: Session, dag_id: str, sig: Signal, *, now: datetime, actor: str) -> DagRun | None:
    spec = dag_store.current_spec(session, dag_id)
    interval = spec.schedule.interval_for(pendulum.instance(now))
    if run_store.live_at(session, dag_id, interval.logical_date) is not None:
        return None
    conf = {"signal": {"id": sig.id, "key": sig.key, "version": sig.version, "value": sig.value[:200]}}
    return run_store.splice(session, spec, run_store.NewRun(interval, RunType.MANUAL, conf), now=now, actor=actor)


def _apply_to(ti: TaskInstance, action: SignalAction, sig: Signal, now: datetime, *, retries: int) -> str:
    """Write the action into one task instance; returns what happened, for the event."""
    state = TaskState(ti.state)
    if action == SignalAction.STOP:
        if state in ACTIVE_TASK_STATES:
            ti.signal_request, ti.signal_id = "stop", sig.id
            return "stop requested"
        if state in (TaskState.SCHEDULED, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE):
            move_task(ti, TaskState.STOPPED, ended_at=now, signal_armed=False, signal_id=sig.id, next_try_at=None)
            return "stopped before it started"
        return f"already {state.value}"
    if state in ACTIVE_TASK_STATES:
        if action == SignalAction.RESTART:
            ti.signal_request, ti.signal_id = "restart", sig.id
            return "restart requested"
        if ti.signal_request in ("stop", "restart"):
            return f"already {state.value}, with a {ti.signal_request} requested"
        # START while it runs: one more try once this one ends (STARTs meanwhile coalesce into it)
        ti.signal_request, ti.signal_id = "start", sig.id
        return f"new try after the {state.value} one"
    ti.signal_armed, ti.signal_id = True, sig.id
    if state in FINISHED_TASK_STATES:
        task_store.rearm(ti, retries, arm=True)
        return "new try"
    return "armed"


def settle(session: Session, finished: list[int]) -> set[int]:
    """After tries ended (these task instances): clear their signal requests; a RESTART, or a START that
    came while the try ran, gives the task instance a new try. Cheap when no request is pending.
    Returns the runs whose task instances it changed."""
    changed: set[int] = set()
    if not finished:
        return changed
    for ti, run in task_store.with_pending_requests(session, finished):
        request, ti.signal_request = ti.signal_request, None
        changed.add(run.id)
        task = dag_store.spec(session, run.dag_id, run.version_hash).tasks.get(ti.task_id)
        if task is None or TaskState(ti.state) not in FINISHED_TASK_STATES:
            continue
        if request == "start" or (request == "restart" and ti.state == TaskState.STOPPED.value):
            task_store.rearm(ti, task.retries, arm=True)
    return changed
