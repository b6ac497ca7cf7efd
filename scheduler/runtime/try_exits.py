"""What is left of a Celery try once its outcome is stored while its process still exits (decision 0326).

A try's process says its log is whole, then syncs its report and exits (decision 0315); its pool process delivers the
outcome meanwhile. What comes after the store waits for that exit: the process is reaped (what it left in its process
group killed), then its guard is let go, its lease stops being renewed, and its file in the worker's outbox is removed,
in that order (a guard that finds no file says the try is dead, and a guard let go before the try's process is reaped
would leave that process unguarded). One thread per pool process does it for each try as its process exits, so the pool
process is free for its next try the moment the outcome is stored: the executor's slots are the workers' pool
processes, and the next try waits for that pool process.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable
from typing import Protocol


class Exiting(Protocol):
    def fileno(self) -> int: ...  # readable once the process has exited

    def wait(self, timeout: float | None = None) -> object: ...  # None: not exited within `timeout`


POLL = 1.0  # seconds between two looks at processes whose exit no descriptor signals (no pidfd, the pipe closed)


class ExitWatch:
    """Reaps the tries handed to it as their processes exit, then calls what comes after each (`then`), in a thread
    of its own; `watch` never waits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[Exiting, Callable[[], object]]] = []
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread = threading.Thread(target=self._run, name="ledger-try-exits", daemon=True)
        self._thread.start()

    def watch(self, running: Exiting, then: Callable[[], object]) -> None:
        with self._lock:
            self._pending.append((running, then))
        os.write(self._wake_w, b"!")

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _run(self) -> None:
        while True:
            with self._lock:
                pending = list(self._pending)
            ready = select.select([self._wake_r, *(running.fileno() for running, _ in pending)], [], [], POLL)[0]
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            for running, then in pending:
                if running.wait(0) is None:  # (not exited yet)
                    continue
                with self._lock:
                    self._pending.remove((running, then))
                with contextlib.suppress(Exception):  # (what comes after one try's exit does not stop the others')
                    then()


_watch: ExitWatch | None = None
_watch_pid = 0


def after_exit(running: Exiting, then: Callable[[], object]) -> None:
    """Once `running`'s process has exited and been reaped, call `then` (in this process's watch thread)."""
    global _watch, _watch_pid
    if _watch is None or _watch_pid != os.getpid():  # (a forked process has none of its parent's threads)
        _watch, _watch_pid = ExitWatch(), os.getpid()
    _watch.watch(running, then)
