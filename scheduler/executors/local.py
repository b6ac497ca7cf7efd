"""LocalExecutor: a pool of long-lived worker processes, each forking one child per try.

Workers start on demand (decision 0331): start() starts one (and returns at once: the first submit() or drain()
waits until it is ready, decision 0361), and submit() starts another only when an item
needs a slot and no worker is idle, up to `parallelism`. A worker that died is replaced the same way, when work
comes for it, except the last one: the executor always has a worker, started again at once. A worker lives until
the executor ends (or until it has run RECYCLE_AFTER tries: decision 0324; it is then sent no more items, and once
idle it is told to end and a successor starts on demand, decision 0332), so a try costs a fork,
never a fresh interpreter, and a scheduler that runs one try at a time has one worker. For each WorkItem
a worker imports the DAG file (cached per file and mtime, before forking, so the child inherits the
module), puts the try's code root and LEDGER_* variables in place (the child inherits them too: decision 0313), forks
a child that runs the try in its own process group, reports "started" with the child's pid
at once, waits on a pidfd (woken the moment the child exits), kills the child's whole process group when
the execution timeout passes, and reports "finished".

Spark tries are the exception: they run in the worker process itself, with a SparkSession the worker builds
on its first Spark try and keeps until it ends (a JVM-backed session does not survive a fork). Their
"started" and "finished" carry the worker's own pid; at the execution timeout their Spark jobs are
cancelled, and a try that still will not stop makes its worker report it "timed out" and exit, to be
replaced like any dead worker.

With `reuse_workers` (LEDGER_REUSE_WORKERS=true, `ledger scheduler --reuse-workers`) Python tries run in the
worker process too, in a thread, with no fork: per try this saves the fork and the child's start, and gives
up per-try isolation (module globals, os.environ, the working directory, threads and open files a task
leaves behind are seen by the next tries of that worker; see docs/scheduler.md). A Python try still running
at its execution timeout is failed at once and its worker exits (a thread cannot be stopped), to be replaced.
Bash tries still fork.

How workers are started (`start_method`):

* "exec" (default): each worker is a fresh, lean Python interpreter (started once) that imports only what
  running tries needs. Forking it per try is cheap because it is small. Measured on 2 cores, no-op tries
  with parallelism 2 from a scheduler process that had loaded the CLI and the database layer (~60 MB):
  about 290 tries/s with "exec" against about 140 tries/s with "fork", because a fork costs time in
  proportion to the memory of the process that forks.
* "fork": multiprocessing's "fork" context: a worker is a copy of the scheduler process, with everything
  it has loaded; worth it only when the scheduler is small.

Processes never outlive the scheduler: a worker gets SIGTERM from the kernel when the scheduler dies
(PR_SET_PDEATHSIG) and answers it by SIGKILLing its running try's process group before exiting; a try's
child gets SIGKILL when its worker dies. When a try's child exits, whatever it left running in its process
group is killed too. A try whose worker died (or whose scheduler died, and its workers with it) is lost unless its
code had ended and left its report (`<log>.report.json`): then it is recorded as the report says, by this executor
or by the next scheduler's, which adopts it (decision 0298).

A job that falls silent does not keep its tries running (decision 0349): each heartbeat it commits moves a deadline
its workers share (local_hold.py, hold_until()); past it, a worker starts nothing and kills the try it runs, which is
lost unless its code had ended, since another scheduler may take the job's runs once its lock times out.

start(), submit(), drain() and kill() (each may start a worker) must be called from a thread that lives as long
as the executor (normally the main thread): the kernel's parent-death signal fires when the *thread* that started
the worker ends.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal, Protocol

from ledger.core.errors import WorkerNotStarted
from ledger.scheduler.executors import local_hold
from ledger.scheduler.executors.base import (
    NEVER_STARTED_PREFIX,
    EndedOnThisHost,
    TaskEvent,
    WorkItem,
    dumps,
    ended_by_report,
)
from ledger.scheduler.executors.try_pid import TryPid
from ledger.scheduler.runtime import in_process, try_plan, try_process, try_report
from ledger.scheduler.runtime.parent_death import die_with_parent
from ledger.scheduler.runtime.try_outcome import Outcome

StartMethod = Literal["exec", "fork"]

READY = "ready"
CANCEL = "cancel"  # (CANCEL, ti id): take an item sent ahead out before it starts
# (WITHDRAW, ti id): give an item that waits back, for a worker that fell idle (decision 0341); answered
# (WITHDRAWN, ti id) if it had not started, else not at all (its "started" comes instead)
WITHDRAW = "withdraw"
WITHDRAWN = "withdrawn"
NEVER_STARTED = f"{NEVER_STARTED_PREFIX}cancelled while it waited for its worker"
START_TIMEOUT = 60.0  # seconds for ready() to see the first worker ready
EXIT_RETIRED = 70  # a worker exits with this after a Spark try that would not stop, or whose JVM died
EXIT_SILENT_JOB = 71  # a worker exits with this when its job fell silent while a try ran in the worker's process
# a try its worker would not start, or killed, because the job had written no heartbeat for too long (decision 0349)
SILENT_JOB = ("its scheduler wrote no heartbeat for two thirds of LEDGER_LOCK_TIMEOUT, after which another "
              "scheduler may take its run")
SILENT_JOB_KILLED = f"killed by its worker: {SILENT_JOB}"
SILENT_JOB_NEVER_STARTED = f"{NEVER_STARTED_PREFIX}{SILENT_JOB}"
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL for a try ended by kill()
UNRESPONSIVE_MARGIN = 30.0  # seconds past the import timeout before a worker that never said "started" is killed
# tries a worker runs before it is replaced (decisions 0324, 0332): glibc's setenv keeps every value a variable was
# ever given, and a worker sets each try's LEDGER_* variables before it forks it, so it grows by each try's values
RECYCLE_AFTER = 10_000
RETIRE_GRACE = 2.0  # seconds a worker being replaced is given to end by itself before it is killed (never waited on)
# a forked try that ends within this many seconds has its start told with its end, in one message: the job wakes
# once for it, not twice (decision 0366); a longer one's start is told once this has passed
SAY_STARTED_AFTER = 0.05

# -- the worker side -------------------------------------------------------------------------------

_current: try_process.RunningTry | None = None  # in a worker: the try it is watching


def _on_terminate(signum: int, frame: object) -> None:
    """SIGTERM in a worker (sent by the executor, or by the kernel when the scheduler died): take the
    running try's process group down too."""
    running = _current
    if running is not None:
        running.kill()
    os._exit(128 + signum)


