"""LocalExecutor: a pool of long-lived worker processes, each forking one child per try.

A worker is forked from the scheduler once (multiprocessing, "fork" context), so a try costs a fork, not
a fresh interpreter. For each WorkItem a worker imports the DAG file (cached per file and mtime, before
forking, so the child inherits the module), forks a child that runs the try in its own process group,
reports "started" with the child's pid at once, waits on a pidfd (woken the moment the child exits), kills
the child's whole process group when the execution timeout passes, and reports "finished".

Processes never outlive the scheduler: workers get SIGTERM from the kernel when the scheduler dies
(PR_SET_PDEATHSIG) and answer it by SIGKILLing their running try's process group before exiting, and a
try's child gets SIGKILL when its worker dies. When a try's child exits, whatever it left running in its
process group is killed too.

start() must be called from a thread that lives as long as the executor (normally the main thread): the
kernel's parent-death signal fires when the creating *thread* ends.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from scheduler import task_runner
from scheduler.executors.base import Executor, TaskEvent, WorkItem

UNRESPONSIVE_MARGIN = 30.0  # seconds past the import timeout before a worker that never said "started" is killed

_current: task_runner.RunningTry | None = None  # in a worker: the try it is watching


def _on_terminate(signum: int, frame: object) -> None:
    """SIGTERM in a worker (sent by terminate() or by the kernel when the scheduler died): take the running
    try's process group down with us."""
    running = _current
    if running is not None:
        running.kill()
    os._exit(128 + signum)


def _worker_main(conn: Connection, parent_pid: int, close_fds: list[int], import_timeout: float | None) -> None:
    global _current
    task_runner.set_parent_death_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _on_terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the scheduler, which shuts us down
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    if os.getppid() != parent_pid:  # the scheduler died before prctl took effect
        return
    for fd in close_fds:  # the scheduler's ends of the other workers' pipes
        with contextlib.suppress(OSError):
            os.close(fd)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        task_runner.prepare(item, import_timeout=import_timeout)
        running = task_runner.fork_try(item, close_fds=[conn.fileno()])
        _current = running
        task_runner.forget_prepared()
        conn.send(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="started",
                            at=running.started_at, pid=running.pid))
        outcome = running.wait()
        assert outcome is not None
        _current = None
        conn.send(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="finished", at=outcome.at,
                            state=outcome.state, pid=running.pid, reason=outcome.reason))


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection
    item: WorkItem | None = None
    pid: int | None = None  # the running try's child (and process group) once "started" arrived
    assigned_at: float = 0.0  # time.monotonic()
    dead: bool = False
    events: list[TaskEvent] = field(default_factory=list)

    @property
    def sentinel(self) -> int:
        return int(self.process.sentinel)


