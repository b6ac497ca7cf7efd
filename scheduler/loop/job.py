"""DagRunJob: the one loop shared by SchedulerJob and BackfillJob.

    ┌─> parse DAG files ─> act on signals ─> drain the executor ─> one transaction ─> after the commit ─┐
    └────────────────────────────── sleep until something happens ───────────────────────────────────────┘

The loop's transaction, in order (each step in the module named after it):
  1. notice other processes' writes (scheduler/loop/others_writes.py): another process wrote, or the full pass is
     due, and every held run is read again;
  2. record what the executor reported (scheduler/loop/outcome_recording.py): tries started and ended, what each
     becomes by the pure rule (ledger/core/outcomes.py), what their reports hold (values, rendered templates,
     lineage, outlets, remote logs); a dead job's tries the executor looked for, adopted or lost (adoption.py);
  3. decide the runs (scheduler/loop/run_processing.py; skipped while only starts came in and every worker is
     busy): stop the tries a request asked to stop (scheduler/loop/stop_requests.py), create due runs
     (SchedulerJob), claim runs (scheduler/loop/claims.py), process the held runs: the pure planner decides from the
     pictures the job remembers (scheduler/loop/memory.py), the job writes its decisions through guarded
     transitions and queues ready task instances (scheduler/loop/queueing.py) within parallelism, max_active_runs,
     max_active_tasks and pools;
  4. callbacks due (scheduler/callbacks/pending.py), the job's heartbeat, task-state signals;
  5. verify mode: what the job remembers equals what the database holds.
Each step writes to the database and says in the transaction's effects (scheduler/loop/effects.py) what the job
takes once it has committed (tries to follow or not, a dead job's tries for the executor to look for before the
next loop, stop reasons, signals sent, lines to print and to add to tries' logs, what it saw of others' writes);
then callbacks are started, tries handed to the executor, doorbells rung. The loop, its sleep and its shutdown:
scheduler/loop/life_cycle.py.

Steps that need not run every loop have a cadence (scheduler/loop/cadence.py): parsing, run creation and the signal
index (SchedulerJob), claiming, the full pass, the heartbeat, callbacks, the --stop-queued pauses. Each
transaction is short, executors never write to the database, and a failed transaction leaves the job's memory
as it was (its effects are dropped; its caches, checked in verify mode, are read again). Subclasses say which
runs to collect and may create runs.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.infra.clock import Clock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.callbacks.pending import CallbackRequests
from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem
from ledger.scheduler.loop import adoption, life_cycle, outcome_recording, run_processing
from ledger.scheduler.loop.after_commit import tell_log
from ledger.scheduler.loop.cadence import Cadence, Heartbeat
from ledger.scheduler.loop.claims import RunClaims
from ledger.scheduler.loop.code_cache import CodeCache
from ledger.scheduler.loop.effects import Effects
from ledger.scheduler.loop.faults import Backoff
from ledger.scheduler.loop.job_connection import JobConnection
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.loop.memory import HeldRunsMemory, MemoryMismatch
from ledger.scheduler.loop.metrics import SchedulerMetrics
from ledger.scheduler.loop.others_writes import OthersWrites, Seen
from ledger.scheduler.loop.queueing import InFlight
from ledger.scheduler.loop.run_facts import RunFacts
from ledger.scheduler.loop.stop_requests import StopRequests
from ledger.scheduler.signals.task_state_signals import TaskStateSignals
from ledger.scheduler.signals.wakeup import DatabaseWakeup, Wakeup
from ledger.services.log_store import RemoteLogStore
from ledger.services.signal_delivery import open_doorbell, ring
from ledger.store import events
from ledger.store import jobs as job_store
from ledger.store import runs as run_store
from ledger.store.backfills import finish_backfill
from ledger.store.db import reader, shares_one_connection

RunLogger = Callable[[str], None]


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
    effects: Effects = field(default_factory=Effects)  # what the transaction under way changes, once committed
    doorbells: bool = False  # a committed transaction sent task-state signals: ring the doorbells
    callbacks: CallbackRequests = field(init=False)  # requested, claimed, run and recorded on their own cadence
    heartbeat: Heartbeat = field(init=False)
    connection: JobConnection = field(init=False)
    _inflight: dict[int, InFlight] = field(default_factory=dict)  # the tries handed to the executor, by ti id
    _unrecorded: list[TaskEvent] = field(default_factory=list)  # drained, not yet committed (a fault rolled back)
    _held_since: float | None = None  # time.monotonic() of the first start held back in _unrecorded
    _offered: list[adoption.Offer] = field(default_factory=list)  # a dead job's tries: the next loop settles them
    _reconcile: bool = False  # a transaction failed: its commit may have gone through unseen
    _timelines: int = 0  # transactions of this job that locked a DAG's timeline (they may have changed its runs)
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
        self.heartbeat = Heartbeat(s.heartbeat_interval, lock_timeout=s.lock_timeout)
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

    def in_loop(self, session: Session, now: datetime, report: LoopReport) -> None:
        """A subclass's step in every loop's transaction, after the runs are decided."""

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
        with self.sessions.begin() as session:  # (the job's row is its first heartbeat)
            self.job_id = job_store.start_job(session, self.job_type, now=self.heartbeat.read_time(self.clock.now)).id
            identity = self.facts.identity_of(session).identity
        life_cycle.claim_logs(self, identity)
        self.actor = f"{self.job_type.lower()}:{self.job_id}@{socket.gethostname()}"
        if self.wakeup is None:
            self.wakeup = DatabaseWakeup(self.engine, doorbell=open_doorbell(self.engine, self.home)) \
                if self.settings.signal_wakeup else DatabaseWakeup(self.engine, self.settings.poll_interval)
        self.executor.use_metrics(self.metrics)
        self.executor.use_say(lambda line: self.say(line))  # (the say of the moment: see transaction)
        self.executor.start()
        self.heartbeat.started(self.executor.hold_until)  # (its next is due after heartbeat_interval)

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
        """The loop of a job whose start() has been called (scheduler/loop/life_cycle.py)."""
        life_cycle.run_started(self, num_runs=num_runs, exit_when_idle=exit_when_idle)

    def sleep(self, report: LoopReport) -> None:
        """Wait until something happens, or the next thing due (scheduler/loop/life_cycle.py)."""
        life_cycle.sleep(self, report)

    @contextlib.contextmanager
    def transaction(self, *, loop: bool = False) -> Iterator[Session]:
        """One transaction of this job (`loop`: a loop's). What it changes in the job (its effects, including what
        it says: a run's or try's new state) is taken once it has committed. When it fails (a database fault), its
        effects are dropped and the job forgets its caches, so that the next try decides again from what the
        database holds: nothing has to be put back."""
        effects = self.effects = Effects(task_states=TaskStateSignals(self.settings.task_state_signals))
        outer = self.say
        self.say = effects.say
        try:
            with self.connection.begin() as session:
                yield session
                if run_store.timeline_locked(session):
                    self._timelines += 1  # (only ever makes a kept read be read again: counted before it commits)
            own = events.written_ids(session)  # (the events are inserted as the transaction commits)
            if loop and effects.seen is not None:
                effects.seen = self.watch.loop_done(effects.seen, own)
            elif own:
                self.watch.side_transaction()  # the next loop reads the events
        except BaseException:
            self.say = outer
            self.watch.side_transaction()
            self.forget(reason="a transaction failed")
            self.claims.soon()
            self._reconcile = True
            raise
        self.say = outer
        self._take(effects)

    def _take(self, effects: Effects) -> None:
        """A transaction committed: the job takes what it changed (scheduler/loop/effects.py)."""
        for ti_id in effects.ended:
            self._inflight.pop(ti_id, None)
        self._inflight.update(effects.queued)  # (after the ends: a try that ended may have been queued again)
        self._offered += effects.offered
        self.executor.follow(effects.follow)  # (adopted tries)
        for ti_id in effects.stops_told:
            self.stops.killed.pop(ti_id, None)
        self.stops.reasons.update(effects.stop_reasons)
        if effects.seen is not None:
            seen = self.watch.committed(effects.seen)
            if isinstance(self.wakeup, DatabaseWakeup):
                self.wakeup.seen = seen  # its own events do not wake it
        self.doorbells = self.doorbells or effects.task_states.to_ring()
        for line in effects.said:
            self.say(line)
        for path, at, text in effects.log_notes:
            tell_log(path, at, text)

    def wait_handles(self) -> list[Any]:
        return list(self.executor.wait_handles())

    def shutdown(self) -> None:
        """Stop taking work, let running tries finish within the grace period, release the locks
        (scheduler/loop/life_cycle.py)."""
        life_cycle.shut_down(self)

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
        self.executor.ready()  # (once: its first worker started as the DAGs folder was read, decision 0361)
        self.executor.submit_all(self.handle_signals(report))  # a signal's START reaches a worker before the rest
        drained = self._unrecorded + self.executor.drain()
        self._unrecorded = drained  # until the transaction that records them commits
        self.callbacks.poll()
        if outcome_recording.hold_starts(self, drained, report):
            return report
        drained = outcome_recording.with_reports_kept(self, drained)
        looked = adoption.find(self.executor, self._offered[:])  # (I/O: before the transaction that settles them)
        with self.transaction(loop=True) as session:
            # the clock is read once the transaction holds the database (SQLite: its write lock), so what it writes is
            # stamped after every commit it can see (a cancel committed meanwhile: backfill_store.restore_after_cancel)
            now = self.heartbeat.read_time(self.clock.now)
            work, to_call = self._loop_transaction(session, drained, looked, now, report)
        self.heartbeat.committed(self.executor.hold_until)  # (tries run on its word: decision 0349)
        del self._offered[:len(looked.offers)]
        self._unrecorded = []
        self._held_since = None
        self.callbacks.recorded()
        self.callbacks.start(to_call)
        self.executor.submit_all(work)  # the tries first: ringing doorbells can wait a few microseconds
        if self.doorbells:  # such a loop recorded outcomes or marked tasks: it loops again unwoken
            self.doorbells = False
            ring(self.engine, self.home, skip=self.wakeup.doorbell if isinstance(self.wakeup, DatabaseWakeup) else None)
        if self.wakeup is not None and not isinstance(self.wakeup, DatabaseWakeup):
            self.wakeup.settle()
        return report

    def _loop_transaction(self, session: Session, drained: list[TaskEvent], looked: adoption.Looked, now: datetime,
                          report: LoopReport) -> tuple[list[WorkItem], list[tuple[int, dict[str, Any]]]]:
        """The loop's one transaction, step by step (see the module docstring): the tries to hand to the executor
        and the callbacks to start, once it has committed."""
        # only tries' starts came in while every worker is busy: nothing could be queued, so only record them
        only_starts = bool(drained) and all(ev.kind == "started" for ev in drained) and self.executor.open_slots() == 0
        seen = self.effects.seen = self.watch.look(session, self.connection.kept)
        if seen.full_pass:
            run_processing.read_everything_again(self, session)
            only_starts = only_starts or self.stopping  # (a subclass saw it must stop: only record what ended)
        elif seen.quiet_pass:
            self.memory.decide_again()  # nobody else wrote: decided again from the pictures (decision 0303)
        report.outcomes = outcome_recording.record(self, session, drained, now)
        report.outcomes += run_processing.settle_offers(self, session, looked, now)  # (a dead job's tries)
        adoption.record_remarks(session, self.executor, actor=self.actor, now=now)
        if self._reconcile:
            outcome_recording.fail_unsubmitted(self, session, now)
        work = [] if only_starts else run_processing.decide_runs(self, session, now, report)
        report.decided = not only_starts
        report.callbacks = len(self.callbacks.results)
        to_call = self.callbacks.due(session, now, job_id=self.job_id, actor=self.actor, locate=self._locate,
                                     quiet=self.watch.quiet_mark())
        report.callbacks += len(to_call)
        self.in_loop(session, now, report)
        if self.heartbeat.due():
            job_store.heartbeat(session, self.job_id, now=now)
            self.heartbeat.done()
        self.effects.task_states.flush(session, now, self.actor)
        if self.settings.verify_memory:
            self._verify_memory(session, seen)
        return work, to_call

    # -- callbacks -----------------------------------------------------------------------------
    def _locate(self, session: Session, dag_id: str, version: str) -> tuple[str, str | None]:
        """Where a version's code is on this host: (the DAG file, the snapshot's root, or None: the DAGs folder)."""
        code = self.code_cache().locate(session, dag_id, version)
        return (code.fileloc, code.root) if code is not None else (self.facts.dag_file(session, dag_id), None)

    def quiet_mark(self, session: Session) -> tuple[int, int] | None:
        """A mark that stays the same while the database holds only what this job wrote and no transaction of the job
        locked a DAG's timeline: a read kept with it is still what the database holds (decision 0309). None: read
        again (PostgreSQL; this transaction locked a timeline; a transaction that is not a loop's, which has not
        looked for others' writes since the last loop: a START's fast path, SchedulerJob.handle_signals)."""
        quiet = self.watch.quiet_mark()
        if quiet is None or self.effects.seen is None or run_store.timeline_locked(session):
            return None
        return quiet, self._timelines

    def requeues_unstarted(self) -> bool:
        """Whether a try that never started gets a new try (not when the job stops because its work was
        cancelled: a cancelled backfill)."""
        return True

    def forget(self, run_id: int | None = None, reason: str = "read again") -> None:
        """What the job remembers of a held run (of every run: None) no longer holds: the next loop reads it
        from the database and decides it again."""
        self.memory.forget(run_id, reason)
        if run_id is None:
            self.facts.forget()
            self.claims.forget()
            self.stops.read_again()

    def _verify_memory(self, session: Session, seen: Seen) -> None:
        """Verify mode: at the end of a loop's transaction, what the job remembers of its held runs must be what
        the database holds (on SQLite nobody else can write meanwhile; on PostgreSQL a difference that another
        process's event explains is what the next loop reads again)."""
        found = (self.memory.differences(session) + self.facts.prior_differences(session)
                 + self.facts.date_differences(session)
                 + self.facts.active_differences(session, self.quiet_mark(session)))
        if found and not self._serial and self.watch.others_since(session, seen):
            return
        if found:
            raise MemoryMismatch("; ".join(found[:5]))

    def code_cache(self) -> CodeCache:
        """Where this host keeps versions' code ($LEDGER_HOME/code)."""
        if self._code is None:
            self._code = CodeCache(self.home / "code")
        return self._code
