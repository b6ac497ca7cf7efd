"""The job's side of callbacks (on_failure_callback, notifiers...): requesting calls as outcomes and run ends are
recorded, claiming pending calls on a cadence of their own, and recording how the calls that ran ended.

A call is requested in the transaction that records what it is about (ledger/store/callbacks.py); the job claims
pending calls at once when it requested some itself, as soon as a slot frees while every slot is taken (a
backlog), and every poll_interval for calls other processes requested. The calls run in processes of their own
(scheduler/callbacks/processes.py), started once the transaction that claimed them has committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.orm import Session

from ledger.core.mapping import NOT_MAPPED
from ledger.core.outcomes import Outcome
from ledger.core.states import TaskState
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun
from ledger.scheduler.callbacks.processes import CallbackProcesses
from ledger.scheduler.loop.cadence import Cadence
from ledger.scheduler.loop.memory import MemoryMismatch
from ledger.scheduler.loop.metrics import SchedulerMetrics
from ledger.store import callbacks as callback_store
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store

# outcome state of a try -> the task callback it calls
TASK_CALLBACKS = {TaskState.SUCCESS: "task_success", TaskState.FAILED: "task_failure",
                  TaskState.UP_FOR_RETRY: "task_retry"}


class TryInfo(Protocol):
    """What the job knows of a try it runs (scheduler/loop/job.py's _InFlight)."""

    run_id: int
    dag_id: str
    task_id: str
    dag_version: str
    log_path: str


# (session, dag id, version) -> (fileloc, code root or None): where a version's code is on this host
Locate = Callable[[Session, str, str], tuple[str, str | None]]


@dataclass
class CallbackRequests:
    settings: SchedulerSettings
    logs_folder: Path
    metrics: SchedulerMetrics
    say: Callable[[str], None]  # (resolved at each call: the job's say, which a transaction defers)
    results: list[tuple[int, str, str | None]] = field(default_factory=list)  # ended, not yet recorded
    _processes: CallbackProcesses | None = None
    backlog: bool = False  # the last claim had no room for every pending call
    claimed_at: int | None = None  # SQLite: the job's quiet mark at its last claim (OthersWrites.quiet_mark)
    # pending calls are claimed every poll_interval (others' requests), or at once when this job requested some
    _claims: Cadence = field(init=False)

    def __post_init__(self) -> None:
        self._claims = Cadence(self.settings.poll_interval)

    @property
    def processes(self) -> CallbackProcesses:
        if self._processes is None:
            self._processes = CallbackProcesses(self.logs_folder, timeout=self.settings.callback_timeout,
                                                parallelism=self.settings.callback_parallelism)
        return self._processes

    def poll(self) -> None:
        """Collect the calls that ended (recorded by the next transaction: due or ended)."""
        self.results += self.processes.poll()

    def end(self, grace: float) -> None:
        self.results += self.processes.end(grace)

    def recorded(self) -> None:
        """The transaction that recorded `results` has committed."""
        self.results = []

    def ended(self, session: Session, now: datetime, actor: str) -> None:
        """Record how the calls in `results` ended."""
        ended = callback_store.by_ids(session, [call_id for call_id, _, _ in self.results])
        for call_id, state, message in self.results:
            call = ended.get(call_id)
            if call is not None and call.state == callback_store.RUNNING:
                callback_store.finish(session, call, state, message, now=now, actor=actor)
                self.metrics.callbacks.labels(state).inc()
                self.say(f"{call.dag_id} run {call.run_id} {call.kind} callback {call.target}: {state}"
                         + (f" ({message})" if message else ""))

    def due(self, session: Session, now: datetime, *, job_id: int, actor: str,
            locate: Locate, quiet: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """Record the calls that ended; claim pending ones when their cadence says (requests to start once this
        transaction commits). `quiet`: the job's quiet mark (OthersWrites.quiet_mark); when the cadence alone makes
        a claim due and the mark is that of the last claim, nobody else has committed since and this job requested
        no call (it would have asked for a claim): nothing can be pending or lost, and nothing is read (decision
        0309; verify mode checks it)."""
        self.ended(session, now, actor)
        if not (self._claims.due() or self.backlog or self.processes.running):
            return []
        asked = self._claims.asked  # (this job requested calls, or a claim failed)
        self._claims.done()
        if not (asked or self.backlog or self.processes.running) and quiet is not None \
                and quiet == self.claimed_at:
            if self.settings.verify_memory and callback_store.claimable(session):
                raise MemoryMismatch("a callback is pending or lost though nobody else wrote since the last claim")
            return []
        self.claimed_at = quiet
        room = self.processes.room()
        claimed = callback_store.claim(session, job_id, limit=room, now=now, actor=actor)
        # all slots taken (or filled now): more calls may be pending; claim again as soon as a slot frees,
        # and do not count as idle until a claim finds fewer than it had room for
        self.backlog = len(claimed) >= room
        requests = []
        for call in claimed:
            fileloc, root = locate(session, call.dag_id, call.dag_version)
            requests.append((call.id, {
                "dag_id": call.dag_id, "run_id": call.run_id, "task_id": call.task_id, "try_number": call.try_number,
                "kind": call.kind, "position": call.position, "target": call.target, "dag_version": call.dag_version,
                "fileloc": fileloc, "code_root": root, "context": call.context}))
        return requests

    def start(self, calls: list[tuple[int, dict[str, Any]]]) -> None:
        for call_id, request in calls:
            self.processes.start(call_id, request)

    def request_task(self, session: Session, written: list[tuple[Outcome, TaskState]],
                     where: Mapping[tuple[int, int], TryInfo | None]) -> None:
        """Request the task callbacks the recorded outcomes call (none for a try that started, was lost or never
        started, since those task instances get a new try)."""
        for o, st in written:
            kind = TASK_CALLBACKS.get(st)
            if kind is None:
                continue
            info = where.get((o.ti_id, o.try_number))
            if info is not None:
                task_spec = dag_store.spec(session, info.dag_id, info.dag_version).tasks.get(info.task_id)
                if task_spec is None or not task_spec.callbacks.get(kind):
                    continue  # the common case: no callback, no query
                run_id, task_id = info.run_id, info.task_id
            else:  # another job's lost try: that job is gone
                _dag, found_run, found_task, _index = task_store.subjects(session, [o.ti_id]).get(
                    o.ti_id, (None, None, None, NOT_MAPPED))
                if found_run is None or found_task is None:
                    continue
                run_id, task_id = found_run, found_task
            run = run_store.find(session, run_id)
            if run is None:
                continue
            described = dag_store.spec(session, run.dag_id, run.version_hash).tasks[task_id].callbacks.get(kind)
            if described:
                self._claims.soon()
                callback_store.request(
                    session, kind=kind, dag_id=run.dag_id, run_id=run.id, dag_version=run.version_hash,
                    described=list(described), now=o.decided_at or o.at, task_id=task_id, try_number=o.try_number,
                    context={**callback_store.run_context(run), "task_id": task_id, "try_number": o.try_number,
                             "state": st.value, "reason": o.reason, "log_path": info.log_path if info else None,
                             "try": task_store.try_facts(session, o.ti_id, o.try_number)})

    def request_run(self, session: Session, run: DagRun, kind: str, now: datetime, **context: Any) -> None:
        """Request the run callbacks of `kind` (run_success, run_failure, deadline_missed) its version declares."""
        described = dag_store.spec(session, run.dag_id, run.version_hash).callbacks.get(kind)
        if described:
            self._claims.soon()
            callback_store.request(session, kind=kind, dag_id=run.dag_id, run_id=run.id,
                                   dag_version=run.version_hash, described=list(described), now=now,
                                   context={**callback_store.run_context(run), **context})
