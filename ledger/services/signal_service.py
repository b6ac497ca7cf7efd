"""The signal service: send, list and listen, each in its own transactions, for long-lived processes.

Sending is one transaction (store the signal, its event and, on PostgreSQL, its NOTIFY), then a ring
of the SQLite doorbells after commit. Code that sends signals inside a transaction of its own (the
scheduler's loop) uses ``ledger.store.signals.send_many`` and calls ``ledger.services.signal_delivery.ring``
after its commit instead.

**Listening is at-least-once.** ``listen(listener, keys, watcher)`` keeps, per (listener, key), the
last version delivered (``signal_cursor``). Each round reads the signals after the cursors, calls the
watcher with them, and moves the cursors only after the watcher returned, so a watcher that raises
or a process that dies halfway gets the same signals again next time: nothing is ever lost, and a
watcher must tolerate seeing a signal twice (after a crash). The opposite order (advance, commit,
then call) would be at-most-once: a crash between commit and watcher would lose signals for good,
which is worse for a scheduler driven by them. A listener that was down gets, when it comes back,
every signal it missed, in version order per key; a listener name used for the first time starts at
version 0 and so gets each key's whole history.

Two processes of the same listener never deliver the same signal while both are alive:

- on **PostgreSQL** the round runs in one transaction that locks the listener's cursor rows
  (``SELECT ... FOR UPDATE SKIP LOCKED``) and keeps them locked while the watcher runs, then advances
  them and commits. A second process skips the locked keys (a peer is delivering them) and looks again
  shortly after; if the first one dies, its transaction rolls back and the second delivers.
- on **SQLite** a transaction cannot stay open while the watcher runs (it would hold the database's
  write lock, and the watcher may well write), so a round holds an exclusive ``flock`` on
  ``$LEDGER_HOME/run/listeners/<hash of listener>.lock`` instead: SQLite is reachable from one machine
  only, and the kernel drops the lock when its process dies. The signals are read in a read
  transaction, the watcher runs outside any transaction, the cursors advance in a short write one.

Between rounds the listener sleeps on a doorbell (``ledger.services.signal_delivery``) opened before its first
read, so a signal committed at any time wakes it at once; ``poll_interval`` only bounds the worst case
(a lost ring). Timestamps come from the clock given (``ledger.infra.clock``); durations use the monotonic
clock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.core.errors import InvalidInput
from ledger.core.signals import Signal, validate_key
from ledger.infra.clock import Clock, SystemClock
from ledger.services.signal_delivery import Doorbell, open_doorbell, ring
from ledger.store import signals as signal_store
from ledger.store.db import make_sessions, reader

Watcher = Callable[[list[Signal]], None]

LISTENER_LOCKS = Path("run") / "listeners"
BUSY_RETRY = 0.05  # seconds before looking again at keys a peer process was delivering
STOP_CHECK = 0.1  # how often a sleeping listener looks at its stop event


class SignalService:
    """Send, list and listen to signals on one database (see the module docstring)."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], home: Path, *,
                 clock: Clock | None = None, batch_size: int = 1000) -> None:
        self.engine = engine
        self.sessions = sessions
        self.home = Path(home)
        self.clock: Clock = clock or SystemClock()
        self.batch_size = batch_size
        self._reads = make_sessions(reader(engine))
        self._postgres = engine.dialect.name == "postgresql"

    # -- sending -------------------------------------------------------------------------------------

    def send(self, key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
        """Store the next version of `key` (one transaction), then ring the doorbells."""
        with self.sessions.begin() as session:
            signal = signal_store.send(session, key, value, sender=sender, now=self.clock.now(), meta=meta)
        ring(self.engine, self.home)
        return signal

    def send_many(self, items: Sequence[signal_store.Item], *, sender: str) -> list[Signal]:
        """Store a batch of (key, value, meta) in one transaction, then ring the doorbells."""
        with self.sessions.begin() as session:
            signals = signal_store.send_many(session, items, sender=sender, now=self.clock.now())
        if signals:
            ring(self.engine, self.home)
        return signals

    # -- listening -----------------------------------------------------------------------------------

    def listen(self, listener: str, keys: list[str], watcher: Watcher, *, stop: threading.Event | None = None,
               timeout: float | None = None, poll_interval: float = 1.0) -> None:
        """Deliver the signals of `keys` after `listener`'s cursors to `watcher`, then every new one, until
        `stop` is set or `timeout` seconds have passed (forever if neither is given).

        The watcher gets lists of signals in id order (version order per key), at most `batch_size` at a
        time; the cursors move once it returned. An exception from the watcher (or the database) ends
        `listen` with the cursors where they were, so those signals come again on the next `listen`.
        """
        if not listener or len(listener) > 250:
            raise InvalidInput(f"a listener name has 1 to 250 characters, not {len(listener)}")
        wanted = sorted({validate_key(k) for k in keys})
        if not wanted:
            raise InvalidInput("listen needs at least one signal key")
        if poll_interval <= 0:
            raise InvalidInput(f"poll_interval must be positive, not {poll_interval}")
        deadline = None if timeout is None else time.monotonic() + timeout

        def over() -> bool:
            return (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline)

        with open_doorbell(self.engine, self.home) as bell:  # open before the first read: no ring is missed
            if self._postgres:
                with self.sessions.begin() as session:  # cursor rows exist, so that rounds can lock them
                    signal_store.ensure_cursors(session, listener, wanted, self.clock.now())
            while not over():
                bell.drain()  # before reading: a ring from now on means something newer than what we read
                full, busy = self.deliver(listener, wanted, watcher)
                if full:
                    continue
                self._sleep(bell, BUSY_RETRY if busy else poll_interval, stop, deadline)

    def deliver(self, listener: str, keys: Sequence[str], watcher: Watcher) -> tuple[bool, bool]:
        """One round: deliver up to `batch_size` signals after the cursors. Returns (a full batch was
        delivered: there may be more; some keys were being delivered by another process)."""
        if self._postgres:
            with self.sessions.begin() as session:
                at = signal_store.cursors(session, listener, keys, lock=True, skip_locked=True)
                batch = signal_store.pending(session, at, limit=self.batch_size)
                if batch:
                    watcher(batch)
                    signal_store.advance_many(session, listener, _newest(batch), self.clock.now())
            return len(batch) >= self.batch_size, len(at) < len(keys)
        with self._listener_lock(listener) as held:
            if not held:
                return False, True
            with self._reads.begin() as session:
                batch = signal_store.pending(session, signal_store.cursors(session, listener, keys),
                                             limit=self.batch_size)
            if batch:
                watcher(batch)
                with self.sessions.begin() as session:
                    signal_store.advance_many(session, listener, _newest(batch), self.clock.now())
        return len(batch) >= self.batch_size, False

    @contextlib.contextmanager
    def _listener_lock(self, listener: str) -> Iterator[bool]:
        folder = self.home / LISTENER_LOCKS
        folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(listener.encode()).hexdigest()[:32] + ".lock"
        fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # releases the lock

    @staticmethod
    def _sleep(bell: Doorbell, seconds: float, stop: threading.Event | None, deadline: float | None) -> None:
        end = time.monotonic() + seconds
        if deadline is not None:
            end = min(end, deadline)
        while True:
            left = end - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return
            if wait([bell.handle()], timeout=min(left, STOP_CHECK) if stop is not None else left):
                return

    # -- reading -------------------------------------------------------------------------------------

    def newest_id(self) -> int:
        with self._reads.begin() as session:
            return signal_store.newest_id(session)

    def list(self, key: str | None = None, since_version: int = 0, *, since_id: int = 0,
             limit: int | None = None) -> list[Signal]:
        """Signals in id order, or one key's in version order (see ledger.store.signals.listing)."""
        with self._reads.begin() as session:
            return signal_store.listing(session, key, since_version=since_version, since_id=since_id, limit=limit)


def _newest(batch: Sequence[Signal]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in batch:
        out[s.key] = max(out.get(s.key, 0), s.version)
    return out
