"""The executor interface: the scheduler hands over work items and drains task events.

Executors never touch the database: the job that holds a run's lock writes every state change of
its task instances, so one writer owns each run. The local executors' workers die with the process that started
them; the CeleryExecutor's run on other hosts and outlive it (adopt(), left_running()).
"""

from __future__ import annotations

import abc
import contextlib
import copyreg
import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ledger.scheduler.runtime.try_outcome import EXIT_CODES
from ledger.scheduler.runtime.try_report import ReportFile, TryReport


@dataclass(frozen=True)
class WorkItem:
    """One try of one task instance."""

    ti_id: int
    run_id: int
    dag_id: str
    task_id: str
    try_number: int
    fileloc: str  # the DAG file that defines the task: inside the run's version's code snapshot
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    dag_version: str
    run_type: str
    log_path: str  # $LEDGER_HOME/logs/<dag>/<run>/<task>/try_<n>.log
    execution_timeout: float | None = None  # seconds; the try is killed and fails when exceeded
    conf: dict[str, Any] = field(default_factory=dict)
    priority_weight: int = 1
    signal: dict[str, Any] | None = None  # the signal that started this try (signal-driven tasks): Signal.as_json()
    code_root: str | None = None  # the version's snapshot folder (scheduler/loop/code_cache.py): first on sys.path
    code_captured: bool = True  # False: a version from before helper modules were captured
    xcom: dict[str, dict[str, Any]] = field(default_factory=dict)  # values the run's tasks passed on so far
    prev_interval: tuple[str, str] | None = None  # the data interval of the run's previous run (templates)
    prev_success: tuple[str, str, str | None, str | None] | None = None  # its prior successful run's (templates)
    map_index: int = -1  # instance i of a mapped task (ledger/core/mapping.py); -1: not mapped
    queue: str = "default"  # the task's queue: which Celery workers may run the try (the other executors ignore it)
    # a dataset-triggered run's consumed events, by dataset (context.triggering_dataset_events)
    triggering_events: dict[str, list[dict[str, Any]]] | None = None
    # the events of the task's inlets the try reads, by inlet (`dataset:KEY`, `alias:NAME`): context.inlet_events
    inlet_events: dict[str, list[dict[str, Any]]] | None = None
    database: str = ""  # what its task id carries of the database's identity (ledger/infra/workers.py task_id)
    max_tries: int | None = None  # how many tries its task instance may have in all (templates' ti.max_tries)
    run_started: str | None = None  # when its run started (ISO; templates' dag_run.start_date)


def utc_datetime(year: int, month: int, day: int, hour: int, minute: int, second: int, microsecond: int) -> datetime:
    """A UTC datetime from its fields: how `dumps` sends one."""
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def _reduce_datetime(value: datetime) -> Any:
    if value.tzinfo is UTC and not value.fold:
        return utc_datetime, (value.year, value.month, value.day, value.hour, value.minute, value.second,
                              value.microsecond)
    return value.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


class _Pickler(pickle.Pickler):
    # a UTC datetime (a work item has three) pickles as its fields: pickle's own way costs about 8 us each
    dispatch_table = {**copyreg.dispatch_table, datetime: _reduce_datetime}


def dumps(obj: Any) -> bytes:
    """`obj` pickled for a worker's pipe (Connection.send_bytes; the worker's Connection.recv loads it): what
    Connection.send would send, with UTC datetimes in fewer bytes and less time. Other datetimes (a pendulum
    DateTime, another zone) pickle as usual."""
    buffer = io.BytesIO()
    _Pickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


NEVER_STARTED_PREFIX = "never started: "  # a finished event's reason for a try that never began (no start)


@dataclass(frozen=True)
class TaskEvent:
    """Something that happened to a try: it started (with its pid) or it finished (with its state)."""

    ti_id: int
    try_number: int
    kind: Literal["started", "finished"]
    at: float  # wall-clock time.time() when it happened
    # for finished; lost: the try ended because the process running it died or was stopped with its job (a worker
    # that vanished, a shutdown's kill), not for anything the task did
    state: Literal["success", "failed", "skipped", "lost", "up_for_reschedule"] | None = None
    pid: int | None = None
    reason: str | None = None  # one line: "exit code 1", "timed out after 5.0 s", "worker died"
    # a try that ran on another host (CeleryExecutor): that host's (worker's) name
    host: str | None = None
    # for finished: the try's report, built where it ran (scheduler/runtime/try_report.py): what it passed on,
    # rendered, wrote, and a remote try's log. None: no report came back (it never started, its worker died with it,
    # the job decided its end). The event's state and reason are the executor's last word (a kill makes a failed
    # try's reason the kill's); the report's are the try's own account.
    report: TryReport | None = None


def ended_by_report(item: WorkItem, pid: int | None = None, *, not_before: float = 0.0) -> TaskEvent | None:
    """The end of a try that ran on this host and left its whole report beside its log (`<log>.report.json`) as its
    code ended, whatever became of its process afterwards (killed with its worker or its job): the report, taken (so
    that the try is recorded by it once), says how it ended. None: it left none (it never started, or was killed
    before its code ended): it is lost (decision 0298). A report that says it ended before `not_before` (when the
    executor asking started) is not this try's: one left by a database the same home had before, whose run ids
    began again at 1; it is taken and ignored."""
    left = ReportFile(item.log_path).take() if item.log_path else None
    if left is None or left.state not in EXIT_CODES or left.at < not_before:
        return None
    return _ended_by(item, left, pid)