class LocalExecutor(Executor):
    """`parallelism` long-lived worker processes; one try at a time each."""

    def __init__(self, parallelism: int, *, import_timeout: float | None = task_runner.DEFAULT_IMPORT_TIMEOUT,
                 ) -> None:
        super().__init__(parallelism)
        self.import_timeout = import_timeout
        self._ctx = multiprocessing.get_context("fork")
        self._workers: list[_Worker] = []
        self._started = False
        self._ending = False
        self._spawned = 0

    # -- workers --------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        ours, theirs = self._ctx.Pipe(duplex=True)
        others = [w.conn.fileno() for w in self._workers if not w.conn.closed]
        self._spawned += 1
        process = self._ctx.Process(target=_worker_main, args=(theirs, os.getpid(), others, self.import_timeout),
                                    name=f"ledger-worker-{self._spawned}", daemon=True)
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        self._workers.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        """Forget a dead worker: close its pipe, reap it."""
        with contextlib.suppress(ValueError):
            self._workers.remove(worker)
        with contextlib.suppress(OSError):
            worker.conn.close()
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=1)
        with contextlib.suppress(ValueError):
            worker.process.close()

    def start(self) -> None:
        if self._started:
            raise RuntimeError("LocalExecutor already started")
        self._started = True
        self._ending = False
        for _ in range(self.parallelism):
            self._spawn()

    # -- the interface --------------------------------------------------------------------------
    def open_slots(self) -> int:
        if not self._started or self._ending:
            return 0
        return sum(1 for w in self._workers if w.item is None and not w.dead)

    def submit(self, item: WorkItem) -> None:
        if not self._started or self._ending:
            raise RuntimeError("LocalExecutor is not accepting work (not started, or ending)")
        if item.ti_id in self.in_flight():
            raise ValueError(f"task instance {item.ti_id} is already in flight")
        for _ in range(2):  # a worker found dead on send is replaced, and the item goes to the new one
            worker = next((w for w in self._workers if w.item is None and not w.dead), None)
            if worker is None:
                raise RuntimeError("no open slot: check open_slots() before submit()")
            try:
                worker.conn.send(item)
            except (OSError, ValueError):
                worker.dead = True
                self._retire(worker)
                self._spawn()
                continue
            worker.item = item
            worker.pid = None
            worker.assigned_at = time.monotonic()
            return
        raise RuntimeError("could not hand the work item to a worker")

    def _read(self, worker: _Worker, out: list[TaskEvent]) -> None:
        """Everything a worker has sent so far; marks it dead on EOF."""
        while not worker.dead:
            try:
                if not worker.conn.poll():
                    return
                event = worker.conn.recv()
            except (EOFError, OSError):
                worker.dead = True
                return
            if not isinstance(event, TaskEvent) or worker.item is None or event.ti_id != worker.item.ti_id:
                continue  # a late message about a try already given up on
            if event.kind == "started":
                worker.pid = event.pid
            else:
                worker.item = None
                worker.pid = None
            out.append(event)

    @staticmethod
    def _stop(workers: list[_Worker]) -> None:
        """Kill workers and their running tries: SIGTERM first (a worker then SIGKILLs its try's process group,
        even one whose "started" we have not read yet), SIGKILL for any that do not go at once."""
        for worker in workers:
            if worker.pid is not None:
                task_runner.kill_group(worker.pid)
            if worker.process.is_alive():
                worker.process.terminate()
        deadline = time.monotonic() + 1.0
        for worker in workers:
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()

    def _bury(self, worker: _Worker, reason: str, out: list[TaskEvent], *, replace: bool) -> None:
        """A worker died (or is being killed): fail its try, kill the try's process group, maybe replace it."""
        self._stop([worker])
        if worker.item is not None:
            out.append(TaskEvent(ti_id=worker.item.ti_id, try_number=worker.item.try_number, kind="finished",
                                 at=time.time(), state="failed", pid=worker.pid, reason=reason))
            worker.item = None
        self._retire(worker)
        if replace:
            self._spawn()

    def _collect(self, timeout: float = 0) -> list[TaskEvent]:
        out: list[TaskEvent] = []
        if not self._workers:
            return out
        by_handle: dict[Any, _Worker] = {}
        for worker in self._workers:
            by_handle[worker.conn] = worker
            by_handle[worker.sentinel] = worker
        ready = multiprocessing.connection.wait(list(by_handle), timeout=timeout)
        for handle in ready:
            worker = by_handle[handle]
            if handle is worker.conn:
                self._read(worker, out)
            else:
                self._read(worker, out)  # what it said before it died comes first
                worker.dead = True
        now = time.monotonic()
        limit = (self.import_timeout or task_runner.DEFAULT_IMPORT_TIMEOUT) + UNRESPONSIVE_MARGIN
        for worker in list(self._workers):
            if worker.dead:
                self._bury(worker, "worker died", out, replace=not self._ending)
            elif worker.item is not None and worker.pid is None and now - worker.assigned_at > limit:
                self._bury(worker, f"worker unresponsive for {limit:.0f} s before starting the try", out,
                           replace=not self._ending)
        return out

    def drain(self) -> list[TaskEvent]:
        if not self._started:
            return []
        return self._collect(0)

    def wait_handles(self) -> list[Any]:
        handles: list[Any] = []
        for worker in self._workers:
            handles.append(worker.conn)
            handles.append(worker.sentinel)
        return handles

    def in_flight(self) -> set[int]:
        return {w.item.ti_id for w in self._workers if w.item is not None}

    def end(self, grace: float) -> list[TaskEvent]:
        if not self._started:
            return []
        self._ending = True
        events: list[TaskEvent] = []
        until = time.monotonic() + max(0.0, grace)
        while any(w.item is not None for w in self._workers):
            remaining = until - time.monotonic()
            if remaining <= 0:
                break
            events.extend(self._collect(min(remaining, 0.5)))
        events.extend(self._collect(0))
        busy = [w for w in self._workers if w.item is not None]
        self._stop(busy)
        for worker in busy:
            self._bury(worker, "stopped by shutdown", events, replace=False)
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        deadline = time.monotonic() + 2.0
        for worker in self._workers:
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
        for worker in list(self._workers):
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=1)
            self._retire(worker)
        self._workers.clear()
        self._started = False
        return events
