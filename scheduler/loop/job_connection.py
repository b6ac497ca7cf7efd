"""The database connection a job's transactions run on.

On SQLite a job keeps one connection for all its transactions: checking one out of the pool and returning it
cost as much as a loop's statements, and PRAGMA data_version (scheduler/loop/others_writes.py) is only meaningful on
one connection. On PostgreSQL each transaction takes a connection from the pool, which pings it first (a server
restart or failover leaves kept connections dead).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.store.commit import finish


@dataclass
class JobConnection:
    engine: Engine
    sessions: sessionmaker[Session]
    kept: Connection | None = None  # SQLite: the connection of the job's transactions
    _kept_session: Session | None = None  # the session on it, reset for each transaction

    @property
    def serial(self) -> bool:
        """Whether transactions take the database's one write lock (SQLite)."""
        return self.engine.dialect.name == "sqlite"

    def begin(self) -> contextlib.AbstractContextManager[Session]:
        """A session in a new transaction, committed when the block ends."""
        return self._on_kept_connection() if self.serial else self.sessions.begin()

    @contextlib.contextmanager
    def _on_kept_connection(self) -> Iterator[Session]:
        conn = self.kept
        if conn is None or conn.closed or conn.invalidated:
            conn, self._kept_session = self.engine.connect(), None
            self.kept = conn
        try:
            with conn.begin():
                session = self._kept_session
                if session is None:  # (making a Session costs about as much as a loop's statement or two)
                    session = self._kept_session = self.sessions(bind=conn)
                session.info.clear()  # as a new session's: close() keeps it (the events written, Hot's cursor)
                try:
                    yield session
                    finish(session)  # (the session does not commit: the connection's transaction does)
                    session.flush()
                finally:
                    session.close()
        except BaseException:
            self.let_go()  # a fault: the next transaction starts on a fresh connection
            raise

    def let_go(self) -> None:
        """Close the kept connection (after a fault, or when the job ends)."""
        conn, self.kept, self._kept_session = self.kept, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