def _ended_by(item: WorkItem, left: TryReport, pid: int | None) -> TaskEvent:
    """The end a try's report says, told in its log (the try could not say it)."""
    with contextlib.suppress(OSError), open(item.log_path, "a", encoding="utf-8") as log:
        log.write(f"[ledger] {datetime.now(UTC).isoformat(timespec='milliseconds')} outcome: {left.state}"
                  + (f" ({left.reason})" if left.reason else "")
                  + ", as the report it left when its code ended says (its worker or job died before it exited)\n")
    return TaskEvent(item.ti_id, item.try_number, "finished", left.at, left.state,  # type: ignore[arg-type]
                     pid, left.reason, report=left)




class Executor(abc.ABC):
    """Runs tries of task instances somewhere and reports what happened to them."""

    outlives_its_job = False  # its tries run on when the job that queued them dies (adopt(), left_running())

    def __init__(self, parallelism: int) -> None:
        if parallelism < 1:
            raise ValueError("parallelism must be >= 1")
        self.parallelism = parallelism

    @abc.abstractmethod
    def start(self) -> None: ...

    def ready(self) -> None:  # noqa: B027 (nothing to wait for unless an executor's start() returns early)
        """Wait until what start() started can take work (RuntimeError if it cannot start). An executor whose
        start() returns before that (the LocalExecutor's) waits by itself at its first submit() or drain()."""

    @abc.abstractmethod
    def open_slots(self) -> int:
        """How many more work items can be submitted now."""

    @abc.abstractmethod
    def submit(self, item: WorkItem) -> None: ...

    def submit_all(self, items: list[WorkItem]) -> None:
        """submit() each item, in order (an executor that sends items elsewhere sends a loop's items together)."""
        for item in items:
            self.submit(item)

    def hold_until(self, deadline: float) -> None:  # noqa: B027 (does nothing unless an executor needs it)
        """The job has written a heartbeat: the tries it runs on this host may run until `deadline`
        (time.monotonic()), after which another job may take its runs (decision 0349). Executors whose tries do not
        run on the job's word alone (a remote try holds a lease of its own) ignore it."""

    @abc.abstractmethod
    def drain(self) -> list[TaskEvent]:
        """Events that happened since the last call, without blocking (also runs housekeeping:
        detecting dead workers, which yields a finished/lost event with reason 'worker died')."""

    @abc.abstractmethod
    def wait_handles(self) -> list[Any]:
        """Objects that become readable when events arrive (for multiprocessing.connection.wait)."""

    def holds_events(self) -> bool:
        """Whether drain() has events this process made itself (an adopted try's end, a worker found dead as an item
        was sent to it, what a kill read from a worker): no handle of wait_handles() becomes readable for them, so
        the job must drain them before it sleeps on those handles."""
        return False

    @abc.abstractmethod
    def in_flight(self) -> set[int]:
        """ti ids submitted and not yet reported finished."""

    def kill(self, ti_id: int, reason: str) -> bool:
        """End a running try early (a STOP or RESTART signal): it is reported finished/failed with `reason`
        by a later drain(). False when this executor cannot (the try is not here, or it runs them inline)."""
        return False

    def use_metrics(self, metrics: Any) -> None:
        """The job's metrics (scheduler/loop/metrics.py), for an executor that reports some of its own (the others
        ignore them)."""
        return None

    def use_say(self, say: Callable[[str], None]) -> None:
        """The job's way of saying one line to its operator, for an executor that reports its faults and their
        recovery (the others say nothing)."""
        return None

    def find(self, tries: list[tuple[WorkItem, bool]]) -> dict[int, Any]:
        """Look for tries another job handed to this executor's kind of workers and that may still run there (its
        job died): (the try's work item, whether it was recorded started). Called outside any transaction; changes
        nothing in the database. Returns ti id -> what it found of each it could follow (for `follow`); the others
        are lost. Executors whose tries die with their job find only those that left their whole report on this
        host as their code ended (`EndedOnThisHost`): their end is that report."""
        return {}

    def follow(self, found: dict[int, Any]) -> None:
        """Follow the tries the job adopted, as if submitted here: what `find` found of each (once the adoption has
        committed; nothing when `found` is empty)."""
        return None

    def left_running(self) -> set[int]:
        """After end(): ti ids of tries that run on without this process (a job that takes their runs over adopts
        them), which the job must not record lost."""
        return set()

    def remarks(self) -> list[dict[str, Any]]:
        """Things that happened to tries which are no outcome but belong in the events (a refused redelivery):
        each an event's fields (kind, ti_id, try_number, reason...)."""
        return []

    @abc.abstractmethod
    def end(self, grace: float) -> list[TaskEvent]:
        """Take no more work; let running tries finish within `grace` seconds, then kill them
        (reported lost with reason 'stopped by shutdown'); stop workers; return the last events."""


class EndedOnThisHost(Executor):
    """An executor whose tries die with their job (LocalExecutor, SequentialExecutor): of the tries a dead job
    left, it finds those whose code ended and left its whole report on this host (decision 0298); its follow puts
    each one's end, that report, in `_pending`, the events its next drain() hands over."""

    _pending: list[TaskEvent]

    def holds_events(self) -> bool:
        return bool(self._pending)

    def find(self, tries: list[tuple[WorkItem, bool]]) -> dict[int, Any]:
        """The tries that left their whole report (read, left in place); the others are lost."""
        found: dict[int, Any] = {}
        for item, _started in tries:
            left = ReportFile(item.log_path).read() if item.log_path else None
            if left is not None and left.state in EXIT_CODES:
                found[item.ti_id] = (item, left)
        return found

    def follow(self, found: dict[int, Any]) -> None:
        """Each adopted try's end comes with the next drain(); its report is taken from this host, so that a later
        job does not record it again."""
        for item, left in found.values():
            ReportFile(item.log_path).remove()
            self._pending.append(_ended_by(item, left, None))
