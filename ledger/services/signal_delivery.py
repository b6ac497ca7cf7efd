"""How a sleeping process hears of a new signal at once, without polling the database.

A listener opens a :class:`Doorbell`, then reads the database, then sleeps on ``doorbell.handle()``
(with ``multiprocessing.connection.wait`` or ``select``, next to its other handles). When woken it
calls ``drain()`` and reads the database again. A doorbell carries no data: it only says "look
again", so a ring that is lost or merged with another costs nothing as long as the listener opened
its doorbell *before* its first read, and drains it *before* each following read. A listener should
still wake every few seconds (its poll interval) in case a ring never comes (a sender on another
machine with SQLite on a network share, a doorbell folder that is not shared, a dropped connection).

- **PostgreSQL: LISTEN/NOTIFY.** Every transaction that sends signals runs ``pg_notify('ledger_signals',
  <id>)``; the server delivers it when, and only if, the transaction commits, to every connection
  that runs ``LISTEN ledger_signals``, on any machine. The doorbell is one dedicated autocommit
  psycopg connection; its socket becomes readable when a notification arrives. The sender does
  nothing after commit. A broken connection wakes the sleeper (its socket reads end-of-file); `drain`
  then reconnects, and until it can, `handle` is a pipe that never rings and reconnection is retried
  every few seconds, so the listener falls back to polling instead of spinning.
- **SQLite: a Unix datagram socket per listener** at ``$LEDGER_HOME/run/doorbells/<pid>-<random>.sock``.
  SQLite has no notifications and is reachable only from one machine, so after committing signals the
  sender calls :func:`ring`: one byte sent to every socket in that folder (a few microseconds each).
  Sockets are non-blocking on both sides: a doorbell with rings pending is already ringing, so a full
  queue is ignored. A socket file whose process is gone refuses the datagram and is deleted there.
  Datagram sockets need no connection and no thread, and a dead listener leaves nothing that blocks
  a sender. Paths longer than a Unix socket address allows are reached through ``/proc/self/fd``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

DOORBELLS = Path("run") / "doorbells"
RECONNECT_EVERY = 5.0  # seconds between attempts to reopen a broken LISTEN connection
_MAX_SOCKET_PATH = 100  # sockaddr_un holds 108 bytes on Linux, 104 on macOS


@functools.lru_cache(maxsize=16)
def doorbell_folder(home: Path) -> Path:
    return Path(home) / DOORBELLS


class Doorbell:
    """Something to sleep on that becomes readable when a signal may have been sent.

    Call `handle()` before each wait (it may change after `drain()` reconnected), `drain()` after
    waking (and before reading the database), and `close()` when done. Usable as a context manager.
    """

    def handle(self) -> Any:
        """An int file descriptor (or an object with fileno()) for multiprocessing.connection.wait."""
        raise NotImplementedError

    def drain(self) -> None:
        """Consume pending rings without blocking."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Doorbell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Silent:
    """A pipe nobody writes to: a handle that never becomes readable."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()

    def close(self) -> None:
        for fd in (self.r, self.w):
            with contextlib.suppress(OSError):
                os.close(fd)


class NullDoorbell(Doorbell):
    """Never rings: for databases without a notification mechanism; listeners poll."""

    def __init__(self) -> None:
        self._silent = _Silent()

    def handle(self) -> Any:
        return self._silent.r

    def drain(self) -> None:
        pass

    def close(self) -> None:
        self._silent.close()


def _address(folder_fd: int, folder: Path, name: str) -> str:
    path = str(folder / name)
    return path if len(path.encode()) <= _MAX_SOCKET_PATH else f"/proc/self/fd/{folder_fd}/{name}"


class SocketDoorbell(Doorbell):
    """A bound, non-blocking Unix datagram socket in the doorbell folder (SQLite)."""

    def __init__(self, home: Path) -> None:
        self.folder = doorbell_folder(home)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{os.getpid()}-{secrets.token_hex(6)}.sock"
        self._pid = os.getpid()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        folder_fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._sock.bind(_address(folder_fd, self.folder, self.path.name))
        except BaseException:
            self._sock.close()
            raise
        finally:
            os.close(folder_fd)

    def handle(self) -> Any:
        return self._sock.fileno()

    def drain(self) -> None:
        while True:
            try:
                self._sock.recv(64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return

    def close(self) -> None:
        if self._sock.fileno() < 0:
            return
        self._sock.close()
        if os.getpid() == self._pid:  # a forked child must not remove its parent's doorbell
            with contextlib.suppress(OSError):
                self.path.unlink()


class PostgresDoorbell(Doorbell):
    """A dedicated autocommit connection that runs LISTEN ledger_signals (PostgreSQL)."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self.conninfo = conninfo
        self.connect_timeout = connect_timeout
        self._pid = os.getpid()
        self._conn: Any = None
        self._silent = _Silent()
        self._retry_at = 0.0
        self._closed = False
        self._connect()  # when the server cannot be reached now, retried by handle() and drain()

    def _connect(self) -> None:
        import psycopg

        from ledger.store import signals as signal_store

        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=self.connect_timeout)
        except psycopg.Error:
            self._conn = None
            self._retry_at = time.monotonic() + RECONNECT_EVERY
            return
        try:
            signal_store.listen(conn)
        except psycopg.Error:
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None
            self._retry_at = time.monotonic() + RECONNECT_EVERY
            return
        self._conn = conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        self._retry_at = time.monotonic()

    def handle(self) -> Any:
        if self._conn is None and not self._closed and time.monotonic() >= self._retry_at:
            self._connect()
        return self._conn.fileno() if self._conn is not None else self._silent.r

    def drain(self) -> None:
        import psycopg

        if self._conn is None:
            if not self._closed and time.monotonic() >= self._retry_at:
                self._connect()
            return
        try:
            for _ in self._conn.notifies(timeout=0):
                pass
        except psycopg.Error:  # the connection broke: reconnect now (LISTEN again) or later
            self._drop()
            self._connect()

    def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None and os.getpid() == self._pid:
            with contextlib.suppress(Exception):
                conn.close()
        self._silent.close()


