"""DagRunJob: the one loop shared by SchedulerJob and BackfillJob.

    ┌─> parse DAG files ─> act on signals ─> drain the executor ─> one transaction ─> after the commit ─┐
    └────────────────────────────── sleep until something happens ───────────────────────────────────────┘

The loop's transaction, in order:
  1. notice other processes' writes (scheduler/loop/others_writes.py): another process wrote, or the full pass is
     due, and every held run is read again;
  2. record what the executor reported: tries started and ended, their values, rendered templates, lineage;
  3. decide the runs (skipped while only starts came in and every worker is busy):
     stop the tries a request asked to stop (scheduler/loop/stop_requests.py), create due runs (SchedulerJob),
     claim runs (scheduler/loop/claims.py), process the held runs: the pure planner decides from the pictures the
     job remembers (scheduler/loop/memory.py), the job writes its decisions through guarded transitions and queues
     ready task instances within parallelism, max_active_runs, max_active_tasks and pools;
  4. callbacks due (scheduler/callbacks/pending.py), the job's heartbeat, task-state signals;
  5. verify mode: what the job remembers equals what the database holds.
After the commit: notes to try logs and side files (scheduler/loop/after_commit.py), callbacks started, tries handed
to the executor, doorbells rung.

Steps that need not run every loop have a cadence (scheduler/loop/cadence.py): parsing, run creation and the signal
index (SchedulerJob), claiming, the full pass, the heartbeat, callbacks, the --stop-queued pauses. Each
transaction is short, executors never write to the database, and a failed transaction puts back what it
changed in the job's memory. Subclasses say which runs to collect and may create runs.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import signal
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.core.dependencies import PreviousRun
from ledger.core.mapping import NOT_MAPPED, expand_task, label, source_text
from ledger.core.outcomes import Outcome
from ledger.core.signals import Signal
from ledger.core.states import JobState, RunState, StaleState, TaskState
from ledger.core.versions import DagSpec
from ledger.infra.clock import Clock
from ledger.infra.logs import log_file
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun
from ledger.sdk.xcom import pull_view
from ledger.services.log_store import RemoteLogStore
from ledger.services.operations import stop_tasks
from ledger.services.signal_delivery import open_doorbell, ring
from ledger.store import dags as dag_store
from ledger.store import events, lineage, prior_runs, try_logs
from ledger.store import jobs as job_store
from ledger.store import loop as loop_store
from ledger.store import runs as run_store
from ledger.store import signals as signal_store
from ledger.store import tasks as task_store
from ledger.store import xcom as xcom_store
from ledger.store.backfills import backfill_room, finish_backfill
from ledger.store.db import reader, shares_one_connection
from scheduler.callbacks.pending import CallbackRequests
from scheduler.executors.base import NEVER_STARTED_PREFIX, Executor, TaskEvent, WorkItem
from scheduler.loop import adoption, dataset_runs, flow_events, remote_logs
from scheduler.loop.after_commit import AfterCommit
from scheduler.loop.cadence import Cadence
from scheduler.loop.claims import RunClaims
from scheduler.loop.code_cache import CodeCache
from scheduler.loop.faults import Backoff, first_line, is_transient
from scheduler.loop.job_connection import JobConnection
from scheduler.loop.memory import HeldRunsMemory, MemoryMismatch
from scheduler.loop.metrics import SchedulerMetrics
from scheduler.loop.others_writes import OthersWrites
from scheduler.loop.outcome_recording import record_outcomes
from scheduler.loop.planner import HeldRun, choose, plan_runs
from scheduler.loop.run_facts import RunFacts
from scheduler.loop.stop_requests import StopRequests
from scheduler.runtime.try_report import TryReport
from scheduler.signals.task_state_signals import TaskStateSignals
from scheduler.signals.wakeup import DatabaseWakeup, Wakeup

RunLogger = Callable[[str], None]

# What a transaction of the job changes in its memory besides its held runs' pictures (which it forgets): put back
# as it was when the transaction fails, so that the next try decides again from what the database holds.
_UNDONE_WITH_A_TRANSACTION = ("_inflight", "stops", "task_states", "after_commit", "watch")


def _copy_of(part: Any) -> Any:
    """A copy of one of the job's parts, deep enough to put back: its containers are copied, their items not."""
    if isinstance(part, (dict, list, set)):
        return copy.copy(part)
    copied = copy.copy(part)
    for name, value in vars(part).items():
        if isinstance(value, (dict, list, set)):
            setattr(copied, name, copy.copy(value))
    return copied


def _ended_how(o: Outcome, st: TaskState, settings: SchedulerSettings) -> str:
    """What a try's end means for its task instance, in words: the log's last line and the event's reason."""
    if o.state == TaskState.LOST:
        if st == TaskState.SCHEDULED:
            return f"lost: {o.reason}; it gets a new try (a lost try spends no retry)"
        if st == TaskState.FAILED:
            return (f"lost: {o.reason}; {settings.max_lost_tries} tries lost in a row (LEDGER_MAX_LOST_TRIES), "
                    "so the task fails")
        return f"lost: {o.reason}; its run has ended or it was asked to stop, so it gets no new try"
    return f"{o.reason}; it gets a new try" if st == TaskState.SCHEDULED else str(o.reason)


@dataclass
class LoopReport:
    outcomes: int = 0
    created: int = 0
    claimed: int = 0
    queued: int = 0
    marked: int = 0
    runs_changed: int = 0
    retry_at: datetime | None = None
    looked_for_runs: bool = False  # collect_runs really queried (it is throttled between runs finishing)
    callbacks: int = 0  # callback calls started or ended
    write_by: float | None = None  # time.monotonic() by which tries' starts held back must be written

    @property
    def progress(self) -> bool:
        return any((self.outcomes, self.created, self.claimed, self.queued, self.marked, self.runs_changed,
                    self.callbacks))


@dataclass
class _InFlight:
    run_id: int
    dag_id: str
    task_id: str
    retry_delay: float
    dag_version: str = ""
    log_path: str = ""
    queued_at: float = 0.0  # wall time the try was handed to the executor (for the task lag metric)
    started: bool = False
    map_index: int = NOT_MAPPED
    armed: bool = False  # a signal's START armed it, and this try used the arm up

    @property
    def label(self) -> str:
        return label(self.task_id, self.map_index)


