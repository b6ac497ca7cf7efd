"""SchedulerJob: the DagRunJob that parses the DAGs folder, creates due runs, and collects every
unfinished run that no live job holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ledger.models import DagRun
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.loop.cadence import Cadence
from ledger.scheduler.loop.dataset_runs import QuietConsumers, create_dataset_runs
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.loop.memory import MemoryMismatch
from ledger.scheduler.loop.queueing import queue_tries
from ledger.scheduler.loop.scheduling import DueCache, SchedulingReads, create_due_runs
from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager, processor_log
from ledger.scheduler.parsing.dag_sync import known_dependencies, known_hashes, known_owners, sync_parsed
from ledger.scheduler.signals import signal_actions
from ledger.services.signal_delivery import ring


@dataclass
class SchedulerJob(DagRunJob):
    dags_folder: Path = Path(".")
    job_type: str = "SchedulerJob"
    manager: DagFileProcessorManager | None = None
    _parsed_once: bool = False
    # due runs are created every scheduling_interval, or at once after DAG files changed or catch-up continues
    _scheduling: Cadence = field(init=False)
    _due: DueCache = field(default_factory=DueCache)  # DAGs with nothing due until their next interval ends
    _reads: SchedulingReads = field(init=False)  # the last pass's schedulable DAGs and resume points (SQLite)
    _quiet_consumers: QuietConsumers = field(default_factory=QuietConsumers)  # consumers with nothing to create
    # consumer runs are looked for with due runs, and at once (alone) after a dataset event
    _consumers: Cadence = field(init=False)
    _unsynced: list[Any] = field(default_factory=list)  # parse results a database fault kept from being stored
    _signal_index: signal_actions.Index | None = None  # which tasks listen to which signal keys
    _index_cadence: Cadence = field(init=False)  # rebuilt every scheduling_interval, and when DAGs change
    _signal_skip: Cadence = field(init=False)  # with no listener, the cursor is moved past other signals this often
    _indexed_at: int | None = None  # the quiet mark when the loop last rebuilt an empty index (in_loop)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._scheduling = Cadence(self.settings.scheduling_interval)
        self._consumers = Cadence(self.settings.scheduling_interval)
        self._index_cadence = Cadence(self.settings.scheduling_interval)
        self._signal_skip = Cadence(self.settings.poll_interval)
        self._reads = SchedulingReads(verify=self.settings.verify_memory)

    def start(self) -> None:
        super().start()
        s = self.settings
        self.manager = DagFileProcessorManager(
            self.dags_folder, parsing_processes=s.parsing_processes,
            min_file_process_interval=s.min_file_process_interval, dag_dir_list_interval=s.dag_dir_list_interval,
            file_timeout=s.dag_file_processor_timeout, log_file=processor_log(self.logs_folder))
        with self.sessions.begin() as session:
            self.manager.seed(known_hashes(session), known_owners(session), known_dependencies(session))
        self.manager.start()

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            if self.manager is not None:
                self.manager.stop()

    def refresh_dags(self) -> bool:
        assert self.manager is not None
        if not self._parsed_once:
            results = self.manager.parse_all(timeout=self.settings.dag_file_processor_timeout * 2)
            self._parsed_once = True
        else:
            results = self.manager.poll()
        self.metrics.parsed(results)
        results = self._unsynced + results
        if not results:
            return False
        self._unsynced = results
        sync_parsed(self.sessions, results, now=self.clock.now(), actor=self.actor)
        self._unsynced = []
        if self.manager.folder_error is not None:
            self.say(f"warning: {self.manager.folder_error}; its DAGs stay as they were")
        self.facts.filelocs.clear()  # (DAG files were parsed again: each DAG's file is read again when needed)
        self._reads.forget()
        self._scheduling.soon()
        self._index_cadence.soon()
        return True

    def create_runs(self, session: Session, now: datetime) -> int:
        created: list[DagRun] = []
        every = self._scheduling.due()
        dags = None
        if every:
            self._scheduling.done()
            dags, resume = self._reads.read(session, self.quiet_mark(session))  # read once for both passes
            created = create_due_runs(session, now=now, actor=self.actor, cache=self._due, dags=dags, resume=resume)
            if created:
                self._scheduling.soon()  # catch-up may continue
        if every or self._consumers.due():  # after an event, only its consumers are looked at (QuietConsumers)
            self._consumers.done()
            created += create_dataset_runs(session, now=now, actor=self.actor, cache=self._quiet_consumers,
                                           only_news=not every, dags=dags)
        for run in created:
            self.metrics.runs_created.labels(run.run_type).inc()
            self.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id} created ({run.run_type})")
        return len(created)

    def datasets_changed(self) -> None:
        """A try this job recorded made dataset events: its consumer runs are created in this loop's transaction
        (run creation comes after the outcomes are recorded), claimed and started there, and their first tasks
        queued, so that they reach a worker when the transaction commits."""
        self._consumers.soon()

    def others_wrote(self, session: Session) -> None:
        if self._quiet_consumers.news(session):  # another job (a backfill, dags test --record) recorded events
            self._consumers.soon()

    def handle_signals(self, report: LoopReport) -> list[WorkItem]:
        """Read new signals and act on them in one short transaction: a START that makes a task instance
        of a run this job holds ready on its own (a root task: ledger.core.dependencies.ready_alone) queues it
        right there, so the try is handed to a worker before the rest of the loop runs (the fast path from
        `send` to a running task). Everything else a signal changed is decided by the loop that follows."""
        if self._signal_index is not None and not self._signal_index and not self._index_cadence.asked:
            return []  # no task listens: the index is rebuilt and the cursor moved in the loop's transaction (in_loop)
        stale = self._signal_index is None or self._index_cadence.due()
        if not stale and not self._signal_index and not self._signal_skip.due():
            return []
        with self.transaction() as session:
            now = self.clock.now()  # once the transaction holds the database, as the loop's (DagRunJob._loop_once)
            if stale:  # which tasks listen to which keys: rebuilt when DAGs change, and at least every second
                self._signal_index = signal_actions.listeners(session, self.code_cache())  # (pausing a DAG
                # from the CLI changes it)
                self._index_cadence.done()
                self._indexed_at = None
            if not self._signal_index and not self._signal_skip.due():
                return []
            self._signal_skip.done()
            found = signal_actions.process_signals(session, now=now, actor=self.actor, index=self._signal_index,
                                                   holder=self.job_id)
            work = queue_tries(self, session, list(found.ready.values()), now, report, known=found.signals,
                               read_pools=True) if found.ready else []
        self.metrics.signals.inc(found.actions)
        for run in found.created:
            self.metrics.runs_created.labels(run.run_type).inc()
            by = (run.conf or {}).get("signal", {})
            self.say(f"{run.dag_id} {run.logical_date.isoformat()} run {run.id} created ({run.run_type}, "
                     f"by signal {by.get('key')} v{by.get('version')})")
        if found.created:
            self.claim_soon()
            self.forget(reason="runs created")  # a new run may have become a held run's previous one
        if found.actions:
            ring(self.engine, self.home)  # wake the jobs that run those task instances (SQLite; NOTIFY did on PG)
        for run_id in found.runs | {run.id for run in found.created}:
            report.runs_changed += 1
            self.forget(run_id)
        return work

    def in_loop(self, session: Session, now: datetime, report: LoopReport) -> None:
        """While no task listens to signals, the index's rebuild every scheduling_interval and the cursor's move past
        the signals sent meanwhile are done in the loop's transaction, not in one of their own before it. When a
        task listens again (a DAG unpaused by another process), the next loop handles signals before the rest."""
        if self._signal_index is None or self._signal_index:
            return
        if self._index_cadence.due():
            # the index is read from the DAGs: while the quiet mark stays that of the last rebuild (nobody else
            # committed, decision 0309) and parsing asked for none, it is still empty (verify mode reads it again)
            mark = self.watch.quiet_mark()
            if self._index_cadence.asked or mark is None or mark != self._indexed_at:
                self._signal_index = signal_actions.listeners(session, self.code_cache())
                self._indexed_at = mark
            elif self.settings.verify_memory and signal_actions.listeners(session, self.code_cache()):
                raise MemoryMismatch("a task listens to signals though nobody else wrote since the index was empty")
            self._index_cadence.done()
            if self._signal_index:
                report.again = True
                return
        if self._signal_skip.due():
            self._signal_skip.done()
            signal_actions.process_signals(session, now=now, actor=self.actor, index=self._signal_index,
                                           holder=self.job_id)

    def busy(self) -> bool:
        return self.manager is not None and self.manager.busy()

    def wait_handles(self) -> list[Any]:
        handles = super().wait_handles()
        if self.manager is not None:
            handles.extend(self.manager.wait_handles())
        return handles