def conninfo_for(engine: Engine) -> str:
    """The libpq connection string of a PostgreSQL engine's URL (with its password)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def open_doorbell(engine: Engine, home: Path) -> Doorbell:
    """A doorbell for signals sent to this engine's database (see the module docstring)."""
    dialect = engine.dialect.name
    if dialect == "postgresql":
        return PostgresDoorbell(conninfo_for(engine))
    if dialect == "sqlite":
        return SocketDoorbell(home)
    return NullDoorbell()


def ring(engine: Engine, home: Path, *, skip: Doorbell | None = None) -> None:
    """Tell sleeping listeners that signals were committed. Call after the commit; never raises. `skip`:
    the caller's own doorbell, which it need not ring (it goes on to read what it sent anyway).

    On PostgreSQL this does nothing: the NOTIFY went with the transaction.
    """
    try:
        if engine.dialect.name == "sqlite":
            ring_folder(doorbell_folder(home), skip=skip.path.name if isinstance(skip, SocketDoorbell) else None)
    except Exception:  # waking listeners early is an optimisation; they poll anyway
        pass


_LISTED: dict[str, tuple[int, int, list[str]]] = {}  # folder -> (its mtime, when listed, its sockets' names)


def _sockets(folder: Path) -> list[str]:
    """The doorbell sockets in `folder`. A listing is used again while the folder's modification time is the one
    it had, if it was taken more than a second after that time (a time stamp is coarse: a socket made in the
    same tick as the listing would not change it). The scheduler rings after every loop that sent signals."""
    key = os.fspath(folder)
    changed = os.stat(key).st_mtime_ns
    found = _LISTED.get(key)
    if found is not None and found[0] == changed and found[1] - changed > 1_000_000_000:
        return found[2]
    listed = time.time_ns()
    names = [n for n in os.listdir(key) if n.endswith(".sock")]
    _LISTED[key] = (changed, listed, names)
    return names


def ring_folder(folder: Path, *, skip: str | None = None) -> int:
    """Send one byte to every doorbell socket in `folder` but `skip`; remove dead ones. Returns how many rang."""
    try:
        names = [n for n in _sockets(folder) if n != skip]
    except OSError:
        return 0
    if not names:
        return 0
    rang = 0
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            for name in names:
                try:
                    sock.sendto(b"!", _address(folder_fd, folder, name))
                    rang += 1
                except (BlockingIOError, InterruptedError):  # its queue is full: it is ringing already
                    rang += 1
                except ConnectionRefusedError:  # nobody listens there any more
                    with contextlib.suppress(OSError):
                        os.unlink(folder / name)
                except OSError:  # gone meanwhile (FileNotFoundError), not ours (PermissionError), ...
                    pass
    finally:
        os.close(folder_fd)
    return rang