_WORKER_SIGNALS: tuple[tuple[signal.Signals, Any], ...] = (
    (signal.SIGTERM, _on_terminate),
    (signal.SIGINT, signal.SIG_IGN),  # Ctrl-C is for the scheduler, which then shuts us down
    (signal.SIGHUP, signal.SIG_IGN),
)


def _own_signals() -> None:
    """(Re)install the worker's handlers: a DAG file imported here may have changed them."""
    for signum, handler in _WORKER_SIGNALS:
        if signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


def _failure(item: WorkItem, reason: str, pid: int | None = None, *, lost: bool = False,
             ran: bool = False) -> TaskEvent:
    """The end, now, of a try that failed or never started, for `reason` (`lost`: its worker died or was stopped
    under it, through no fault of the try's own). `ran`: it began, and what it left on this host is removed."""
    state: Literal["lost", "failed"] = "lost" if lost else "failed"
    at = time.time()
    return TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="finished", at=at, state=state, pid=pid,
                     reason=reason, report=try_report.left_behind(item.log_path, state, reason, at) if ran else None)


def _ended(item: WorkItem, outcome: Outcome, pid: int, left: try_report.TryReport | None, *,
           lost: bool = False) -> TaskEvent:
    """The end of a try as its worker saw it, with the report its process left (scheduler/runtime/try_report.py);
    `lost`: its code never ran, through the worker's fault (in_process.InProcessResult.lost)."""
    state = "lost" if lost else outcome.state
    return TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="finished", at=outcome.at,
                     state=state, pid=pid, reason=outcome.reason,
                     report=try_report.of_try(left, item.log_path, state, outcome.reason, outcome.at))