@dataclass
class DagRunJob:
    sessions: sessionmaker[Session]
    engine: Engine
    settings: SchedulerSettings
    executor: Executor
    clock: Clock
    actor: str
    logs_folder: Path
    say: RunLogger = print
    job_type: str = "DagRunJob"
    newest_first: bool = False  # process (and claim) runs newest first, for backwards backfills
    job_id: int = 0
    stopping: bool = False
    stop_signal: int | None = None  # the signal that stopped the job (SIGINT, SIGTERM), if one did
    wakeup: Wakeup | None = None
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)
    backoff: Backoff = field(default_factory=Backoff)
    # its parts, each with its own small interface (see the module docstring)
    memory: HeldRunsMemory = field(default_factory=HeldRunsMemory)  # what it remembers of its held runs
    claims: RunClaims = field(init=False)  # which runs it holds; claiming more
    facts: RunFacts = field(init=False)  # what it reads once per run: values passed, intervals, pools, ...
    stops: StopRequests = field(default_factory=StopRequests)  # STOP/RESTART requests for its tries
    watch: OthersWrites = field(init=False)  # whether another process wrote; the full pass
    task_states: TaskStateSignals = field(init=False)  # task state changes, sent as signals
    after_commit: AfterCommit = field(default_factory=AfterCommit)  # log notes and side files, after commit
    callbacks: CallbackRequests = field(init=False)  # requested, claimed, run and recorded on their own cadence
    heartbeat: Cadence = field(init=False)
    connection: JobConnection = field(init=False)
    _inflight: dict[int, _InFlight] = field(default_factory=dict)  # the tries handed to the executor, by ti id
    _unrecorded: list[TaskEvent] = field(default_factory=list)  # drained, not yet committed (a fault rolled back)
    _held_since: float | None = None  # time.monotonic() of the first start held back in _unrecorded
    _reconcile: bool = False  # a transaction failed: its commit may have gone through unseen
    _code: CodeCache | None = None  # where versions' code is materialised on this host
    remote_logs: RemoteLogStore | None = field(default_factory=RemoteLogStore.from_env)  # remote tries' logs' store

    def __post_init__(self) -> None:
        s = self.settings
        self.claims = RunClaims(s, self.newest_first)
        self.facts = RunFacts(Cadence(s.poll_interval))
        self.connection = JobConnection(self.engine, self.sessions)
        # PRAGMA data_version tells this job's kept connection from every other: SQLite, with a pool that gives each
        # checkout its own connection (a single-connection pool, as for `:memory:`, does not)
        self.watch = OthersWrites(Cadence(s.poll_interval),
                                  versioned=self._serial and not shares_one_connection(self.engine))
        self.task_states = TaskStateSignals(s.task_state_signals)
        self.heartbeat = Cadence(s.heartbeat_interval)
        self.callbacks = CallbackRequests(s, self.logs_folder, self.metrics,
                                          say=lambda line: self.say(line))  # (the say of the moment: see transaction)

    @property
    def home(self) -> Path:
        return self.logs_folder.parent  # logs live in $LEDGER_HOME/logs

    @property
    def _serial(self) -> bool:
        """Whether transactions take the database's one write lock (SQLite): an event id then says exactly whether
        another process wrote since, and what the job remembers of its runs is exactly what the database holds.
        On PostgreSQL the job still checks outcomes and signal requests against the database."""
        return self.engine.dialect.name == "sqlite"

    # -- what subclasses may call -----------------------------------------------------------------
    def claim_soon(self) -> None:
        """Look for runs to claim in the next loop (runs were created, or one another job held may be free)."""
        self.claims.soon()

    def dag_files_changed(self) -> None:
        """DAG files were parsed again: where each DAG's file is, is read again when needed."""
        self.facts.filelocs.clear()

    # -- hooks for subclasses ------------------------------------------------------------------
    def refresh_dags(self) -> bool:
        return False

    def create_runs(self, session: Session, now: datetime) -> int:
        return 0

    def datasets_changed(self) -> None:
        """A try recorded dataset events (a scheduler looks for consumer runs to create at once)."""

    def claim_filter(self) -> dict[str, Any]:
        return {}

    def handle_signals(self, report: LoopReport) -> list[WorkItem]:
        """Act on new signals, in a short transaction of its own at the start of a loop; returns the tries it
        queued at once, for the loop to hand to the executor before anything else (SchedulerJob does this)."""
        return []

    def settle_backfill(self, session: Session, backfill_id: int, now: datetime) -> None:
        """A run of the backfill finished: the backfill ends when it has no unfinished run left."""
        finish_backfill(session, backfill_id, now=now, actor=self.actor)

    def others_wrote(self, session: Session) -> None:
        """Called in a loop's transaction when another process wrote since this job's last transaction (and at
        each full pass, every poll_interval): what a subclass must notice of others' changes."""

    @contextlib.contextmanager
    def reading(self) -> Iterator[Session]:
        """A read-only transaction (on SQLite, it does not take the write lock)."""
        with Session(reader(self.engine), expire_on_commit=False) as session, session.begin():
            yield session

    def busy(self) -> bool:
        """Work the subclass still expects (e.g. DAG files being parsed) that keeps the job from idling."""
        return False

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        with self.sessions.begin() as session:
            job = job_store.start_job(session, self.job_type, now=self.clock.now())
            self.job_id = job.id
        self.actor = f"{self.job_type.lower()}:{self.job_id}@{socket.gethostname()}"
        if self.wakeup is None:
            self.wakeup = DatabaseWakeup(self.engine, doorbell=open_doorbell(self.engine, self.home)) \
                if self.settings.signal_wakeup else DatabaseWakeup(self.engine, self.settings.poll_interval)
        self.executor.use_metrics(self.metrics)
        self.executor.use_say(lambda line: self.say(line))  # (the say of the moment: see transaction)
        self.executor.start()
        self.heartbeat.done()  # (started: its first heartbeat is due after heartbeat_interval)

    def install_signal_handlers(self) -> None:
        def stop(signum: int, _frame: Any) -> None:
            self.stopping = True
            self.stop_signal = signum
            if self.wakeup is not None:
                self.wakeup.interrupt()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def run(self, *, num_runs: int | None = None, exit_when_idle: bool = False) -> None:
        """Loop until stopped (SIGTERM/SIGINT), `num_runs` loops are done, or idle when asked to."""
        self.start()
        self.run_started(num_runs=num_runs, exit_when_idle=exit_when_idle)

    def run_started(self, *, num_runs: int | None = None, exit_when_idle: bool = False) -> None:
        """The loop of a job whose start() has been called."""
        loops = 0
        # what exists now (modules, classes, table metadata: tens of thousands of objects that live as long as
        # the process) is left out of the cyclic garbage collector's full passes, which scanned it all again
        # every few hundred loops (collected first: garbage that is frozen is never freed)
        gc.collect()
        gc.freeze()
        self.backoff.max_outage = self.settings.db_max_outage
        outage_since: float | None = None
        attempt = stale = 0
        try:
            while not self.stopping:
                try:
                    report = self.loop_once()
                except StaleState as exc:
                    # another process changed a row this job wrote from what it remembered: nothing was written,
                    # what it remembered is forgotten (transaction()), and the next loop reads it all again
                    stale += 1
                    if stale > 10:  # the database itself says otherwise every time: a bug, not a race
                        raise
                    self.say(f"{exc.what}; reading again")
                    continue
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    now_m = time.monotonic()
                    outage_since = now_m if outage_since is None else outage_since
                    if self.backoff.gives_up(now_m - outage_since):
                        raise
                    attempt += 1
                    wait_s = self.backoff.delay(attempt)
                    self.say(f"database error, retrying in {wait_s:.1f} s (attempt {attempt}): {first_line(exc)}")
                    self._pause(wait_s)
                    continue
                stale = 0
                if outage_since is not None:
                    self.say(f"database reachable again after {time.monotonic() - outage_since:.1f} s")
                    outage_since, attempt = None, 0
                loops += 1
                if num_runs is not None and loops >= num_runs:
                    break
                idle = not report.progress and not self.executor.in_flight() and report.retry_at is None \
                    and not self.busy() and not self.callbacks.processes.running and not self.callbacks.backlog
                if exit_when_idle and idle:
                    if not report.looked_for_runs:  # look for claimable runs once more before leaving
                        self.claims.soon()
                        continue
                    break
                self.sleep(report)
        finally:
            self.shutdown()

    def sleep(self, report: LoopReport) -> None:
        if report.progress:
            return
        timeout = self.settings.poll_interval
        if self.callbacks.processes.running:  # callback processes are polled: look again soon
            timeout = min(timeout, 0.1)
        if report.retry_at is not None:
            wait_s = (report.retry_at - self.clock.now()).total_seconds()
            timeout = max(0.0, min(timeout, wait_s))
        if report.write_by is not None:
            timeout = max(0.0, min(timeout, report.write_by - time.monotonic()))
        assert self.wakeup is not None
        try:
            self.wakeup.sleep(self.wait_handles(), timeout)
        except Exception as exc:  # the wake-up's check of the database failed: loop, and let the loop retry
            if not is_transient(exc):
                raise

    def _pause(self, seconds: float) -> None:
        """Wait out a database fault (a stop request ends the wait early). Tries keep running meanwhile;
        their outcomes wait in the executor until they can be recorded."""
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(0.2, left))

    @contextlib.contextmanager
    def transaction(self, *, loop: bool = False) -> Iterator[Session]:
        """One transaction of this job (`loop`: a loop's). When it fails (a database fault), what it changed in
        the job's memory is put back, so that the next try decides again from what the database holds."""
        saved = {name: _copy_of(getattr(self, name)) for name in _UNDONE_WITH_A_TRANSACTION}
        # what the transaction says (a run's or try's new state) is printed once it has committed: a fault that
        # rolls it back leaves nothing printed that the database does not hold
        outer = self.say
        said: list[str] = []
        self.say = said.append
        try:
            with self.connection.begin() as session:
                yield session
                if not loop and events.written_ids(session):
                    self.watch.side_transaction()  # the next loop reads the events
        except BaseException:
            self.say = outer
            for name, value in saved.items():
                setattr(self, name, value)
            self.watch.side_transaction()
            self.forget(reason="a transaction failed")
            self.claims.soon()
            self._reconcile = True
            raise
        self.say = outer
        for line in said:
            outer(line)

    def wait_handles(self) -> list[Any]:
        return list(self.executor.wait_handles())

    def shutdown(self) -> None:
        """Stop taking work, let running tries finish within the grace period, release the locks."""
        if isinstance(self.wakeup, DatabaseWakeup):
            self.wakeup.close()
        last = self._unrecorded + self.executor.end(self.settings.shutdown_grace)
        self.callbacks.end(self.settings.shutdown_grace)
        now = self.clock.now()
        attempt = 0
        try:
            while True:  # a database fault while stopping: try a few times, else the lock timeout frees the runs
                try:
                    self._end_in_database(last, now)
                    break
                except Exception as exc:
                    attempt += 1
                    if not (is_transient(exc) or isinstance(exc, StaleState)) or attempt >= 6:
                        raise
                    self.say(f"database error while stopping, retrying (attempt {attempt}): {first_line(exc)}")
                    time.sleep(self.backoff.delay(attempt))
        finally:
            self.connection.let_go()
        self._unrecorded = []
        self.callbacks.recorded()
        self.after_commit.carry_out()
        if self.task_states.to_ring():
            ring(self.engine, self.home)

    def _end_in_database(self, last: list[TaskEvent], now: datetime) -> None:
        last = self._with_reports_kept(last)
        with self.transaction() as session:
            self._record(session, last, now)
            running_on = self.executor.left_running()  # remote tries: the job that takes their runs over adopts them
            lost = [(ti, tn) for ti, tn in task_store.unfinished_in_job(session, self.job_id) if ti not in running_on]
            if lost:
                self._record(session, [TaskEvent(ti, tn, "finished", time.time(), "lost",
                                                 reason="its job stopped before the try ended")
                                       for ti, tn in lost], now)
            self.callbacks.ended(session, now, self.actor)
            released = job_store.release_all(session, self.job_id)
            events.record_many(session, [  # one event per run, so that `ledger events --dag/--run` finds it
                dict(at=now, kind="locks_released", actor=self.actor, dag_id=dag_id, run_id=run_id,
                     details={"job_id": self.job_id}) for run_id, dag_id in released])
            job_store.end_job(session, self.job_id, now=now)
            self.task_states.flush(session, now, self.actor)

    # -- one loop ------------------------------------------------------------------------------
    def loop_once(self) -> LoopReport:
        began = time.perf_counter()
        report = self._loop_once()
        self.metrics.loop.observe(time.perf_counter() - began)
        running = sum(1 for info in self._inflight.values() if info.started)
        self.metrics.running.set(running)
        self.metrics.queued.set(len(self._inflight) - running)
        return report

    def _loop_once(self) -> LoopReport:
        report = LoopReport()
        self.refresh_dags()
        self.executor.submit_all(self.handle_signals(report))  # a signal's START reaches a worker before the rest
        drained = self._unrecorded + self.executor.drain()
        self._unrecorded = drained  # until the transaction that records them commits
        self.callbacks.poll()
        if self._hold_starts(drained, report):
            return report
        now = self.clock.now()
        drained = self._with_reports_kept(drained)
        with self.transaction(loop=True) as session:
            work, to_call = self._loop_transaction(session, drained, now, report)
        self._unrecorded = []
        self._held_since = None
        self.callbacks.recorded()
        self.after_commit.carry_out()
        self.callbacks.start(to_call)
        self.executor.submit_all(work)  # the tries first: ringing doorbells can wait a few microseconds
        if self.task_states.to_ring():  # such a loop recorded outcomes or marked tasks: it loops again unwoken
            ring(self.engine, self.home, skip=self.wakeup.doorbell if isinstance(self.wakeup, DatabaseWakeup) else None)
        if self.wakeup is not None and not isinstance(self.wakeup, DatabaseWakeup):
            self.wakeup.settle()
        return report

    def _loop_transaction(self, session: Session, drained: list[TaskEvent], now: datetime, report: LoopReport
                          ) -> tuple[list[WorkItem], list[tuple[int, dict[str, Any]]]]:
        """The loop's one transaction, step by step (see the module docstring): the tries to hand to the executor
        and the callbacks to start, once it has committed."""
        # only tries' starts came in while every worker is busy: nothing could be queued, so only record them
        only_starts = bool(drained) and all(ev.kind == "started" for ev in drained) and self.executor.open_slots() == 0
        if self.watch.look(session, self.connection.kept):
            self._read_everything_again(session)
            only_starts = only_starts or self.stopping  # (a subclass saw it must stop: only record what ended)
        report.outcomes = self._record(session, drained, now)
        adoption.record_remarks(session, self.executor, actor=self.actor, now=now)
        if self._reconcile:
            self._fail_unsubmitted(session, now)
        work = [] if only_starts else self._decide_runs(session, now, report)
        report.callbacks = len(self.callbacks.results)
        to_call = self.callbacks.due(session, now, job_id=self.job_id, actor=self.actor, locate=self._locate)
        report.callbacks += len(to_call)
        if self.heartbeat.due():
            job_store.heartbeat(session, self.job_id, now=now)
            self.heartbeat.done()
        self.task_states.flush(session, now, self.actor)
        if self.settings.verify_memory:
            self._verify_memory(session)
        seen = self.watch.loop_done(session)
        if isinstance(self.wakeup, DatabaseWakeup):
            self.wakeup.seen = seen  # its own events do not wake it
        return work, to_call

    def _read_everything_again(self, session: Session) -> None:
        """Another process wrote (CLI, backfill, another job; every change comes with an event), or a poll
        interval passed: every held run is read and decided again."""
        self.forget(reason="another process wrote, or a poll interval passed")
        self.claims.soon()  # it may have made runs to claim (a trigger, a backfill, a lock released)
        self.others_wrote(session)

    def _decide_runs(self, session: Session, now: datetime, report: LoopReport) -> list[WorkItem]:
        """Stop what was asked to stop, create due runs, claim runs, decide the held runs: the tries to queue."""
        self.stops.carry_out(session, self.job_id, self.executor, self._inflight)
        report.created = self.create_runs(session, now)
        if report.created:
            self.claims.soon()
            self.forget(reason="runs created")  # a new run may be a held run's previous one (relinked)
        if self.claims.due():
            report.looked_for_runs = True
            self.reap_dead_holders(session, now)
            report.claimed = self.collect_runs(session, now)
        return self.process_runs(session, now, report)

    def _hold_starts(self, drained: list[TaskEvent], report: LoopReport) -> bool:
        """Whether this loop can leave out its transaction: it would only write that tries started, while every
        worker is busy (nothing could be queued). Those starts are written, with the times they happened, by
        the next transaction (mostly the one that records how the tries ended), at most
        `started_write_delay` seconds later: one transaction per try instead of two."""
        delay = self.settings.started_write_delay
        if delay <= 0 or not drained or any(ev.kind != "started" for ev in drained) or self.callbacks.results \
                or self._reconcile or self.stopping or self.executor.open_slots() > 0 \
                or self.heartbeat.due():
            return False  # (a due heartbeat is written: holding starts never makes the job look silent)
        now = time.monotonic()
        if self._held_since is None:
            self._held_since = now
        if now - self._held_since >= delay:
            return False
        report.write_by = self._held_since + delay
        return True

    # -- callbacks -----------------------------------------------------------------------------
    def _locate(self, session: Session, dag_id: str, version: str) -> tuple[str, str | None]:
        """Where a version's code is on this host: (the DAG file, the snapshot's root, or None: the DAGs folder)."""
        code = self.code_cache().locate(session, dag_id, version)
        return (code.fileloc, code.root) if code is not None else (self._dag_file(session, dag_id), None)

    def _fail_unsubmitted(self, session: Session, now: datetime) -> None:
        """After a failed transaction whose COMMIT may have reached the database unseen: tries queued in this
        job's name that no worker was given end as never started (their task instances get a new try, see
        _record), so that nothing waits for them and nothing runs twice."""
        self._reconcile = False
        mine = set(self._inflight) | self.executor.in_flight()
        lost = [(ti, tn) for ti, tn in task_store.unfinished_in_job(session, self.job_id) if ti not in mine]
        if lost:
            self._record(session, [TaskEvent(ti, tn, "finished", time.time(), "failed",
                                             reason="never started: queued in a transaction a database fault "
                                                    "interrupted") for ti, tn in lost], now)

    def _with_reports_kept(self, drained: list[TaskEvent]) -> list[TaskEvent]:
        """The drained events, remote tries' logs put in the remote log store first (before the transaction: no
        network in it) when the job has one: their reports then carry no log text."""
        if self.remote_logs is None:
            return drained
        reports = {(ev.ti_id, ev.try_number): ev.report for ev in drained if ev.report is not None}
        names = {(ev.ti_id, ev.try_number): log_file("", i.dag_id, i.run_id, i.task_id, ev.try_number, i.map_index)
                 for ev in drained if ev.kind == "finished" and (i := self._inflight.get(ev.ti_id)) is not None}
        kept = remote_logs.keep(self.remote_logs, reports, names, self.say)
        return [dataclasses.replace(ev, report=kept[(ev.ti_id, ev.try_number)]) if ev.report is not None else ev
                for ev in drained]

    def _record(self, session: Session, drained: list[TaskEvent], now: datetime) -> int:
        """Record what the executor reported: the outcomes as the pure rule decides them (ledger/core/outcomes.py),
        through guarded writes, then what follows from them (pictures, stop requests settled, task-state signals,
        callbacks, what the tries' reports hold, failure events)."""
        where: dict[tuple[int, int], _InFlight | None] = {}
        outcomes = self._outcomes(drained, now, where)
        written = record_outcomes(session, outcomes, self._known_tries(drained, where) if self._serial else None,
                                  max_lost_tries=self.settings.max_lost_tries, now=now)
        for o, st in written:
            requeued_info = where.get((o.ti_id, o.try_number)) if o.requeue or o.state == TaskState.LOST else None
            if requeued_info is not None and requeued_info.log_path:  # written once this transaction has committed
                self.after_commit.note(requeued_info.log_path, o.at, f"outcome: {_ended_how(o, st, self.settings)}")
        self._picture_outcomes(drained, written, where)
        for o, st in written:
            if st != TaskState.RUNNING:
                self.metrics.finished.labels(TaskState.LOST.value if o.state == TaskState.LOST else st.value).inc()
        ended = [o.ti_id for o, st in written if st != TaskState.RUNNING]
        for rearmed in self.stops.settle(session, ended, serial=self._serial):
            self.forget(rearmed, "a signal request gave a new try")
        for o, st in written:
            info = where.get((o.ti_id, o.try_number))
            if info is not None:
                self.task_states.add(info.dag_id, info.task_id, st.value,
                                     {"run_id": info.run_id, "try_number": o.try_number})
        self.callbacks.request_task(session, written, where)
        self._record_reports(session, written, where, {(ev.ti_id, ev.try_number): ev.report for ev in drained
                                                       if ev.report is not None}, now)
        self._record_failures(session, written, where, now)
        return len(written)

    def _outcomes(self, drained: list[TaskEvent], now: datetime,
                  where: dict[tuple[int, int], _InFlight | None]) -> list[Outcome]:
        """The outcomes to write for the drained events (`where` takes each try's in-flight record), and what the
        events change in the job: tries started (metrics), ended (no longer in flight), killed (stopped)."""
        outcomes = []
        host = socket.gethostname()
        for ev in drained:
            info = self._inflight.get(ev.ti_id)
            where[(ev.ti_id, ev.try_number)] = info
            at = datetime.fromtimestamp(ev.at, UTC)
            state = TaskState.RUNNING if ev.kind == "started" else TaskState(ev.state or "failed")
            # a try that never started though nobody stopped it (it waited in a worker when the job stopped, or a
            # database fault kept it from a worker): recorded stopped, and its task instance gets a new try that
            # costs it no retry (task_store.record_outcomes: unless a stop is pending or its run has ended)
            unstarted = ev.kind == "finished" and (ev.reason or "").startswith(NEVER_STARTED_PREFIX)
            requeue = unstarted and ev.ti_id not in self.stops.killed and self.requeues_unstarted()
            if ev.kind == "finished" and ev.ti_id in self.stops.killed:
                why = self.stops.killed.pop(ev.ti_id)
                if state in (TaskState.FAILED, TaskState.LOST):  # ended by the kill (it may have ended on its own)
                    state = TaskState.STOPPED
                    if info is not None and info.log_path:  # written once this transaction has committed
                        if unstarted:  # taken out while it waited in its worker
                            why = ev.reason or why
                        self.after_commit.note(info.log_path, at, f"outcome: {why}")
            outcomes.append(Outcome(ev.ti_id, ev.try_number, state, at, ev.pid, ev.host or host, ev.reason,
                                               info.retry_delay if info else 0.0, decided_at=now, requeue=requeue,
                                               armed=requeue and info is not None and info.armed,
                                    **flow_events.sensor_outcome(state, ev.reason, ev.report)))
            if ev.kind == "started":
                if info is not None and not info.started:
                    info.started = True
                    self.metrics.started.inc()
                    if info.queued_at:
                        self.metrics.lag.observe(max(0.0, ev.at - info.queued_at))
            elif info is None:
                self.forget(reason="an outcome of a try this job does not know")  # (another job's lost one)
            else:
                self.memory.settled.pop(info.run_id, None)
                self.memory.forget_past_of(info.run_id)
            if ev.kind == "finished":
                self._inflight.pop(ev.ti_id, None)
        return outcomes

    def _record_reports(self, session: Session, written: list[tuple[Outcome, TaskState]],
                        where: dict[tuple[int, int], _InFlight | None],
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
                                                      now=now, actor=self.actor)
                xcom_store.record(session, pushed, run_id=info.run_id, task_id=info.task_id,
                                  try_number=o.try_number, now=now, map_index=info.map_index)
                self.facts.pushed(info.run_id, info.label, pushed)
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
                self.datasets_changed()
        try_logs.keep(session, logs)
        events.record_many(session, checked)

    def _record_failures(self, session: Session, written: list[tuple[Outcome, TaskState]],
                         where: dict[tuple[int, int], _InFlight | None], now: datetime) -> None:
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
                path = log_file(str(self.logs_folder), dag_id, run_id, task_id, o.try_number, index)
                self.after_commit.note(path, o.at, f"outcome: {_ended_how(o, st, self.settings)}")
            lost = o.state == TaskState.LOST
            kind = "try_lost" if lost else "try_not_started" if st == TaskState.SCHEDULED else "task_failed"
            failures.append(dict(
                at=now, kind=kind, actor=self.actor, dag_id=dag_id, run_id=run_id,
                details={"task_id": task_id, "ti_id": o.ti_id, "try_number": o.try_number,
                         "reason": _ended_how(o, st, self.settings) if lost else o.reason,
                         "state": st.value, **({"map_index": index} if index >= 0 else {})}))
            self.say(f"{dag_id} run {run_id} task {label(task_id or '?', index)} try {o.try_number}: "
                     f"{'lost' if lost else st.value} ({_ended_how(o, st, self.settings)})")
        events.record_many(session, failures)

    def requeues_unstarted(self) -> bool:
        """Whether a try that never started gets a new try (not when the job stops because its work was
        cancelled: a cancelled backfill)."""
        return True

    def _known_tries(self, drained: list[TaskEvent], where: dict[tuple[int, int], _InFlight | None]
                     ) -> dict[int, tuple[int, int, str]]:
        """ti id -> (try number, max tries, state) of the drained tries' task instances, from the held runs'
        pictures (which hold what the database holds: see forget); those not pictured are read."""
        known = {}
        for ev in drained:
            info = where.get((ev.ti_id, ev.try_number))
            picture = self.memory.pictures.get(info.run_id) if info is not None else None
            row = picture.tis.get(info.label) if picture is not None and info is not None else None
            if row is not None and row.id == ev.ti_id:
                known[row.id] = (row.try_number, row.max_tries, row.state.value)
        return known

    def _picture_outcomes(self, drained: list[TaskEvent], written: list[tuple[Outcome, TaskState]],
                          where: dict[tuple[int, int], _InFlight | None]) -> None:
        """The held runs' pictures take the states just written: a try that started or succeeded changes only its
        task instance's state. Anything else (a failure, a retry, a stop, an outcome the database ignored) is
        read again from the database, which decided it."""
        states = {(o.ti_id, o.try_number): st for o, st in written}  # the last one written (a start, then its end)
        kept = {key for key, st in states.items() if st in (TaskState.RUNNING, TaskState.SUCCESS)}
        for ev in drained:
            info = where.get((ev.ti_id, ev.try_number))
            if info is None or info.run_id not in self.memory.pictures:
                continue
            picture = self.memory.pictures[info.run_id]
            row = picture.tis.get(info.label)
            if (ev.ti_id, ev.try_number) not in kept or row is None or row.id != ev.ti_id \
                    or row.try_number != ev.try_number:
                self.forget(info.run_id, "an outcome the database decided (failure, retry, stop)")
                continue
            self.memory.wrote(picture.run.id, row.with_state(states[(ev.ti_id, ev.try_number)]))

    def forget(self, run_id: int | None = None, reason: str = "read again") -> None:
        """What the job remembers of a held run (of every run: None) no longer holds: the next loop reads it
        from the database and decides it again."""
        self.memory.forget(run_id, reason)
        if run_id is None:
            self.facts.forget()
            self.claims.forget()
            self.stops.read_again()

    def _verify_memory(self, session: Session) -> None:
        """Verify mode: at the end of a loop's transaction, what the job remembers of its held runs must be what
        the database holds (on SQLite nobody else can write meanwhile; on PostgreSQL a difference that another
        process's event explains is what the next loop reads again)."""
        found = self.memory.differences(session)
        if found and not self._serial and self.watch.others_since(session):
            return
        if found:
            raise MemoryMismatch("; ".join(found[:5]))

    # -- collect runs --------------------------------------------------------------------------
    def reap_dead_holders(self, session: Session, now: datetime) -> None:
        """Jobs on this host whose process is gone lose their locks at once, without waiting for
        lock_timeout (a scheduler killed with kill -9 and restarted resumes straight away)."""
        for job_id in job_store.dead_local_holders(session, self.job_id):
            held = job_store.held_runs(session, job_id)
            job_store.end_job(session, job_id, now=now, state=JobState.FAILED)
            # one event per run it held, naming the run and its DAG, so that `ledger events --dag/--run` finds it
            events.record_many(session, [
                dict(at=now, kind="job_died", actor=self.actor, dag_id=dag_id, run_id=run_id,
                     details={"job_id": job_id, "reason": "its process is gone (same host)"})
                for run_id, dag_id in held])

    def collect_runs(self, session: Session, now: datetime) -> int:
        """Claim runs for this job; the tries of a job that stopped heart-beating (or whose process is gone) are
        lost, and each gets a new try."""
        claimed = self.claims.claim(session, self.job_id, now, self.actor, self.claim_filter())
        if not claimed:
            return 0
        ids = [run_id for run_id, _ in claimed]
        self.facts.let_go(ids)  # another job may have held them meanwhile: their values are read again
        for run_id, holder in claimed:
            if holder is not None:
                self.say(f"took over run {run_id} from job {holder}, which stopped heart-beating")
        orphans = task_store.orphaned(session, ids, job_id=self.job_id)
        if orphans:  # remote tries that run on without their job are followed here (scheduler/loop/adoption.py)
            orphans, adopted = adoption.adopt(session, self.executor, orphans, job_id=self.job_id,
                                              logs=str(self.logs_folder), actor=self.actor, now=now)
            for ti_id, fields in adopted.items():
                self._inflight[ti_id] = _InFlight(**fields)
                self.forget(fields["run_id"], "tries adopted")
        if orphans:
            self._record(session, [TaskEvent(ti, tn, "finished", time.time(), "lost",
                                             reason="its job stopped heart-beating")
                                   for ti, tn, _run in orphans], now)
        return len(claimed)

    # -- process runs --------------------------------------------------------------------------
    def process_runs(self, session: Session, now: datetime, report: LoopReport) -> list[WorkItem]:
        held_ids = self.claims.held(session, self.job_id)
        if not held_ids:
            self.forget(reason="no runs held")
            return []
        self.memory.keep_only(set(held_ids))
        todo = [i for i in held_ids if i not in self.memory.settled]
        cached = [c for i in held_ids if i in self.memory.settled for c in self.memory.settled[i]]
        if not todo:
            return self.queue_tries(session, cached, now, report)
        held = [self.memory.pictures[i] for i in todo if i in self.memory.pictures]
        held += self._read_held(session, [i for i in todo if i not in self.memory.pictures])
        queued = {h.run.dag_id for h in held if h.run.state == RunState.QUEUED.value}
        running = loop_store.running_runs_by_dag(session, {h.run.dag_id for h in held}) if queued else {}
        backfills = {h.run.backfill_id for h in held
                     if h.run.state == RunState.QUEUED.value and h.run.backfill_id is not None}
        plan = plan_runs(held, running, now=now, newest_first=self.newest_first,
                         values=lambda run_id: self.facts.passed_values(session, {run_id})[run_id],
                         backfill_room=backfill_room(session, backfills))
        self.memory.remember(held)
        specs = {h.run.id: h.spec for h in held}
        for run in plan.start:
            self._set_run_state(session, run, RunState.RUNNING, now)
        self.memory.successor.update(plan.successors)
        for ti, st, run in plan.mark:
            self.task_states.add(run.dag_id, ti.task_id, st.value, {"run_id": run.id})
        task_store.mark(session, [(ti.id, ti.state, st) for ti, st, _run in plan.mark], now=now)
        if plan.why:  # skips a branch or short-circuit chose: an event each, with the reason
            flow_events.record_skips(session, plan, now=now, actor=self.actor, say=self.say)
        for ti, st, run in plan.mark:
            picture = self.memory.pictures.get(run.id)  # (None: forgotten by the mark of its previous run, just above)
            if picture is not None:
                self.memory.wrote(picture.run.id, ti.with_state(st))
            self.memory.forget_past_of(run.id)
        for run_id in plan.waiting_on_past:  # its previous run's states are read again each loop, as they change
            self.memory.pictures.pop(run_id, None)
        self._expand(session, plan.expand, now)
        self.memory.settled.update(plan.settled)
        report.retry_at = plan.retry_at
        report.marked = len(plan.mark) + len(plan.expand)
        report.runs_changed += len(plan.start) + len(plan.finish)
        for run in plan.deadline_missed:
            self._deadline_missed(session, run, specs[run.id], now)
        for run in plan.timed_out:
            self.forget(run.id, "dagrun_timeout")
            stopping, skipped = stop_tasks(session, run, now=now)
            self.stops.read_again()  # its stop requests: carried out below, and settled when the tries end
            limit = f"dagrun_timeout of {specs[run.id].dagrun_timeout:g} s"
            for instance in run_store.task_instances(session, run.id) if stopping else []:
                if label(instance.task_id, instance.map_index) in stopping:  # its log and outcome say why
                    self.stops.reasons[instance.id] = f"stopped by the run's {limit}"
            plan.finish.append((run, RunState.FAILED, f"{limit} passed; stopping {stopping or 'no tries'}, skipped "
                                                      f"{skipped or 'nothing'}"))
        for run, state, reason in plan.finish:
            self.facts.let_go([run.id])
            self.forget(run.id, "run finished")
            self.claims.released(run.id)  # its lock is released here
            self._set_run_state(session, run, state, now, release=True, reason=reason)
        if plan.finish:
            self.claims.some_released()
        for backfill_id in {run.backfill_id for run, _, _ in plan.finish if run.backfill_id is not None}:
            self.settle_backfill(session, backfill_id, now)
        return self.queue_tries(session, plan.ready + cached, now, report)

    def _expand(self, session: Session, candidates: list[tuple[task_store.TiRow, DagRun, DagSpec]],
                now: datetime) -> None:
        """Expand mapped tasks whose upstream is done (ledger/core/mapping.py), from their run's version and the values
        its tasks passed on: the instances are made, or the task is skipped (empty list) or fails (not a list,
        too long, no value), each recorded as an event with the reason."""
        if not candidates:
            return
        for _ti, run, _spec in candidates:
            self.forget(run.id, "mapped task expanded")  # its task instances change in ways read again
        passed = self.facts.passed_values(session, {run.id for _ti, run, _spec in candidates})
        limit = self.settings.max_map_length
        for ti, run, spec in candidates:
            sources = spec.tasks[ti.task_id].expand
            source = source_text(sources)
            found = expand_task(sources, pull_view(passed[run.id]), max_length=limit)
            where = f"{run.dag_id} run {run.id} task {ti.task_id}"
            if found.state is None:
                task_store.expand(session, ti, run.dag_id, found.count)
                events.record(session, "task_expanded", at=now, actor=self.actor, dag_id=run.dag_id, run_id=run.id,
                              task_id=ti.task_id, count=found.count, source=source)
                self.say(f"{where}: expanded into {found.count} instance(s) over {source}")
                continue
            state = TaskState(found.state)
            task_store.mark(session, [(ti.id, ti.state, state)], now=now)
            self.task_states.add(run.dag_id, ti.task_id, state.value, {"run_id": run.id})
            kind = "task_expanded" if state == TaskState.SKIPPED else "task_failed"
            events.record(session, kind, at=now, actor=self.actor, dag_id=run.dag_id, run_id=run.id,
                          task_id=ti.task_id, ti_id=ti.id, try_number=0, count=0, source=source, state=state.value,
                          reason=found.reason)
            if state == TaskState.FAILED:  # its on_failure_callback, as for a failed try (this one had none: 0)
                self.callbacks.request_task(session, [(Outcome(
                    ti.id, 0, state, now, reason=found.reason, decided_at=now), state)], {})
            self.say(f"{where}: {state.value} ({found.reason})")

    def queue_tries(self, session: Session, candidates: list[tuple[task_store.TiRow, DagRun, DagSpec]],
                    now: datetime, report: LoopReport, known: Mapping[int, Signal] | None = None,
                    read_pools: bool = False) -> list[WorkItem]:
        """Queue the candidates that parallelism, max_active_tasks and pools let through; their WorkItems.
        `known`: signals already read, by id (the armed ones' signals are read only when missing); `read_pools`:
        read the pools' slots again in this transaction (a pool may have changed since the last loop)."""
        known = known or {}
        if read_pools:
            self.facts.pool_slots = None
        slots = self.executor.open_slots()
        if not candidates or slots <= 0:
            return []
        dates, dag_of = self.facts.dates_of(run for _ti, run, _spec in candidates)
        active = task_store.active_counts_by_dag(session, list({dag_of[c[0].run_id] for c in candidates}))
        chosen = choose(candidates, slots=slots, pool_room=task_store.pool_room(session, self.facts.pools(session)),
                        active=active, newest_first=self.newest_first, dates=dates)
        tries = task_store.queue(session, [c[0] for c in chosen], job_id=self.job_id, now=now,
                                 versions={c[0].id: c[1].version_hash for c in chosen})
        for ti, run, _spec in chosen:
            pending = self.memory.settled.get(run.id)
            if pending is not None:
                self.memory.settled[run.id] = [c for c in pending if c[0].id != ti.id]
            picture = self.memory.pictures.get(run.id)
            if picture is not None:  # as task_store.queue wrote it
                self.memory.wrote(picture.run.id, ti.queued(tries[ti.id], self.job_id))
        report.queued = len(chosen)
        # a START is used up by the try it started (task_store.queue); the try sees its signal
        wanted = {c[0].signal_id for c in chosen if c[0].armed and c[0].signal_id is not None}
        signals = {i: known[i] for i in wanted if i in known}
        if len(signals) < len(wanted):
            signals.update(signal_store.by_ids(session, wanted - set(signals)))
        passed = {i: pull_view(v)
                  for i, v in self.facts.passed_values(session, {run.id for _ti, run, _s in chosen}).items()}
        previous = self.facts.run_intervals(session, {run.previous_run_id for _ti, run, _s in chosen
                                                 if run.previous_run_id is not None})
        triggering = dataset_runs.triggering_events(session, [run for _ti, run, _s in chosen])
        inlets = dataset_runs.inlet_events(session, chosen, tries, now=now, actor=self.actor)
        prior = prior_runs.prior_successes(session, {run.id for _ti, run, _s in chosen})  # prev_*_success
        work = []
        logs = str(self.logs_folder)
        for ti, run, spec in chosen:
            task = spec.tasks[ti.task_id]
            code = self.code_cache().locate(session, run.dag_id, run.version_hash)
            path = log_file(logs, run.dag_id, run.id, ti.task_id, tries[ti.id], ti.map_index)
            self._inflight[ti.id] = _InFlight(
                run.id, run.dag_id, ti.task_id, task.delay_after(tries[ti.id]), run.version_hash, path, time.time(),
                map_index=ti.map_index, armed=ti.armed)
            work.append(WorkItem(
                ti_id=ti.id, run_id=run.id, dag_id=run.dag_id, task_id=ti.task_id, try_number=tries[ti.id],
                fileloc=code.fileloc if code is not None else self._dag_file(session, run.dag_id),
                code_root=code.root if code is not None else None,
                code_captured=code.captured if code is not None else False, logical_date=run.logical_date,
                data_interval_start=run.data_interval_start, data_interval_end=run.data_interval_end,
                dag_version=run.version_hash, run_type=run.run_type,
                log_path=path, map_index=ti.map_index, queue=task.queue,
                execution_timeout=task.execution_timeout, conf=dict(run.conf or {}),
                priority_weight=ti.priority_weight, xcom=passed.get(run.id, {}),
                prev_interval=previous.get(run.previous_run_id) if run.previous_run_id is not None else None,
                prev_success=prior.get(run.id),
                triggering_events=triggering.get(run.id), inlet_events=inlets.get(ti.id),
                signal=signals[ti.signal_id].as_json() if ti.armed and ti.signal_id in signals else None))
        return work

    def _read_held(self, session: Session, run_ids: list[int]) -> list[HeldRun]:
        """The held runs from the database, as the planner sees them."""
        if not run_ids:
            return []
        runs = loop_store.runs_by_id(session, run_ids)
        cancelled = loop_store.cancelled_backfills(
            session, {r.backfill_id for r in runs.values() if r.backfill_id is not None})
        tis = task_store.rows_for_runs(session, list(runs))
        specs = {r.id: dag_store.spec(session, r.dag_id, r.version_hash) for r in runs.values()}
        previous = task_store.previous_states(
            session, [r.previous_run_id for r in runs.values() if r.previous_run_id is not None
                      and any(t.depends_on_past for t in specs[r.id].tasks.values())])
        holding = self.facts.dags_holding(session, {r.dag_id for r in runs.values()
                                                    if r.state == RunState.QUEUED.value})
        self.facts.passed_values(session, set(runs))  # with one statement for all of them, before tries are queued
        self.facts.remember_intervals(runs.values())  # the next runs' prev_data_interval_*
        return [HeldRun(run, specs[run.id], tis.get(run.id, {}),  # (each run's own dict, which _picture_task updates)
                        PreviousRun(previous.get(run.previous_run_id, {})) if run.previous_run_id is not None
                        else None, backfill_cancelled=run.backfill_id in cancelled, held_queued=run.dag_id in holding)
                for run in runs.values()]

    def code_cache(self) -> CodeCache:
        """Where this host keeps versions' code ($LEDGER_HOME/code)."""
        if self._code is None:
            self._code = CodeCache(self.home / "code")
        return self._code

    def _dag_file(self, session: Session, dag_id: str) -> str:
        return self.facts.dag_file(session, dag_id)

    def _deadline_missed(self, session: Session, run: DagRun, spec: DagSpec, now: datetime) -> None:
        """Once per run: the event, and the DAG's on_deadline_missed callbacks."""
        assert spec.deadline is not None
        due = run.data_interval_end + timedelta(seconds=spec.deadline)
        loop_store.set_deadline_missed(session, run, now=now)
        events.record(session, "deadline_missed", at=now, actor=self.actor, dag_id=run.dag_id, run_id=run.id,
                      deadline=due.isoformat(), seconds_after_interval=spec.deadline, state=run.state)
        self.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id}: deadline {due.isoformat()} missed")
        picture = self.memory.pictures.get(run.id)  # the task states then (sla_miss_callback's blocking tasks)
        states = {key: TaskState(ti.state).value for key, ti in picture.tis.items()} if picture is not None else {}
        self.callbacks.request_run(session, run, "deadline_missed", now, deadline=due.isoformat(), state=run.state,
                                   task_states=states)

    def _set_run_state(self, session: Session, run: DagRun, state: RunState, now: datetime,
                       release: bool = False, reason: str | None = None) -> None:
        before = loop_store.set_run_state(session, run, state, now=now, actor=self.actor, release=release,
                                          reason=reason)
        if state in (RunState.SUCCESS, RunState.FAILED):
            self.callbacks.request_run(session, run, "run_success" if state == RunState.SUCCESS else "run_failure",
                                        now, state=state.value, reason=reason)
        self.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id} ({run.run_type}): {before} → {state.value}")

