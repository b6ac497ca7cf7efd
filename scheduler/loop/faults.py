"""Database faults a long-lived job survives: which errors are transient, and how long to wait between tries.

A transient error is one where the same transaction, tried again later, can succeed: SQLite's "database is
locked" / "busy" (another process holds the write lock longer than the busy timeout) or "database or disk is
full" (as PostgreSQL's disk_full, class 53: someone frees space), a PostgreSQL
connection lost or refused (server restart, failover, a killed backend), a serialization failure or a
deadlock. Everything else (a constraint violated, a bad statement, a missing table) is a bug or a broken
database, and retrying it would only hide it.

Pure: no I/O, no clock; the job passes in the time it has been failing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError

# PostgreSQL SQLSTATE classes and codes worth another try (Appendix A of the PostgreSQL manual)
_TRANSIENT_SQLSTATE_CLASSES = ("08", "57", "53")  # connection exception, operator intervention, resources
_TRANSIENT_SQLSTATES = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
# (a full disk too: once space is freed the same transaction succeeds; decision 0255)
_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database is busy", "disk i/o error",
                     "database or disk is full")
_CONNECTION_WORDS = ("server closed the connection", "connection refused", "terminating connection",
                     "connection is closed", "connection already closed", "could not connect",
                     "the database system is starting up", "the database system is shutting down",
                     "consuming input failed", "ssl connection has been closed", "connection timeout",
                     "connection to server")


def _sqlstate(exc: BaseException) -> str | None:
    for attr in ("sqlstate", "pgcode"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def is_transient(exc: BaseException) -> bool:
    """True when the operation that raised `exc` may succeed if tried again later."""
    if isinstance(exc, DisconnectionError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        orig = exc.orig
        code = _sqlstate(orig) if orig is not None else None
        if code is not None:
            return code in _TRANSIENT_SQLSTATES or code[:2] in _TRANSIENT_SQLSTATE_CLASSES
        if not isinstance(exc, OperationalError | InterfaceError):
            return False
        text = str(orig if orig is not None else exc).lower()
        return any(w in text for w in _SQLITE_TRANSIENT) or any(w in text for w in _CONNECTION_WORDS)
    return False


def first_line(exc: BaseException) -> str:
    """The driver's message, first line only (SQLAlchemy appends the statement and parameters)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


@dataclass
class Backoff:
    """Exponential backoff with full jitter, capped, and a limit on how long an outage may last.

    `delay(n)` is the wait before the n-th retry (n >= 1) of one outage; `gives_up(failing_for)` says the
    outage has lasted too long (the daemon then exits with the error rather than hang for ever)."""

    initial: float = 0.1
    maximum: float = 5.0
    max_outage: float = 600.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        ceiling = min(self.maximum, self.initial * (2 ** max(0, attempt - 1)))
        return float(ceiling / 2 + self.rng.uniform(0, ceiling / 2))  # never 0: at least half the ceiling

    def gives_up(self, failing_for: float) -> bool:
        return failing_for >= self.max_outage