def _ended_how(code: int | None) -> str:
    """How a worker's process ended, from its exit status (negative: the signal that killed it)."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


class _Inbox:
    """A worker's end of its pipe. Without items sent ahead, the worker reads the next item when it is idle.
    With them, a thread reads the pipe all the time: items wait here in order, and a CANCEL for one that has
    not started takes it out at once, reported finished and never started, even while a long try runs. The
    worker's main thread takes the next item under the same lock: one taken has started, and one cancelled
    is never taken. Every message to the executor goes through send(), which both threads use."""

    def __init__(self, conn: Connection, threaded: bool) -> None:
        self.conn = conn
        self._sending = threading.Lock()
        self._changed = threading.Condition()
        self._waiting: collections.deque[WorkItem] = collections.deque()
        self._open = True
        if threaded:
            threading.Thread(target=self._read_all, name="ledger-worker-inbox", daemon=True).start()
        self._threaded = threaded

    def send(self, message: object) -> None:
        data = dumps(message)  # (the executor's Connection.recv loads it: see base.dumps)
        with self._sending:
            self.conn.send_bytes(data)

    def next_item(self) -> WorkItem | None:
        """The next item to start; None once the executor said to end (or its end of the pipe is gone)."""
        if not self._threaded:
            message = self._receive()
            return message if isinstance(message, WorkItem) else None
        with self._changed:
            while self._open and not self._waiting:
                self._changed.wait()
            return self._waiting.popleft() if self._open else None

    def _receive(self) -> object:
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return None

    def _read_all(self) -> None:
        while True:
            message = self._receive()
            if isinstance(message, WorkItem):
                with self._changed:
                    self._waiting.append(message)
                    self._changed.notify()
            elif isinstance(message, tuple) and len(message) == 2 and message[0] in (CANCEL, WITHDRAW):
                # answered under the lock the main thread takes its next item with: the answer goes out before the
                # "started" of any item behind this one (the executor reads them in that order)
                with self._changed:
                    found = next((item for item in self._waiting if item.ti_id == message[1]), None)
                    if found is not None:  # one already taken has started: its "started" answers instead
                        self._waiting.remove(found)
                        with contextlib.suppress(OSError, ValueError):  # (the scheduler is gone: so is this worker)
                            self.send(_failure(found, NEVER_STARTED) if message[0] == CANCEL
                                      else (WITHDRAWN, found.ti_id))
            else:  # None: the executor ends this worker
                with self._changed:
                    self._open = False
                    self._changed.notify()
                return


def _serve(conn: Connection, parent_pid: int, import_timeout: float | None, reuse: bool = False,
           ahead: bool = False, hold_fd: int = -1, told_fd: int = -1) -> None:
    """A worker's life: receive WorkItems, run each in a forked child (or, for Spark tries and with `reuse`
    for Python tries, in this process), report started and finished. `ahead`: the executor sends items ahead
    of the running try (see _Inbox). `hold_fd`: the job's deadline (local_hold: past it, this worker starts no
    try and kills the one it runs). `told_fd`: where it writes the pid of the try it forks, for the executor to
    read before it hears the start (try_pid.py)."""
    global _current
    if not die_with_parent(parent_pid, signal.SIGTERM):  # the scheduler died before it was armed
        return
    hold = local_hold.Hold.attach(hold_fd) if hold_fd >= 0 else None
    told = TryPid.attach(told_fd) if told_fd >= 0 else None
    fence: _InProcessFence | None = None  # (made for the first try that runs in this process)
    try_plan.unsettle()  # (a worker forked from a process that settled a plan itself starts afresh)
    _own_signals()
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    inbox = _Inbox(conn, threaded=ahead)
    try:
        inbox.send((READY, os.getpid()))
        while (item := inbox.next_item()) is not None:
            plan = try_plan.prepare(item, import_timeout=import_timeout)
            if hold is not None and hold.passed():  # its job has been silent too long: nothing starts on its word
                try_plan.forget_prepared()
                inbox.send(_failure(item, SILENT_JOB_NEVER_STARTED))
                continue
            if try_plan.runs_in_process(plan, reuse=reuse):  # Spark (this worker's session), reused Python
                _own_signals()
                if fence is None and hold is not None:
                    fence = _InProcessFence(hold)
                _run_here(inbox, item, plan, fence)
                continue
            try_plan.settle(plan)  # (this process runs nothing of its own: the child inherits what it sets)
            same = try_plan.settled_again()  # only this loop ran since the last fork: the signals are as it left them
            if not same:  # (a DAG file imported, or a try run here, may have changed them)
                _own_signals()
            running = try_process.fork_try(item, close_fds=[conn.fileno()], same_inputs=same)
            if told is not None:  # before anything else: the executor may bury this worker before it says more
                told.tell(running.pid)
            _current = running
            try_plan.forget_prepared()
            started = TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="started",
                                at=running.started_at, pid=running.pid)
            outcome = running.wait(SAY_STARTED_AFTER)  # a short try's start is told with its end (decision 0366)
            if outcome is not None:
                _current = None
                if told is not None:
                    told.tell(0)
                inbox.send([started, _ended(item, outcome, running.pid, running.report)])
                continue
            inbox.send(started)
            outcome = running.wait() if hold is None else _wait_held(running, hold)
            _current = None
            if told is not None:
                told.tell(0)
            if outcome is None:  # killed: its job fell silent (its code had not ended, or it left no report)
                inbox.send(_failure(item, SILENT_JOB_KILLED, running.pid, lost=True, ran=True))
                continue
            inbox.send(_ended(item, outcome, running.pid, running.report))
    except (EOFError, OSError):
        return  # the scheduler's end of the pipe is gone
    finally:
        if _current is not None:  # leaving for any reason (e.g. the scheduler's end of the pipe is gone)
            _current.kill()
        in_process.end_in_process()  # stop the worker's SparkSession, if it has one


def _wait_held(running: try_process.RunningTry, hold: local_hold.Hold) -> Outcome | None:
    """Wait for the try's end, looking at the job's deadline meanwhile: once it has passed, the try is killed (unless
    it has exited) and None returned, unless its code had ended and left its report (its outcome stands)."""
    while (outcome := running.wait(local_hold.LOOK_EVERY)) is None:
        if hold.passed() and running.kill_unless_exited():
            outcome = running.wait()
            assert outcome is not None
            return outcome if running.report is not None else None
    return outcome


class _InProcessFence:
    """(In a worker that runs tries in its own process: Spark, reused workers.) A thread that looks at the job's
    deadline while such a try runs: past it, the worker exits and the try with it, and the executor buries the worker
    and records the try lost, as it does any whose worker died. A try whose code ends in the same instant may be
    recorded lost too: such tries leave no report file to be recorded by."""

    def __init__(self, hold: local_hold.Hold) -> None:
        self.hold = hold
        self.busy = False
        self.lock = threading.Lock()
        threading.Thread(target=self._watch, name="ledger-worker-hold", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(local_hold.LOOK_EVERY)
            with self.lock:
                if self.busy and self.hold.passed():
                    os._exit(EXIT_SILENT_JOB)

    def run(self, item: WorkItem, plan: try_plan.Plan) -> in_process.InProcessResult:
        self.busy = True
        try:
            return in_process.run_in_process(item, plan)
        finally:
            with self.lock:
                self.busy = False


def _run_here(inbox: _Inbox, item: WorkItem, plan: try_plan.Plan, fence: _InProcessFence | None = None) -> None:
    """Run a try in the worker process itself, reporting it like a forked one (with the worker's pid).
    A try that would not stop after its timeout, or whose JVM died, takes the worker down with it once
    reported: the executor replaces it; so does a job that falls silent while it runs (`fence`)."""
    pid = os.getpid()
    inbox.send(TaskEvent(ti_id=item.ti_id, try_number=item.try_number, kind="started", at=time.time(), pid=pid))
    result = fence.run(item, plan) if fence is not None else in_process.run_in_process(item, plan)
    try_plan.unsettle()  # (its code ran in this process)
    try_plan.forget_prepared()
    outcome = result.outcome
    inbox.send(_ended(item, outcome, pid, result.report, lost=result.lost))
    if result.retire:
        os._exit(EXIT_RETIRED)


def _fork_worker_main(conn: Connection, parent_pid: int, close_fds: list[int], import_timeout: float | None,
                      reuse: bool, ahead: bool, hold_fd: int, told_fd: int) -> None:
    for fd in close_fds:  # the scheduler's ends of the other workers' pipes
        with contextlib.suppress(OSError):
            os.close(fd)
    _serve(conn, parent_pid, import_timeout, reuse, ahead, os.dup(hold_fd), told_fd)


def exec_worker_main(argv: list[str]) -> None:
    """Entry point of an "exec" worker: argv = [fd, parent pid, import timeout or "", "reuse" or "",
    "ahead" or "", the job's deadline's fd or "", the fd of its tries' pid or ""]."""
    fd, parent_pid, timeout = int(argv[0]), int(argv[1]), argv[2]
    reuse = len(argv) > 3 and argv[3] == "reuse"
    ahead = len(argv) > 4 and argv[4] == "ahead"
    hold_fd = int(argv[5]) if len(argv) > 5 and argv[5] else -1
    told_fd = int(argv[6]) if len(argv) > 6 and argv[6] else -1
    _serve(Connection(fd), parent_pid, float(timeout) if timeout else None, reuse, ahead, hold_fd, told_fd)


_PATH_VARIABLE = "LEDGER_WORKER_SYS_PATH"
_BOOT = (f"import json, os, sys; sys.path[:] = json.loads(os.environ.pop({_PATH_VARIABLE!r})); "
         "from ledger.scheduler.executors.local import exec_worker_main; exec_worker_main(sys.argv[1:])")

# -- the scheduler side ----------------------------------------------------------------------------


class _Process(Protocol):
    pid: int | None

    @property
    def sentinel(self) -> int: ...
    @property
    def exitcode(self) -> int | None: ...
    def is_alive(self) -> bool: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def join(self, timeout: float | None = None) -> None: ...
    def close(self) -> None: ...


class _ExecProcess:
    """A worker started as a fresh interpreter, with the parts of multiprocessing.Process's API we use."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid: int | None = popen.pid
        try:
            self._pidfd: int | None = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            self._pidfd = None

    @property
    def sentinel(self) -> int:
        """Readable once the worker has exited (-1 where pidfds are missing: is_alive() is polled then)."""
        return self._pidfd if self._pidfd is not None else -1

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def terminate(self) -> None:
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


@dataclass(eq=False)
class _Worker:
    process: _Process
    conn: Connection
    items: list[WorkItem] = field(default_factory=list)  # sent to it and not finished, in order: the first runs
    pid: int | None = None  # the first item's child (and process group) once "started" arrived
    assigned_at: float = 0.0  # time.monotonic() when the first item became its to start
    ready: bool = False
    dead: bool = False
    inbox: Any = None  # a select.poll on its pipe (Connection.poll builds a selector on every call)
    ended: int = 0  # tries it has reported finished
    told: TryPid | None = None  # the pid of the try it forked, written as it forks it (try_pid.py)

    def said_more(self) -> bool:
        """Whether its pipe has a message (or its end) to read now; OSError once the pipe is closed."""
        if self.inbox is None:
            self.inbox = select.poll()
            self.inbox.register(self.conn.fileno(), select.POLLIN)
        return bool(self.inbox.poll(0))

    @property
    def item(self) -> WorkItem | None:
        """The try it runs (or is about to start); the others wait behind it."""
        return self.items[0] if self.items else None


class LocalExecutor(EndedOnThisHost):
    """Up to `parallelism` long-lived worker processes, started on demand; one try at a time each.

    `queue_ahead`: how many more items each worker is sent beyond the one it runs. They wait in the worker,
    which starts the next the moment a try ends, without waiting for the scheduler's next loop; they are
    queued (not running) until their "started" arrives. 0: a worker gets an item only when it is idle.
    """

    def __init__(self, parallelism: int, *, start_method: StartMethod = "exec",
                 import_timeout: float | None = try_plan.DEFAULT_IMPORT_TIMEOUT,
                 reuse_workers: bool = False, queue_ahead: int = 0, recycle_after: int = RECYCLE_AFTER) -> None:
        super().__init__(parallelism)
        self.recycle_after = recycle_after  # tries a worker runs before it is replaced once idle
        if queue_ahead < 0:
            raise ValueError("queue_ahead must be 0 or more")
        self.depth = 1 + queue_ahead  # items a worker holds at most
        self._cancelled: set[tuple[int, int]] = set()  # (ti id, try number) sent a CANCEL while it waited
        self._withdrawing: set[tuple[int, int]] = set()  # (ti id, try number) sent a WITHDRAW while it waited
        self._withdrawn: list[WorkItem] = []  # given back by their workers, not yet placed again (_collect)
        self._spawn_failing = False  # the last worker start failed (the host would not start a process)
        self._started_wall = 0.0  # time.time() at start(): a report older than it is not one of this executor's tries
        self.reuse_workers = reuse_workers  # Python tries run in their worker process: no fork, no isolation
        if start_method not in ("exec", "fork"):
            raise ValueError(f"unknown start_method {start_method!r}: use 'exec' or 'fork'")
        self.start_method: StartMethod = start_method
        self.import_timeout = import_timeout
        self._workers: list[_Worker] = []
        # workers told to end because they ran their share of tries, each with when to kill it if it has not ended by
        # then: reaped by _collect, never waited on (decision 0332)
        self._leaving: list[tuple[_Worker, float]] = []
        self._started = False
        self._first_pending = False  # start() started a worker whose readiness nobody has waited for yet
        self._ending = False
        self._spawned = 0
        # (ti id, try number) -> (kill()'s reason, when to SIGKILL what is left of it)
        self._killed: dict[tuple[int, int], tuple[str, float]] = {}
        self._pending: list[TaskEvent] = []  # events made here (a worker ended to stop its try)
        self._poll: Any = None  # a select.poll over every worker's pipe and sentinel (None: the workers changed)
        self._polled: dict[int, tuple[_Worker, bool]] = {}  # its fds -> (worker, whether it is the pipe)
        self._hold = local_hold.Hold.make()  # the job's deadline its workers keep (hold_until; decision 0349)

    # -- workers --------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        self._spawned += 1
        process: _Process
        told_fd = TryPid.make_fd()
        try:
            if self.start_method == "fork":
                ctx = multiprocessing.get_context("fork")
                ours, theirs = ctx.Pipe(duplex=True)
                others = [w.conn.fileno() for w in (*self._workers, *(w for w, _ in self._leaving))
                          if not w.conn.closed]  # (a worker let go and not yet reaped holds its pipe too)
                mp_process = ctx.Process(target=_fork_worker_main,
                                         args=(theirs, os.getpid(), others, self.import_timeout, self.reuse_workers,
                                               self.depth > 1, self._hold.fd, told_fd),
                                         name=f"ledger-worker-{self._spawned}", daemon=True)
                mp_process.start()
                theirs.close()
                process = mp_process  # type: ignore[assignment]
            else:
                mine, child = socket.socketpair()
                with mine, child:
                    timeout = "" if self.import_timeout is None else repr(float(self.import_timeout))
                    flags: list[str] = getattr(subprocess, "_args_from_interpreter_flags", list)()  # -X, -W, -O...
                    argv = [sys.executable, *flags, "-c", _BOOT, str(child.fileno()), str(os.getpid()), timeout,
                            "reuse" if self.reuse_workers else "", "ahead" if self.depth > 1 else "",
                            str(self._hold.fd), str(told_fd)]
                    env = {**os.environ, _PATH_VARIABLE: json.dumps(sys.path)}  # the worker imports as we do
                    popen = subprocess.Popen(argv, pass_fds=[child.fileno(), self._hold.fd, told_fd],
                                             stdin=subprocess.DEVNULL, env=env)
                    ours = Connection(mine.detach())
                process = _ExecProcess(popen)
        except BaseException:  # (no worker started: its slot goes)
            os.close(told_fd)
            raise
        try:
            told = TryPid(told_fd)
        finally:
            os.close(told_fd)  # (the worker has its own; the mapping keeps what it needs)
        worker = _Worker(process, ours, told=told)
        self._workers.append(worker)
        self._poll = None
        return worker

    def _let_go(self, worker: _Worker) -> None:
        """An idle worker that ran its share of tries (nothing of its is lost): told to end, as end() does, so that it
        stops what it runs itself (a SparkSession) before it exits, and left to do so: _collect reaps it, or kills it
        once RETIRE_GRACE has passed. Nobody waits for it (decision 0332)."""
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(None)
        with contextlib.suppress(ValueError):
            self._workers.remove(worker)
        self._poll = None
        self._leaving.append((worker, time.monotonic() + RETIRE_GRACE))

    def _reap_leaving(self) -> None:
        """Reap the workers let go that have ended; SIGKILL those whose grace has passed (reaped on a later call)."""
        now = time.monotonic()
        for entry in list(self._leaving):
            worker, kill_at = entry
            if not worker.process.is_alive():
                self._leaving.remove(entry)
                self._retire(worker)
            elif now >= kill_at:
                worker.process.kill()

    def _retire(self, worker: _Worker) -> None:
        """Forget a worker: stop it if needed, close its pipe, reap it."""
        with contextlib.suppress(ValueError):
            self._workers.remove(worker)
        self._poll = None
        with contextlib.suppress(OSError):
            worker.conn.close()
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=1)
        with contextlib.suppress(ValueError):
            worker.process.close()
        if worker.told is not None:
            worker.told.close()

    def start(self) -> None:
        """Start one worker, without waiting for it: the job goes on with its own start (its DAG files parsed and
        synced) while the worker's interpreter starts (decision 0361). ready(), which the job's first loop calls and
        the first submit() or drain() does, waits until it is ready, and raises WorkerNotStarted (a RuntimeError)
        if it cannot start: a worker's interpreter or imports that fail do so there, before the job hands it any
        work, not under a try. The others start on demand (_worker_for)."""
        if self._started:
            raise RuntimeError("LocalExecutor already started")
        self._ending = False
        self._started_wall = time.time()
        self._spawn()
        self._started = True
        self._first_pending = True

    def ready(self) -> None:
        """Wait until the worker start() started is ready, once (WorkerNotStarted, a RuntimeError, with every worker
        stopped, if it cannot start). A worker that said it is ready and died since is not this executor's failure:
        the next drain buries and replaces it, as any worker that dies."""
        if not self._first_pending:
            return
        self._first_pending = False
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            pending = [w for w in self._workers if not w.ready]
            for worker in pending:
                self._read(worker, [])  # (what it said so far: a worker not ready yet holds no item)
            pending = [w for w in pending if not w.ready]
            if not pending:
                return
            remaining = deadline - time.monotonic()
            failed = next((w for w in pending if w.dead or not w.process.is_alive()), None)
            if failed is not None:  # its pipe closes as it exits: what it said before is all there by its end
                failed.process.join(timeout=1)
                self._read(failed, [])
                if failed.ready:
                    continue
            if failed is not None or remaining <= 0:
                why = (_ended_how(failed.process.exitcode) if failed is not None
                       else f"was not ready within {START_TIMEOUT:.0f} s")
                self.end(0)
                raise WorkerNotStarted(f"a LocalExecutor worker {why} as it started: no try was run")
            handles = [w.conn for w in pending] + [w.process.sentinel for w in pending if w.process.sentinel >= 0]
            multiprocessing.connection.wait(handles, timeout=min(remaining, 0.1))

    # -- the interface --------------------------------------------------------------------------
    def hold_until(self, deadline: float) -> None:
        self._hold.until(deadline)

    def open_slots(self) -> int:
        """Room in the workers alive, and in those not started yet (a dead one counts until it is buried)."""
        if not self._started or self._ending:
            return 0
        unstarted = max(0, self.parallelism - len(self._workers))
        # (an item given back and not placed again yet still holds the room it leaves in its worker)
        return max(0, unstarted * self.depth + sum(self._room(w) for w in self._workers) - len(self._withdrawn))

    def _worn(self, worker: _Worker) -> bool:
        """Whether it has run its share of tries: it is sent no more, and is replaced once idle (decision 0332)."""
        return worker.ended >= self.recycle_after

    def _room(self, worker: _Worker) -> int:
        """How many more items it (or, worn and idle, its successor) can take now."""
        if worker.dead:
            return 0
        if self._worn(worker):
            return 0 if worker.items else self.depth
        return max(0, self.depth - len(worker.items))

    def _worker_for(self) -> _Worker:
        """The worker an item goes to: an idle one; else a new one while there are fewer than `parallelism`;
        else the least loaded of those with room (the item waits in it behind what it runs)."""
        live = [w for w in self._workers if not w.dead and not self._worn(w)]  # (submit() let the idle worn ones go)
        idle = next((w for w in live if not w.items), None)
        if idle is not None:
            return idle
        open_ = [w for w in live if len(w.items) < self.depth]
        if len(self._workers) < self.parallelism:
            try:
                worker = self._spawn()
            except OSError:  # the host would not start a process (EAGAIN, ENOMEM, EMFILE): a live worker's room
                self._spawn_failing = True  # (until a worker starts: _rebalance counts no slot without a worker)
                if not open_:  # takes the item, or it fails as never started (submit)
                    raise
            else:
                self._spawn_failing = False
                return worker
        if not open_:
            raise RuntimeError("no open slot: check open_slots() before submit()")
        return min(open_, key=lambda w: len(w.items))

    def submit(self, item: WorkItem) -> None:
        if not self._started or self._ending:
            raise RuntimeError("LocalExecutor is not accepting work (not started, or ending)")
        if item.ti_id in self.in_flight():
            raise ValueError(f"task instance {item.ti_id} is already in flight")
        self.ready()
        self._place(item)

    def _place(self, item: WorkItem) -> None:
        """Send an item to the worker _worker_for() picks (one started for it if need be)."""
        for worn in [w for w in self._workers if self._worn(w) and not w.items and not w.dead]:
            self._let_go(worn)  # a successor starts on demand, below, when the item finds no idle worker
        for _ in range(2):  # a worker found dead on send is buried, and the item goes to another (or a new one)
            try:
                worker = self._worker_for()
            except OSError as exc:  # no worker could be started for it: it never started, and goes back to the loop
                self._pending.append(_failure(item, f"{NEVER_STARTED_PREFIX}no worker could be started ({exc})"))
                return
            try:
                worker.conn.send_bytes(dumps(item))
            except (OSError, ValueError):
                worker.dead = True  # its try fails, what waited behind it goes to the others
                self._bury(worker, "worker died", self._pending, replace=True)
                continue
            if not worker.items:
                worker.pid = None
                worker.assigned_at = time.monotonic()
            worker.items.append(item)
            return
        raise RuntimeError("could not hand the work item to a worker")

    def submit_all(self, items: list[WorkItem]) -> None:
        """submit() each item; then a worker the loop left idle takes an item that waits behind another try."""
        super().submit_all(items)
        self._rebalance()

    def _rebalance(self) -> None:
        """A worker left idle once the loop has handed out its work takes an item that waits behind another
        worker's try (decision 0341): without this, an item sent ahead would wait out a long try while a worker
        sat idle. The item is asked back (WITHDRAW); once its worker gives it back, the next _collect places it
        again, on an idle worker. An item that started meanwhile is not given back and runs where it is."""
        if self.depth == 1 or not self._started or self._ending:
            return
        idle = sum(1 for w in self._workers if not w.dead and not w.items and not self._worn(w))
        if not self._spawn_failing:  # (else an item asked back would only come back to the worker it left)
            idle += max(0, self.parallelism - len(self._workers))
        idle -= len(self._withdrawn) + sum(  # an idle worker already has an item coming, asked back or given back
            1 for w in self._workers for i, item in enumerate(w.items)
            if (item.ti_id, item.try_number) in self._withdrawing and (i > 0 or w.pid is None))
        for worker in self._workers:
            if idle <= 0:
                return
            if worker.dead:
                continue
            waiting = next((item for item in worker.items[1:] if (item.ti_id, item.try_number) not in
                            self._withdrawing | self._cancelled), None)
            if waiting is None:
                continue
            try:
                worker.conn.send((WITHDRAW, waiting.ti_id))
            except (OSError, ValueError):  # (its death is found by the next drain)
                continue
            self._withdrawing.add((waiting.ti_id, waiting.try_number))
            idle -= 1

    def _hand_over(self, items: list[WorkItem], out: list[TaskEvent]) -> None:
        """Items that waited in a worker that died and never started (all it said was read first, and a worker
        starts an item only after it has reported the one before it finished): they go to the other workers,
        or fail as never started when none can take them."""
        for item in items:
            try:
                self.submit(item)
            except (RuntimeError, ValueError) as exc:
                out.append(_failure(item, f"{NEVER_STARTED_PREFIX}no worker could take it ({exc})"))

    def _read(self, worker: _Worker, out: list[TaskEvent]) -> None:
        """Everything a worker has sent so far; marks it dead on EOF."""
        while not worker.dead:
            try:
                if not worker.said_more():
                    return
                message = worker.conn.recv()
            except (EOFError, OSError):
                worker.dead = True
                return
            if isinstance(message, list):  # a short try's start and end, told together
                for event in message:
                    self._took(worker, event, out)
                continue
            if not isinstance(message, TaskEvent):
                if isinstance(message, tuple) and message and message[0] == READY:
                    worker.ready = True
                elif isinstance(message, tuple) and len(message) == 2 and message[0] == WITHDRAWN:
                    self._given_back(worker, message[1], out)
                continue
            self._took(worker, message, out)

    def _took(self, worker: _Worker, message: TaskEvent, out: list[TaskEvent]) -> None:
        """A try's start or end its worker told."""
        index = next((i for i, item in enumerate(worker.items) if item.ti_id == message.ti_id), None)
        if index is None:
            return  # a late message about a try already given up on
        if message.kind == "started":
            if index == 0:  # (a worker starts its items in order: only the first can start)
                worker.pid = message.pid
        else:
            self._withdrawing.discard((message.ti_id, message.try_number))
            del worker.items[index]
            worker.ended += 1
            if index == 0:
                worker.pid = None
                worker.assigned_at = time.monotonic()  # the next item's turn
        out.append(message)

    def _given_back(self, worker: _Worker, ti_id: int, out: list[TaskEvent]) -> None:
        """A worker gave back an item that waited in it (WITHDRAW): placed again by _collect, or, stopped
        meanwhile, reported never started."""
        index = next((i for i, item in enumerate(worker.items) if item.ti_id == ti_id), None)
        if index is None:
            return  # (not one it holds: a late answer)
        # a worker never starts an item it gave back; it may be the first by now (the try before it ended and was
        # read first, while the worker gave this one back before taking it): the worker is then idle
        item = worker.items.pop(index)
        if index == 0:
            worker.pid = None
            worker.assigned_at = time.monotonic()  # (the next item's turn, if any)
        key = (item.ti_id, item.try_number)
        self._withdrawing.discard(key)
        if key in self._cancelled:  # a kill() found it waiting: it ends as the worker's own cancel would end it
            out.append(_failure(item, NEVER_STARTED))
        else:
            self._withdrawn.append(item)

    @staticmethod
    def _stop(workers: list[_Worker]) -> None:
        """Kill workers and their running tries: SIGTERM first (a worker then SIGKILLs its try's process group,
        even one whose "started" we have not read yet, and exits), SIGKILL for any that do not go at once. The
        worker goes before its try: a worker that saw its try killed first would report that end as its own
        and start the next item waiting in it, while it is being stopped."""
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in workers:  # (the group of a try whose worker could not kill it: a backstop)
            if worker.pid is not None and worker.pid != worker.process.pid:  # not an in-process (Spark) try
                try_process.kill_group(worker.pid)
        deadline = time.monotonic() + 1.0
        for worker in workers:
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()

    def _bury(self, worker: _Worker, reason: str, out: list[TaskEvent], *, replace: bool,
              target: int | None = None) -> None:
        """A worker died (or is being stopped, to end the try of task instance `target`): kill its try's process
        group, read everything it said before it went (a try may have ended and the next begun since the last
        read), end the try it was running (lost, unless it is the try being stopped). Items that waited behind
        that try never started: those stopped while they waited are reported so; with `replace` the others go to
        another worker (one started for them if none is idle), else they fail as never started. With `replace`
        the last worker is replaced at once; any other, by the next item that finds no idle worker."""
        self._stop([worker])
        mine: list[TaskEvent] = []
        worker.dead = False  # (a worker found dead may have said more than was read: read it to the end)
        given_back = len(self._withdrawn)
        self._read(worker, mine)
        worker.dead = True
        head, waiting = worker.item, worker.items[1:]
        if head is not None and worker.pid is None and worker.told is not None:  # a try it forked and had not told
            worker.pid = worker.told.pid()  # of yet (decision 0366): the pid it wrote as it forked it
        if worker.pid is not None and worker.pid != worker.process.pid:  # a try whose start was read only now: what
            try_process.kill_group(worker.pid)  # it started in its group goes too (its own process died with it)
        waiting += self._withdrawn[given_back:]  # (it gave them back before it went: they wait as the others do)
        del self._withdrawn[given_back:]
        worker.items = []
        self._withdrawing.difference_update((item.ti_id, item.try_number) for item in waiting)
        if head is not None:  # its end: the report it left as its code ended, whatever became of its process (its
            # "started" may never have been sent: on a loaded host a child can run to its end before its worker says it)
            ended = ended_by_report(head, worker.pid, not_before=self._started_wall)
            why = reason if target is None or head.ti_id == target else f"worker stopped to end another try ({reason})"
            mine.append(ended or _failure(head, why, worker.pid, lost=target is None or head.ti_id != target,
                                          ran=worker.pid is not None))
        for item in [item for item in waiting if (item.ti_id, item.try_number) in self._cancelled]:
            waiting.remove(item)
            mine.append(_failure(item, NEVER_STARTED))
        self._retire(worker)
        if replace:
            if not self._workers:  # the executor always has a worker (start() started it)
                self._spawn()
            self._hand_over(waiting, mine)
        else:
            mine.extend(_failure(item, f"{NEVER_STARTED_PREFIX}{reason}") for item in waiting)
        out.extend(self._as_killed(event) for event in mine)

    def _collect(self, timeout: float = 0) -> list[TaskEvent]:
        out, self._pending = self._pending, []
        if self._leaving:
            self._reap_leaving()
        if not self._workers:
            self._place_given_back(out)  # (holds_events() counts them: a drain must not leave them)
            return out
        for worker, is_pipe in self._ready(timeout):
            self._read(worker, out)  # for a sentinel too: what it said before it died comes first
            if not is_pipe:
                worker.dead = True
        for worker in [w for w in self._workers if w.process.sentinel < 0]:
            if not worker.process.is_alive():
                self._read(worker, out)
                worker.dead = True
        self._place_given_back(out)
        for worker in list(self._workers):  # a try cancelled while it waited, that its worker had started already
            head = worker.item
            key = (head.ti_id, head.try_number) if head is not None else None
            if key is not None and key in self._cancelled and worker.pid is not None:
                self._cancelled.discard(key)
                reason = self._killed.pop(key, ("stopped", 0.0))[0]
                self.kill(key[0], reason)
        now = time.monotonic()
        for worker in self._workers:  # a stopped try that ignored SIGTERM
            head = worker.item
            if head is not None and worker.pid is not None \
                    and now >= self._killed.get((head.ti_id, head.try_number), ("", float("inf")))[1]:
                try_process.kill_group(worker.pid)
        limit = (self.import_timeout or try_plan.DEFAULT_IMPORT_TIMEOUT) + UNRESPONSIVE_MARGIN
        for worker in list(self._workers):
            if worker.dead:
                worker.process.join(timeout=1.0)  # (its pipe closed as it exited: its exit code says why it went,
                silent = worker.process.exitcode == EXIT_SILENT_JOB and self._hold.passed()  # if the deadline agrees)
                self._bury(worker, SILENT_JOB_KILLED if silent else "worker died", out, replace=not self._ending)
            elif worker.item is not None and worker.pid is None and now - worker.assigned_at > limit:
                self._bury(worker, f"worker unresponsive for {limit:.0f} s before starting the try", out,
                           replace=not self._ending)
        return [self._as_killed(ev) for ev in out]

    def _place_given_back(self, out: list[TaskEvent]) -> None:
        """Items given back for a worker that fell idle: placed again (an idle worker comes first); while the
        executor ends, failed as never started."""
        moving, self._withdrawn = self._withdrawn, []
        for item in moving:
            if self._ending:
                out.append(_failure(item, f"{NEVER_STARTED_PREFIX}stopped by shutdown"))
                continue
            try:
                self._place(item)  # (one no worker could be started for fails as never started there)
            except RuntimeError as exc:
                out.append(_failure(item, f"{NEVER_STARTED_PREFIX}no worker could take it ({exc})"))

    def _ready(self, timeout: float) -> list[tuple[_Worker, bool]]:
        """(worker, whether it is its pipe, else its process ended) for each pipe and sentinel ready within
        `timeout` s: one poll(2) over all of them, set up again only when the workers change."""
        if self._poll is None:
            self._poll, self._polled = select.poll(), {}
            for worker in self._workers:
                try:
                    pipe = worker.conn.fileno()
                except OSError:  # a closed pipe: the worker is dead
                    worker.dead = True
                    continue
                for fd, is_pipe in ((pipe, True), (worker.process.sentinel, False)):
                    if fd >= 0:
                        self._poll.register(fd, select.POLLIN)
                        self._polled[fd] = (worker, is_pipe)
        found = self._poll.poll(max(0, int(timeout * 1000 + 0.999)))
        return [self._polled[fd] for fd, _mask in found]

    def drain(self) -> list[TaskEvent]:
        if not self._started:
            return []
        self.ready()
        return self._collect(0)

    def kill(self, ti_id: int, reason: str) -> bool:
        """SIGTERM the try's process group (SIGKILL after KILL_GRACE if anything is left); a try that runs in
        its worker (Spark) or has not started yet takes its worker down with it, and the worker is replaced."""
        if self._take_back(ti_id, reason):
            return True
        worker = next((w for w in self._workers if any(item.ti_id == ti_id for item in w.items)), None)
        if worker is None:
            return False
        self._read(worker, self._pending)  # what it said so far: the try may have ended, the next one begun
        if self._take_back(ti_id, reason):  # (what it said was that it gave the item back)
            return True
        item = next((item for item in worker.items if item.ti_id == ti_id), None)
        if item is None:
            return True  # it ended meanwhile: its outcome comes with the next drain()
        key = (ti_id, item.try_number)
        if key in self._killed:
            return True
        if item is not worker.item:  # it waits behind another try: taken out (or, if started by now, stopped)
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send((CANCEL, ti_id))
            self._cancelled.add(key)
            self._killed[key] = (reason, float("inf"))
            return True
        if worker.pid is not None and worker.pid != worker.process.pid:
            self._killed[key] = (reason, time.monotonic() + KILL_GRACE)
            try_process.kill_group(worker.pid, signal.SIGTERM)
        else:
            self._bury(worker, reason, self._pending, replace=not self._ending, target=ti_id)
        return True

    def _take_back(self, ti_id: int, reason: str) -> bool:
        """Whether the try to kill is an item its worker gave back and nothing placed again yet: it never starts."""
        item = next((item for item in self._withdrawn if item.ti_id == ti_id), None)
        if item is None:
            return False
        self._withdrawn.remove(item)
        self._pending.append(_failure(item, f"{NEVER_STARTED_PREFIX}{reason}"))
        return True

    def _as_killed(self, event: TaskEvent) -> TaskEvent:
        """A try that kill() ended is reported failed with kill()'s reason; one taken out while it waited, as never
        started with it. A try that succeeded (or skipped) before the kill reached it is reported as it ended."""
        key = (event.ti_id, event.try_number)
        if event.kind != "finished" or key not in self._killed:
            return event
        reason, _ = self._killed.pop(key)
        if key in self._cancelled:
            self._cancelled.discard(key)
            if event.reason == NEVER_STARTED:
                return dataclasses.replace(event, state="failed", pid=None, reason=f"{NEVER_STARTED_PREFIX}{reason}")
        if event.state in ("success", "skipped"):
            return event
        return dataclasses.replace(event, state="failed", reason=reason)  # (its report: what it left before)

    def wait_handles(self) -> list[Any]:
        handles: list[Any] = []
        for worker in self._workers:
            handles.append(worker.conn)
            if worker.process.sentinel >= 0:
                handles.append(worker.process.sentinel)
        return handles

    def holds_events(self) -> bool:
        return bool(self._pending or self._withdrawn)  # (a given-back item is placed by the next drain)

    def in_flight(self) -> set[int]:
        return {item.ti_id for w in self._workers for item in w.items} | {item.ti_id for item in self._withdrawn} | {
            event.ti_id for event in self._pending if event.kind == "finished"}

    def end(self, grace: float) -> list[TaskEvent]:
        if not self._started:
            return []
        self._first_pending = False  # (a worker not ready yet has nothing to finish: it is told to end, as the others)
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
        self._place_given_back(events)  # (ending: each fails as never started)
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        deadline = time.monotonic() + 2.0
        for worker, _kill_at in self._leaving:  # (told to end already)
            self._workers.append(worker)
        self._leaving.clear()
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
