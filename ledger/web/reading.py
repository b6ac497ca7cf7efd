"""What the web view's requests read with: read-only sessions on the ledger's database, and the time now.
Shared by the application (ledger/web/app.py), which opens the Reader, and the routes (api.py, pages.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated

import pendulum
from fastapi import Path, Request
from pendulum import DateTime
from sqlalchemy.orm import Session, sessionmaker

from ledger.core.errors import InvalidInput
from ledger.infra.config import Settings
from ledger.store.db import ensure_ready, make_read_engine, make_sessions


class Reader:
    """Read-only sessions on the ledger's database, on the engine of the CLI's read commands: on SQLite a
    connection opened read-only (it never takes the write lock), on PostgreSQL READ ONLY transactions."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        engine = make_read_engine(settings.database_url)
        ensure_ready(settings.database_url, engine)  # once: a server on a database that is not ready refuses
        self.sessions: sessionmaker[Session] = make_sessions(engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        session = self.sessions()
        try:
            yield session
        finally:
            session.close()  # ends the transaction without a commit


def session_of(request: Request) -> AbstractContextManager[Session]:
    """A read-only session for one request."""
    db: Reader = request.app.state.reader
    return db.session()


def now() -> DateTime:
    return pendulum.now("UTC")


# ids are 64-bit integers (BIGINT), the first one 1: an id in a URL outside that range is refused (400), never
# given to the database (whose driver would raise: a 500)
MAX_ID = 2**63 - 1
IdInUrl = Annotated[int, Path(ge=1, le=MAX_ID)]


def id_in_url(text: str, what: str = "run id") -> int:
    """An id written in a URL as text: a whole number from 1 to MAX_ID, else InvalidInput (400)."""
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{what} must be a number, got {text!r}") from None
    if not 1 <= value <= MAX_ID:
        raise InvalidInput(f"{what} {value} is out of range: ids go from 1 to {MAX_ID}")
    return value
