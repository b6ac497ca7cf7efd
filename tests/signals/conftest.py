"""Fixtures for the signal tests: a migrated database on SQLite or (marked postgres) PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.services.signal_service import SignalService
from ledger.store.db import make_engine, make_sessions
from tests.conftest import REPO, copy_migrated


@dataclass
class Db:
    """A migrated database and a LEDGER_HOME, with the environment a subprocess needs to use them."""

    url: str
    home: Path
    engine: Engine
    sessions: sessionmaker[Session]

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(LEDGER_HOME=str(self.home), LEDGER_DATABASE_URL=self.url, PYTHONPATH=str(REPO),
                   COLUMNS="200", NO_COLOR="1")
        return env

    def service(self, clock: Any = None) -> SignalService:
        return SignalService(self.engine, self.sessions, self.home, clock=clock)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "sqlite":  # a copy of the session's migrated file (tests/conftest.py)
        url = f"sqlite:///{copy_migrated(request.getfixturevalue('migrated_sqlite'), home / 'ledger.db')}"
        engine = make_engine(url)
        sessions = make_sessions(engine)
    else:
        url = request.getfixturevalue("migrated_postgres_url")  # a copy of the session's template (tests/conftest.py)
        engine = make_engine(url)
        sessions = make_sessions(engine)
    yield Db(url, home, engine, sessions)
    engine.dispose()
