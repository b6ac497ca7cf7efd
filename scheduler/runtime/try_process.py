"""One try in a forked child process, and the watching of that child.

* `fork_try(item)` forks the child. The child puts itself in its own process group (so a timeout or a
  shutdown can kill the task with everything it started), asks the kernel to SIGKILL it when its parent
  dies, runs `task_runner.run_try`, leaves its report for its worker the moment the try's code has ended
  (`<log>.report.json`, or the Celery worker's outbox: scheduler/runtime/try_report.py) and exits with a code that
  says the outcome (`EXIT_SUCCESS`, `EXIT_FAILED`, `EXIT_SKIPPED`); once its log is whole (its foot written and
  flushed), the drop has its last word (`settle`: the Celery outbox tells its pool process, then fsyncs). Only a
  child that left no report (one could not be left, or it has no log) writes its state and reason to a pipe; a
  Spark try handed back says so there too.
* `RunningTry.wait()` waits for the child (a pidfd: woken the moment it exits), kills its process group
  when the execution timeout passes, and returns the outcome.

A forked child that finds it was given a Spark try hands it back (`RunningTry.handed_over`) unrun: Spark
tries run in the worker process (scheduler/runtime/in_process.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import try_report
from ledger.scheduler.runtime.parent_death import die_with_parent
from ledger.scheduler.runtime.task_runner import HANDOVER_REASON, now_iso, run_try
from ledger.scheduler.runtime.try_logging import log_handler, output_streams
from ledger.scheduler.runtime.try_outcome import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_SKIPPED,
    EXIT_SUCCESS,
    Outcome,
    State,
    describe_exception,
    describe_status,
    one_line,
)
from ledger.scheduler.runtime.try_plan import Plan, make_plan, prepared, remember
from ledger.sdk import secrets


def kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


_CHILD_SIGNALS: tuple[tuple[signal.Signals, Any], ...] = (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGTERM, signal.SIG_DFL),
    (signal.SIGHUP, signal.SIG_DFL),
    (signal.SIGALRM, signal.SIG_DFL),
    (signal.SIGUSR1, signal.SIG_DFL),
    (signal.SIGUSR2, signal.SIG_DFL),
)


_last_reset: list[tuple[int, Any]] | None = None  # what _signals_to_reset found for this process's last fork


def _signals_to_reset(*, same: bool = False) -> list[tuple[int, Any]]:
    """Worked out in the forking process: the handlers its child must put back to Python's defaults. `same`: only
    the forking process's own loop ran since its last fork, so its handlers are as they were then (each
    `signal.getsignal` goes through the enum of handlers, on pages the next fork write-protects: decision 0334)."""
    global _last_reset
    if not same or _last_reset is None:
        _last_reset = [(signum, handler) for signum, handler in _CHILD_SIGNALS
                       if signal.getsignal(signum) is not handler]
    return _last_reset


def _reset_signals(signals: Iterable[tuple[int, Any]]) -> None:
    """Task code starts with Python's default signal handling, whatever the forking process installed."""
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)  # e.g. set by an asyncio loop in the forking process
    for signum, handler in signals:
        signal.signal(signum, handler)


class _Leaver:
    """What the try's process does the moment its code has ended: build its report and leave it for its worker.
    A report that cannot be left (a full disk) fails the try, saying why: what its code passed on would be lost."""

    def __init__(self, item: WorkItem, drop: try_report.Drop) -> None:
        self.item, self.drop = item, drop
        self.error: str | None = None
        self.left = False  # its report was left

    def __call__(self, state: State, reason: str | None) -> None:
        try:
            self.drop.leave(try_report.build(state, reason, time.time(), self.item.log_path, self.drop.host))
            self.left = True
        except Exception as exc:
            self.error = one_line(f"its report could not be left for its worker: {describe_exception(exc)}")
            with contextlib.suppress(Exception):
                print(f"[ledger] {self.error}", flush=True)


def _child_main(item: WorkItem, result_fd: int, parent_pid: int, close_fds: Iterable[int],
                signals: Iterable[tuple[int, Any]], drop: try_report.Drop | None) -> NoReturn:
    code = EXIT_FAILED
    me = os.getpid()
    leaver: _Leaver | None = None
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        if not die_with_parent(parent_pid, signal.SIGKILL):
            os._exit(EXIT_FAILED)
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        _reset_signals(signals)
        plan = prepared(item)
        if plan is None:  # plan here, before the log is opened: a Spark try goes back to the parent
            try:
                plan = make_plan(item, capture=True)
            except Exception as exc:
                plan = Plan(item, error=one_line(f"cannot prepare the try: {describe_exception(exc)}"))
            remember(plan)
        if plan.in_process:
            os.write(result_fd, json.dumps({"state": "failed", "reason": HANDOVER_REASON,
                                            "handover": True}).encode())
            os._exit(EXIT_FAILED)
        leaver = None if drop is None else _Leaver(item, drop)
        state, reason = run_try(item, leaver)
        if leaver is not None and leaver.error is not None:
            state, reason = "failed", leaver.error
        code = EXIT_CODES[state]
        # its state goes down the pipe only when it left no report (one could not be left: a full disk; or it has no
        # log, so no report file): a report says it, and stands (decision 0298)
        if os.getpid() == me and (leaver is None or not leaver.left):
            os.write(result_fd, json.dumps({"state": state, "reason": reason}).encode()[:4000])
    except BaseException as exc:
        code = EXIT_FAILED
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            if os.getpid() == me:
                os.write(result_fd, json.dumps({"state": "failed", "reason": describe_exception(exc)}).encode())
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        if leaver is not None and leaver.left and os.getpid() == me:  # its log is whole: the drop's last word
            with contextlib.suppress(BaseException):
                leaver.drop.settle()
        os._exit(code)


