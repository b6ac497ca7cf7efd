"""How a job sleeps between loops and what wakes it early.

Its own executor wakes it through the workers' pipes (a finished try is heard at once). Other
processes are heard through the signal service's doorbell (ledger/services/signal_delivery.py): a signal sent
anywhere (`ledger signal send`, a task, another job's task state changes) rings it at once, through
LISTEN/NOTIFY on PostgreSQL and a Unix datagram socket on SQLite. Changes that send no signal (the
CLI's trigger, clear, pause...) append to the events table, and the sleeping job also checks the
newest event id every `check_interval` seconds, a query of a few microseconds on an index. The poll
interval only bounds the worst case.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from typing import Any, Protocol

from sqlalchemy import Engine

from ledger.services.signal_delivery import Doorbell
from ledger.store.db import reader
from ledger.store.loop import newest_event_id_on


class Wakeup(Protocol):
    def settle(self) -> None:
        """Called after the job's own transaction: what is in the database now is already seen."""

    def sleep(self, handles: list[Any], timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True when woken by a handle, another process or interrupt()."""

    def interrupt(self) -> None:
        """Wake the sleeper now (safe to call from a signal handler)."""


class Poller:
    """What `multiprocessing.connection.wait` does (the handles among those given that are ready to read: objects
    with a fileno(), or file descriptors), with its selector kept from one call to the next while the handles stay
    the same: a job sleeps once or twice per task instance on a dozen handles, and making a selector and registering
    each of them again every time cost about 35 microseconds of the 40 a call took (issue 43)."""

    def __init__(self) -> None:
        self._selector: selectors.BaseSelector | None = None
        self._handles: dict[int, Any] = {}

    def ready(self, handles: list[Any], timeout: float | None) -> list[Any]:
        wanted = {h if isinstance(h, int) else h.fileno(): h for h in handles}
        if wanted != self._handles or self._selector is None:  # (compared by identity: a new handle on a reused fd too)
            self.close()
            selector = selectors.PollSelector() if hasattr(selectors, "PollSelector") else selectors.SelectSelector()
            for fd, handle in wanted.items():
                selector.register(fd, selectors.EVENT_READ, handle)
            self._selector, self._handles = selector, wanted
        return [key.data for key, _events in self._selector.select(timeout)]

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()
            self._selector, self._handles = None, {}


class DatabaseWakeup:
    def __init__(self, engine: Engine, check_interval: float = 0.05, doorbell: Doorbell | None = None) -> None:
        self.engine = reader(engine)
        self.check_interval = check_interval
        self.doorbell = doorbell
        self.seen = 0
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._poller = Poller()

    def _newest(self) -> int:
        with self.engine.connect() as conn:
            return newest_event_id_on(conn)

    def settle(self) -> None:
        self.seen = self._newest()

    def interrupt(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._w, b"x")

    def close(self) -> None:
        self._poller.close()
        if self.doorbell is not None:
            self.doorbell.close()
            self.doorbell = None

    def sleep(self, handles: list[Any], timeout: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        bell = [self.doorbell.handle()] if self.doorbell is not None else []
        while True:
            left = deadline - time.monotonic()
            ready = self._poller.ready([*handles, self._r, *bell], max(0.0, min(self.check_interval, left)))
            if ready:
                if self._r in ready:
                    with contextlib.suppress(OSError):
                        os.read(self._r, 1024)
                if bell and bell[0] in ready and self.doorbell is not None:
                    self.doorbell.drain()
                return True
            if self._newest() != self.seen:
                return True
            if time.monotonic() >= deadline:
                return False
