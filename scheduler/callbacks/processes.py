"""Callback calls in processes of their own, so that a slow or failing callback never blocks the loop.

The job claims pending calls in its transaction (ledger/store/callbacks.py), starts one process per call
after the commit (scheduler/callbacks/runner.py: the version's code, the recorded context), polls them each
loop, and records each outcome in its next transaction: ok (exit 0), error (the last line the runner wrote),
timeout (killed after LEDGER_CALLBACK_TIMEOUT seconds). Output goes to
$LEDGER_HOME/logs/<dag>/run_<run>/callbacks/<id>_<kind>.log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ledger.scheduler.callbacks.runner import FAILED_PREFIX


@dataclass
class _Call:
    process: subprocess.Popen[bytes]
    deadline: float
    log: Path
    handle: IO[bytes]


def _last_failure(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "the callback process failed (no log)"
    for line in reversed(lines):
        if line.startswith(FAILED_PREFIX):
            return line.removeprefix(FAILED_PREFIX)
    return next((line for line in reversed(lines) if line.strip()), "the callback process failed")


@dataclass
class CallbackProcesses:
    logs_folder: Path
    timeout: float = 60.0
    parallelism: int = 4
    running: dict[int, _Call] = field(default_factory=dict)

    def room(self) -> int:
        return max(0, self.parallelism - len(self.running))

    def log_path(self, dag_id: str, run_id: int, call_id: int, kind: str) -> Path:
        return self.logs_folder / dag_id / f"run_{run_id}" / "callbacks" / f"{call_id}_{kind}.log"

    def start(self, call_id: int, request: dict[str, Any]) -> None:
        log = self.log_path(request["dag_id"], request["run_id"], call_id, request["kind"])
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(log, "ab")  # noqa: SIM115 - closed when the call ends
        process = subprocess.Popen([sys.executable, "-m", "ledger.scheduler.callbacks.runner"], stdin=subprocess.PIPE,
                                   stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps({**request, "log_path": str(log)}, default=str).encode())
            process.stdin.close()
        except BrokenPipeError:
            pass
        self.running[call_id] = _Call(process, time.monotonic() + self.timeout, log, handle)

    def poll(self) -> list[tuple[int, str, str | None]]:
        """The calls that ended since the last poll: (id, ok | error | timeout, message)."""
        done: list[tuple[int, str, str | None]] = []
        for call_id, call in list(self.running.items()):
            status = call.process.poll()
            if status is None and time.monotonic() < call.deadline:
                continue
            if status is None:
                self._kill(call)
                with open(call.log, "a") as log:
                    log.write(f"{FAILED_PREFIX}timed out after {self.timeout:g} s\n")
                done.append((call_id, "timeout", f"timed out after {self.timeout:g} s"))
            elif status == 0:
                done.append((call_id, "ok", None))
            else:
                done.append((call_id, "error", _last_failure(call.log)))
            call.handle.close()
            del self.running[call_id]
        return done

    def end(self, grace: float) -> list[tuple[int, str, str | None]]:
        """At shutdown: wait up to `grace` seconds for running calls, then stop the rest (outcome: error)."""
        until = time.monotonic() + grace
        while self.running and time.monotonic() < until:
            time.sleep(0.05)
            done = self.poll()
            if done:
                return done + self.end(max(0.0, until - time.monotonic()))
        stopped: list[tuple[int, str, str | None]] = []
        for call_id, call in list(self.running.items()):
            self._kill(call)
            call.handle.close()
            stopped.append((call_id, "error", "stopped: the job shut down while it ran"))
            del self.running[call_id]
        return stopped

    @staticmethod
    def _kill(call: _Call) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(call.process.pid, signal.SIGKILL)
        call.process.wait()