class RunningTry:
    """A forked child running one try: wait for it (with the execution timeout) or kill it."""

    def __init__(self, item: WorkItem, pid: int, result_fd: int, started_at: float,
                 drop: try_report.Drop | None = None) -> None:
        self.item = item
        self.drop = drop
        self.report: try_report.TryReport | None = None  # what the try's process left as its code ended
        self.pid = pid
        self.started_at = started_at  # time.time()
        self._result_fd = result_fd
        self._begun = time.monotonic()
        self.deadline = (self._begun + item.execution_timeout) if item.execution_timeout else None
        self._pidfd: int | None
        try:
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._buffer = b""
        self._eof = False
        self._status: int | None = None
        self.outcome: Outcome | None = None
        self.handed_over = False  # the child found a Spark try: run it with run_in_process() instead

    @property
    def result_fd(self) -> int:
        """The read end of the pipe the try's process writes its state to as it ends (-1 once closed)."""
        return self._result_fd

    def fileno(self) -> int:
        """Readable when the child has exited (a pidfd; the result pipe where pidfds are missing)."""
        return self._pidfd if self._pidfd is not None else self._result_fd

    def _exited(self) -> bool:
        """Has the child exited? Leaves it a zombie, so its pid and process group id cannot be reused yet."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _read_result(self) -> None:
        """Read what the child wrote so far (the pipe is non-blocking: a process the task left behind may
        still hold its write end)."""
        while not self._eof:
            try:
                chunk = os.read(self._result_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk

    def kill(self) -> None:
        """SIGKILL the try's whole process group (the child and whatever it started)."""
        kill_group(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def kill_unless_exited(self) -> bool:
        """kill(), unless the try's process has already exited (reaped or not): a try that ended is never killed
        after its end, its outcome stands. True: it was killed (it had not exited)."""
        if self.outcome is not None or self._exited():
            return False
        self.kill()
        return True

    def killed(self) -> bool:
        """Did the try's process die of SIGKILL (not exit by itself)?"""
        return self._status is not None and os.WIFSIGNALED(self._status) and \
            os.WTERMSIG(self._status) == signal.SIGKILL

    def wait(self, timeout: float | None = None) -> Outcome | None:
        """Wait up to `timeout` seconds (None: until it ends) for the try to end; kill it at its deadline.
        Returns the outcome once the try has ended, else None."""
        if self.outcome is not None:
            return self.outcome
        until = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        while not self._exited():
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                timed_out = True
                self.kill()
                break
            if until is not None and now >= until:
                return None
            limits = [t - now for t in (until, self.deadline) if t is not None]
            if self._pidfd is not None:  # readable the moment the child exits
                select.select([self._pidfd], [], [], max(0.0, min(limits)) if limits else None)
            elif not self._eof:  # no pidfd: the result pipe speaks (or closes) as the child ends; poll as well
                select.select([self._result_fd], [], [], max(0.0, min([*limits, 0.05])))
                self._read_result()
            else:  # the pipe has closed: the child is exiting
                time.sleep(max(0.0, min([*limits, 0.001])))
        return self._finish(timed_out)

    def _finish(self, timed_out: bool) -> Outcome:
        # Still a zombie here: kill what the try left behind in its group, then reap it.
        kill_group(self.pid)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = None
        at = time.time()
        self._read_result()
        self.close()
        state: State
        reason: str | None
        self.report = self.drop.take() if self.drop is not None else None
        if self.report is not None and self.report.state in EXIT_CODES:  # its code ended: its outcome stands
            state, reason = self.report.state, self.report.reason
            at = self.report.at
            self.handed_over = False
        elif timed_out:
            state, reason = "failed", f"timed out after {float(self.item.execution_timeout or 0)} s"
            self._log_line(f"{now_iso()} outcome: failed ({reason}: execution_timeout; its processes were "
                           f"killed) after {time.monotonic() - self._begun:.3f} s")
        else:
            message = self._decode()
            if message is not None:
                state, reason = message
            elif status is None:
                state, reason = "failed", "the try's process vanished"
            elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_SUCCESS:
                state, reason = "success", None
            elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_SKIPPED:
                state, reason = "skipped", f"exit code {EXIT_SKIPPED}"
            else:
                state, reason = "failed", describe_status(status)
        self._status = status
        self.outcome = Outcome(state, reason, at)
        return self.outcome

    def _log_line(self, text: str) -> None:
        """A line the try could not write itself (it was killed), appended to its log."""
        with contextlib.suppress(OSError), open(self.item.log_path, "a", encoding="utf-8") as log:
            log.write(f"[ledger] {text}\n")

    def said(self) -> tuple[State, str | None] | None:
        """The state the try's process wrote to its result pipe as it ended (None: none: it did not end by itself),
        once it has ended."""
        return decode_message(self._buffer)

    def _decode(self) -> tuple[State, str | None] | None:
        self.handed_over = handed_over(self._buffer)
        return decode_message(self._buffer)

    @property
    def status(self) -> int | None:
        """The raw waitpid status once the try has ended."""
        return self._status

    def close(self) -> None:
        for fd in (self._pidfd, self._result_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._pidfd = None
        self._result_fd = -1
        self._eof = True


def decode_message(buffer: bytes) -> tuple[State, str | None] | None:
    """The state and reason a try's process wrote to its result pipe as it ended (None: it wrote none: it did not
    end by itself)."""
    if not buffer:
        return None
    try:
        data = json.loads(buffer.decode("utf-8", "replace"))
        state = data["state"]
        if state not in EXIT_CODES:
            return None
        reason = data.get("reason")
        return state, (one_line(str(reason)) if reason else None)
    except (ValueError, KeyError, TypeError):
        return None


def handed_over(buffer: bytes) -> bool:
    """Did the child hand its try back unrun (a Spark try)?"""
    try:
        return bool(buffer) and json.loads(buffer.decode("utf-8", "replace")).get("handover") is True
    except (ValueError, AttributeError):
        return False


def read_all(fd: int) -> bytes:
    """What a non-blocking pipe holds now."""
    got = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # (BlockingIOError: nothing more now)
            return got
        if not chunk:
            return got
        got += chunk


_unreaped: list[int] = []  # guards let go that had not exited when they were released
_reaping = threading.Lock()  # (a Celery pool process releases guards from its watch thread too: decision 0326)


def reap_guards() -> None:
    """Reap the released guards that have exited since."""
    with _reaping:
        for pid in list(_unreaped):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] != 0
            except ChildProcessError:
                done = True
            if done:
                _unreaped.remove(pid)


class GroupGuard:
    """A small forked process that kills a try's process group if the process that forked it dies first (any way,
    kill -9 too): it waits on a pipe whose only writer is that process, so the pipe's end is its death. release()
    (the try ended) lets it go without killing anything. `after` is called once the group is killed, with what the
    try's process had written to its result pipe (`result_fd`, the forking process's read end, which the guard
    shares): a try that ended just before its supervisor died, but could not leave its report, has its state there."""

    def __init__(self, pgid: int, after: Callable[[bytes], None] | None = None, result_fd: int = -1) -> None:
        reap_guards()
        read_fd, self._write_fd = os.pipe()
        os.set_inheritable(self._write_fd, False)
        try:
            self.pid = os.fork()
        except OSError:  # (a pids limit reached: the caller kills the try; no pipe is left open)
            os.close(read_fd)
            os.close(self._write_fd)
            raise
        if self.pid == 0:  # the guard
            code = 0
            try:
                os.close(self._write_fd)
                if not os.read(read_fd, 1):  # end of file: the forking process died before the try ended
                    kill_group(pgid)
                    if after is not None:
                        after(read_all(result_fd) if result_fd >= 0 else b"")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(read_fd)

    def let_go(self) -> None:
        """Tell the guard the try ended (it exits without killing anything); not waiting for it to exit."""
        if self._write_fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"x")
        os.close(self._write_fd)
        self._write_fd = -1

    def release(self) -> None:
        """let_go(), then reap the guard if it has exited, else later (the next guard made or released in this
        process reaps it): the caller does not wait for the guard to be scheduled to exit."""
        self.let_go()
        if self.pid > 0:
            with _reaping:
                _unreaped.append(self.pid)
            self.pid = 0
        reap_guards()


def fork_try(item: WorkItem, *, close_fds: Iterable[int] = (), drop: try_report.Drop | None = None,
             same_inputs: bool = False) -> RunningTry:
    """Fork a child that runs `run_try(item)` in its own process group; `close_fds` are closed in it. The child
    leaves its report in `drop` the moment its code has ended (default: the report file beside its log).
    `same_inputs`: only this process's own loop ran since it last forked a try (try_plan.settled_again), so the
    settings' secrets are checked by their key file alone."""
    if drop is None and item.log_path:
        drop = try_report.ReportFile(item.log_path)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    parent_pid = os.getpid()
    fds = list(close_fds)
    signals = _signals_to_reset(same=same_inputs)
    log_handler(output_streams()[1])  # the streams and the logging handler on them: made once, before forking
    secrets.settings_secrets(same_inputs=same_inputs)  # worked out here: the child inherits them, masks them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    started = time.time()  # (before the fork: a child that ends at once stamps its end after its start)
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        _child_main(item, write_fd, parent_pid, fds, signals, drop)
    os.close(write_fd)
    with contextlib.suppress(OSError):  # also here, so killpg works even before the child ran setpgid
        os.setpgid(pid, pid)
    return RunningTry(item, pid, read_fd, started, drop)
